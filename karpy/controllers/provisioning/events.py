"""The Events the provisioner records, one constructor each (as Karpenter's
provisioning/scheduling/events.go): what users read on a pending pod and on a NodePool."""

from __future__ import annotations

from typing import Final

from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodepool import NodePool
from karpy.kube.events import Event, normal, warning
from karpy.kube.kinds import NODEPOOLS, PODS

REASON_NOMINATED: Final = "Nominated"
REASON_FAILED_SCHEDULING: Final = "FailedScheduling"
REASON_INSTANCE_TYPES_FAILED: Final = "FailedGettingInstanceTypes"


def nominated(pod: Pod, target: str) -> Event:
    """The solve placed `pod` on `target` (`node/<name>` or `nodeclaim/<name>`)."""
    return normal(PODS, pod, REASON_NOMINATED, f"Pod should schedule on: {target}")


def failed_scheduling(pod: Pod, why: str) -> Event:
    """The solve found no place for `pod`; `why` says what stopped it."""
    return warning(PODS, pod, REASON_FAILED_SCHEDULING, f"Failed to schedule pod, {why}")


def instance_types_failed(pool: NodePool, error: str) -> Event:
    """The cloud provider could not list the NodePool's instance types."""
    return warning(
        NODEPOOLS, pool, REASON_INSTANCE_TYPES_FAILED, f"Failed to get instance types: {error}"
    )
