"""DaemonSets and PodDisruptionBudgets: the workload objects that shape karpy's decisions.

DaemonSet pod templates are overhead on every new node (the simulation adds their requests);
PodDisruptionBudgets decide whether a node's pods may be evicted, so consolidation and drain
respect them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar

import attrs

from karpy.apis.kube.common import LabelSelector
from karpy.apis.kube.pod import PodSpec
from karpy.apis.meta import Condition, IntOrString, ObjectMeta


@attrs.frozen(kw_only=True)
class PodTemplateSpec:
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PodSpec = attrs.field(factory=PodSpec)


@attrs.frozen(kw_only=True)
class DaemonSetSpec:
    template: PodTemplateSpec
    selector: LabelSelector | None = None


@attrs.frozen(kw_only=True)
class DaemonSetStatus:
    desired_number_scheduled: int = 0
    current_number_scheduled: int = 0
    number_ready: int = 0
    number_misscheduled: int = 0


@attrs.frozen(kw_only=True)
class DaemonSet:
    KIND: ClassVar[str] = "DaemonSet"
    API_VERSION: ClassVar[str] = "apps/v1"

    spec: DaemonSetSpec
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    status: DaemonSetStatus = attrs.field(factory=DaemonSetStatus)
    api_version: str = "apps/v1"
    kind: str = "DaemonSet"


@attrs.frozen(kw_only=True)
class PodDisruptionBudgetSpec:
    selector: LabelSelector | None = None
    min_available: IntOrString | None = None
    max_unavailable: IntOrString | None = None
    unhealthy_pod_eviction_policy: str | None = None


@attrs.frozen(kw_only=True)
class PodDisruptionBudgetStatus:
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    observed_generation: int | None = None
    disrupted_pods: Mapping[str, datetime] = attrs.field(factory=dict)
    conditions: tuple[Condition, ...] = ()


@attrs.frozen(kw_only=True)
class PodDisruptionBudget:
    KIND: ClassVar[str] = "PodDisruptionBudget"
    API_VERSION: ClassVar[str] = "policy/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = attrs.field(factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = attrs.field(factory=PodDisruptionBudgetStatus)
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"


@attrs.frozen(kw_only=True)
class DeploymentSpec:
    replicas: int | None = None
    template: PodTemplateSpec | None = None


@attrs.frozen(kw_only=True)
class PodTemplate:
    """A named pod shape (core/v1): what a CapacityBuffer's podTemplateRef names."""

    KIND: ClassVar[str] = "PodTemplate"
    API_VERSION: ClassVar[str] = "v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    template: PodTemplateSpec = attrs.field(factory=PodTemplateSpec)
    api_version: str = "v1"
    kind: str = "PodTemplate"


@attrs.frozen(kw_only=True)
class ReplicaSet:
    """What a CapacityBuffer's scalableRef reads of a ReplicaSet: replicas and pod template."""

    KIND: ClassVar[str] = "ReplicaSet"
    API_VERSION: ClassVar[str] = "apps/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: DeploymentSpec = attrs.field(factory=DeploymentSpec)
    api_version: str = "apps/v1"
    kind: str = "ReplicaSet"


@attrs.frozen(kw_only=True)
class StatefulSet:
    """What a CapacityBuffer's scalableRef reads of a StatefulSet: replicas and pod template."""

    KIND: ClassVar[str] = "StatefulSet"
    API_VERSION: ClassVar[str] = "apps/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: DeploymentSpec = attrs.field(factory=DeploymentSpec)
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"


@attrs.frozen(kw_only=True)
class Deployment:
    """Only what karpy asks of a Deployment: whether it is Cluster Autoscaler, and running; and,
    for a CapacityBuffer's scalableRef, its replicas and pod template."""

    KIND: ClassVar[str] = "Deployment"
    API_VERSION: ClassVar[str] = "apps/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: DeploymentSpec = attrs.field(factory=DeploymentSpec)
    api_version: str = "apps/v1"
    kind: str = "Deployment"
