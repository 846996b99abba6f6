"""The Pod fields karpy reads: everything the scheduling simulation needs to place a pod.

Karpenter decides where a pod fits from its requests (containers, init containers, restartable
sidecars, overhead), node selector and affinity, tolerations, topology spread, host ports and
volumes, plus its owner, priority and status. Anything the simulation honours must be decoded
here; anything else stays out so a 20,000-pod snapshot decodes quickly.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar

import attrs

from karpy.apis.kube.common import (
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    ResourceRequirements,
    Toleration,
)
from karpy.apis.kube.storage import PersistentVolumeClaimTemplate
from karpy.apis.meta import ConditionStatus, ObjectMeta, Quantity
from karpy.apis.schema import field


class Protocol(enum.StrEnum):
    TCP = "TCP"
    UDP = "UDP"
    SCTP = "SCTP"


@attrs.frozen(kw_only=True)
class ContainerPort:
    container_port: int
    host_port: int | None = None
    host_ip: str | None = field(default=None, wire="hostIP")
    protocol: Protocol = Protocol.TCP
    name: str | None = None


@attrs.frozen(kw_only=True)
class Container:
    name: str
    image: str | None = None
    resources: ResourceRequirements = attrs.field(factory=ResourceRequirements)
    ports: tuple[ContainerPort, ...] = ()
    # "Always" on an init container makes it a sidecar that keeps running (KEP-753).
    restart_policy: str | None = None


@attrs.frozen(kw_only=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@attrs.frozen(kw_only=True)
class NodeAffinity:
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


@attrs.frozen(kw_only=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class WeightedPodAffinityTerm:
    weight: int
    pod_affinity_term: PodAffinityTerm


@attrs.frozen(kw_only=True)
class PodAffinity:
    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


@attrs.frozen(kw_only=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class UnsatisfiableConstraintAction(enum.StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class NodeInclusionPolicy(enum.StrEnum):
    HONOR = "Honor"
    IGNORE = "Ignore"


@attrs.frozen(kw_only=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: UnsatisfiableConstraintAction
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: NodeInclusionPolicy | None = None
    node_taints_policy: NodeInclusionPolicy | None = None
    match_label_keys: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class PersistentVolumeClaimVolumeSource:
    claim_name: str
    read_only: bool | None = None


@attrs.frozen(kw_only=True)
class EphemeralVolumeSource:
    """A generic ephemeral volume: its PVC is named `<pod>-<volume>`."""

    volume_claim_template: PersistentVolumeClaimTemplate | None = None


@attrs.frozen(kw_only=True)
class Volume:
    name: str
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None


@attrs.frozen(kw_only=True)
class PodSpec:
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: Mapping[str, Quantity] = attrs.field(factory=dict)
    node_selector: Mapping[str, str] = attrs.field(factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    volumes: tuple[Volume, ...] = ()
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    scheduler_name: str | None = None
    node_name: str | None = None
    termination_grace_period_seconds: int | None = None
    host_network: bool | None = None
    runtime_class_name: str | None = None


class PodPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class PodCondition:
    type: str
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


@attrs.frozen(kw_only=True)
class PodStatus:
    phase: PodPhase | None = None
    conditions: tuple[PodCondition, ...] = ()
    nominated_node_name: str | None = None
    start_time: datetime | None = None


@attrs.frozen(kw_only=True)
class Pod:
    KIND: ClassVar[str] = "Pod"
    API_VERSION: ClassVar[str] = "v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PodSpec = attrs.field(factory=PodSpec)
    status: PodStatus = attrs.field(factory=PodStatus)
    api_version: str = "v1"
    kind: str = "Pod"
