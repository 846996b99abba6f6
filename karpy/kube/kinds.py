"""The kinds karpy reads and writes (Kubernetes' and karpenter.sh's): REST coordinates, decoders.

Each `ResourceKind` binds a model from karpy.apis to the path it is listed and watched at, and
decodes through the shared codec, so an informer needs nothing but the kind. A provider binds
the kinds it owns (its NodeClass) in its own package and declares them to the operator.
"""

from __future__ import annotations

import functools
from typing import Any, Final, TypeVar

from karpy.apis.autoscaling.capacitybuffer import CapacityBuffer
from karpy.apis.codec import from_dict
from karpy.apis.kube.configmap import ConfigMap
from karpy.apis.kube.event import Event
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)
from karpy.apis.kube.workloads import (
    DaemonSet,
    Deployment,
    PodDisruptionBudget,
    PodTemplate,
    ReplicaSet,
    StatefulSet,
)
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.apis.v1alpha1.nodeoverlay import NodeOverlay
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.kube.resources import ResourceKind

T = TypeVar("T")


def kube_kind(model: type[T], plural: str, *, group: str = "", namespaced: bool) -> ResourceKind[T]:
    """The ResourceKind of a Kubernetes v1 kind from its model (which names its KIND)."""
    cls: Any = model
    return ResourceKind[T](
        kind=cls.KIND,
        plural=plural,
        group=group,
        version="v1",
        namespaced=namespaced,
        decode=functools.partial(from_dict, model),
    )


def cluster_kind(model: type[T]) -> ResourceKind[T]:
    """The ResourceKind of a cluster-scoped custom kind from its model's GROUP, VERSION, KIND and
    PLURAL (provider kinds the caller knows only as models, such as legacy NodeClasses)."""
    cls: Any = model
    return ResourceKind[T](
        kind=cls.KIND,
        plural=cls.PLURAL,
        group=cls.GROUP,
        version=cls.VERSION,
        namespaced=False,
        decode=functools.partial(from_dict, model),
    )


NODES: Final = kube_kind(Node, "nodes", namespaced=False)
PODS: Final = kube_kind(Pod, "pods", namespaced=True)
NODECLAIMS: Final = cluster_kind(NodeClaim)
NODEPOOLS: Final = cluster_kind(NodePool)
NODEOVERLAYS: Final = cluster_kind(NodeOverlay)
DAEMONSETS: Final = kube_kind(DaemonSet, "daemonsets", group="apps", namespaced=True)
PERSISTENT_VOLUMES: Final = kube_kind(PersistentVolume, "persistentvolumes", namespaced=False)
PERSISTENT_VOLUME_CLAIMS: Final = kube_kind(
    PersistentVolumeClaim, "persistentvolumeclaims", namespaced=True
)
STORAGE_CLASSES: Final = kube_kind(
    StorageClass, "storageclasses", group="storage.k8s.io", namespaced=False
)
VOLUME_ATTACHMENTS: Final = kube_kind(
    VolumeAttachment, "volumeattachments", group="storage.k8s.io", namespaced=False
)
"""Which volumes are attached to which node: termination waits for a draining node's to go."""
PODDISRUPTIONBUDGETS: Final = kube_kind(
    PodDisruptionBudget, "poddisruptionbudgets", group="policy", namespaced=True
)
PROVISIONERS: Final = cluster_kind(Provisioner)

CORE_KINDS: Final = (NODES, PODS, NODECLAIMS, NODEPOOLS)
"""What every karpy decision reads: the nodes, their pods, and karpy's own NodeClaims and
NodePools. A controller declared to read them runs only where all four are informed."""

CONFIGMAPS: Final = kube_kind(ConfigMap, "configmaps", namespaced=True)
EVENTS: Final = kube_kind(Event, "events", namespaced=True)
DEPLOYMENTS: Final = kube_kind(Deployment, "deployments", group="apps", namespaced=True)

# What CapacityBuffers read: the buffers, and the pod shapes their references name.
CAPACITYBUFFERS: Final = ResourceKind[CapacityBuffer](
    kind=CapacityBuffer.KIND,
    plural=CapacityBuffer.PLURAL,
    group=CapacityBuffer.GROUP,
    version=CapacityBuffer.VERSION,
    namespaced=True,
    decode=functools.partial(from_dict, CapacityBuffer),
)
PODTEMPLATES: Final = kube_kind(PodTemplate, "podtemplates", namespaced=True)
REPLICASETS: Final = kube_kind(ReplicaSet, "replicasets", group="apps", namespaced=True)
STATEFULSETS: Final = kube_kind(StatefulSet, "statefulsets", group="apps", namespaced=True)
