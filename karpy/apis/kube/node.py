"""The Node fields karpy reads and writes.

A Node is how a NodeClaim's machine shows up in the cluster: karpy matches it by providerID,
syncs labels and taints onto it, watches its Ready condition and allocatable resources, and
owns its termination finalizer.
"""

# karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import ConditionStatus, ObjectMeta, Quantity
from karpy.apis.schema import field


@attrs.frozen(kw_only=True)
class NodeSpec:
    provider_id: str | None = field(default=None, wire="providerID")
    taints: tuple[Taint, ...] = ()
    unschedulable: bool | None = None


@attrs.frozen(kw_only=True)
class NodeCondition:
    type: str
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_heartbeat_time: datetime | None = None
    last_transition_time: datetime | None = None


@attrs.frozen(kw_only=True)
class NodeAddress:
    type: str
    address: str


@attrs.frozen(kw_only=True)
class NodeSystemInfo:
    machine_id: str = field(default="", wire="machineID")
    system_uuid: str = field(default="", wire="systemUUID")
    boot_id: str = field(default="", wire="bootID")
    kernel_version: str = ""
    os_image: str = field(default="", wire="osImage")
    container_runtime_version: str = ""
    kubelet_version: str = ""
    kube_proxy_version: str = ""
    operating_system: str = ""
    architecture: str = ""


@attrs.frozen(kw_only=True)
class NodeStatus:
    capacity: Mapping[str, Quantity] = attrs.field(factory=dict)
    allocatable: Mapping[str, Quantity] = attrs.field(factory=dict)
    conditions: tuple[NodeCondition, ...] = ()
    addresses: tuple[NodeAddress, ...] = ()
    node_info: NodeSystemInfo | None = None
    phase: str | None = None


@attrs.frozen(kw_only=True)
class Node:
    KIND: ClassVar[str] = "Node"
    API_VERSION: ClassVar[str] = "v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: NodeSpec = attrs.field(factory=NodeSpec)
    status: NodeStatus = attrs.field(factory=NodeStatus)
    api_version: str = "v1"
    kind: str = "Node"
