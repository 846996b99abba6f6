"""Storage objects karpy reads to keep pods next to their volumes.

A pod's PersistentVolumeClaims pin it to the zone of a bound PersistentVolume (its node
affinity) or, when unbound, to the zones a StorageClass allows; CSINode reports how many
volumes a node may attach per driver. The scheduling simulation turns these into zone
requirements and volume limits. A VolumeAttachment says a volume is still attached to a node:
termination waits for those of a draining node to go before it terminates the instance, so a
stateful pod's volume can attach on its new node at once.
"""

# karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from karpy.apis.kube.common import NodeSelector, ResourceRequirements, TypedObjectReference
from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.schema import field


@attrs.frozen(kw_only=True)
class PersistentVolumeClaimSpec:
    access_modes: tuple[str, ...] = ()
    resources: ResourceRequirements = attrs.field(factory=ResourceRequirements)
    storage_class_name: str | None = None
    volume_name: str | None = None
    volume_mode: str | None = None
    data_source: TypedObjectReference | None = None


@attrs.frozen(kw_only=True)
class PersistentVolumeClaimStatus:
    phase: str | None = None
    capacity: Mapping[str, Quantity] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class PersistentVolumeClaimTemplate:
    """The claim a generic ephemeral volume creates for its pod."""

    spec: PersistentVolumeClaimSpec
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)


@attrs.frozen(kw_only=True)
class PersistentVolumeClaim:
    KIND: ClassVar[str] = "PersistentVolumeClaim"
    API_VERSION: ClassVar[str] = "v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = attrs.field(factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = attrs.field(factory=PersistentVolumeClaimStatus)
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"


@attrs.frozen(kw_only=True)
class VolumeNodeAffinity:
    required: NodeSelector | None = None


@attrs.frozen(kw_only=True)
class CSIPersistentVolumeSource:
    driver: str
    volume_handle: str


@attrs.frozen(kw_only=True)
class ObjectReference:
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


@attrs.frozen(kw_only=True)
class PersistentVolumeSpec:
    capacity: Mapping[str, Quantity] = attrs.field(factory=dict)
    access_modes: tuple[str, ...] = ()
    storage_class_name: str | None = None
    node_affinity: VolumeNodeAffinity | None = None
    csi: CSIPersistentVolumeSource | None = None
    claim_ref: ObjectReference | None = None
    persistent_volume_reclaim_policy: str | None = None


@attrs.frozen(kw_only=True)
class PersistentVolumeStatus:
    phase: str | None = None


@attrs.frozen(kw_only=True)
class PersistentVolume:
    KIND: ClassVar[str] = "PersistentVolume"
    API_VERSION: ClassVar[str] = "v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PersistentVolumeSpec = attrs.field(factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = attrs.field(factory=PersistentVolumeStatus)
    api_version: str = "v1"
    kind: str = "PersistentVolume"


@attrs.frozen(kw_only=True)
class TopologySelectorLabelRequirement:
    key: str
    values: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class TopologySelectorTerm:
    match_label_expressions: tuple[TopologySelectorLabelRequirement, ...] = ()


@attrs.frozen(kw_only=True)
class StorageClass:
    KIND: ClassVar[str] = "StorageClass"
    API_VERSION: ClassVar[str] = "storage.k8s.io/v1"

    provisioner: str
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    parameters: Mapping[str, str] = attrs.field(factory=dict)
    volume_binding_mode: str | None = None
    allowed_topologies: tuple[TopologySelectorTerm, ...] = ()
    reclaim_policy: str | None = None
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"


@attrs.frozen(kw_only=True)
class VolumeNodeResources:
    count: int | None = None


@attrs.frozen(kw_only=True)
class CSINodeDriver:
    name: str
    node_id: str = field(wire="nodeID")
    topology_keys: tuple[str, ...] = ()
    allocatable: VolumeNodeResources | None = None


@attrs.frozen(kw_only=True)
class CSINodeSpec:
    drivers: tuple[CSINodeDriver, ...] = ()


@attrs.frozen(kw_only=True)
class CSINode:
    KIND: ClassVar[str] = "CSINode"
    API_VERSION: ClassVar[str] = "storage.k8s.io/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: CSINodeSpec = attrs.field(factory=CSINodeSpec)
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"


@attrs.frozen(kw_only=True)
class VolumeAttachmentSource:
    """What is attached: a PersistentVolume by name (inline volumes carry none)."""

    persistent_volume_name: str | None = None


@attrs.frozen(kw_only=True)
class VolumeAttachmentSpec:
    attacher: str = ""
    node_name: str = ""
    source: VolumeAttachmentSource = attrs.field(factory=VolumeAttachmentSource)


@attrs.frozen(kw_only=True)
class VolumeAttachmentStatus:
    attached: bool = False


@attrs.frozen(kw_only=True)
class VolumeAttachment:
    KIND: ClassVar[str] = "VolumeAttachment"
    API_VERSION: ClassVar[str] = "storage.k8s.io/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: VolumeAttachmentSpec = attrs.field(factory=VolumeAttachmentSpec)
    status: VolumeAttachmentStatus = attrs.field(factory=VolumeAttachmentStatus)
    api_version: str = "storage.k8s.io/v1"
    kind: str = "VolumeAttachment"
