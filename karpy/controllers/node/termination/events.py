"""The Events the termination controller records, one constructor each, so the wording users
read in `kubectl describe` is stated once (as Karpenter's node/termination/events.go)."""

from __future__ import annotations

import datetime

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.kube.events import Event, normal, warning
from karpy.kube.kinds import NODES, PODS


def evicted(pod: Pod) -> Event:
    """The Eviction API accepted the pod's eviction."""
    return normal(PODS, pod, "Evicted", "Evicted pod")


def grace_period_expiring(pod: Pod, deadline: datetime.datetime, *, grace: int, own: int) -> Event:
    """The pod is deleted, not evicted, with `grace` seconds to go of its `own`
    terminationGracePeriodSeconds: what is left of the node's termination grace period."""
    return warning(
        PODS,
        pod,
        "TerminationGracePeriodExpiring",
        (
            f"Deleting the pod to accommodate the terminationTime"
            f" {deadline.isoformat()} of the node. The pod was granted {grace} seconds of"
            f" grace-period of its {own} terminationGracePeriodSeconds. This bypasses the PDB"
            f" of the pod and the do-not-disrupt annotation."
        ),
    )


def failed_draining(node: Node, waiting: int) -> Event:
    """`waiting` pods still hold the node."""
    return warning(
        NODES,
        node,
        "FailedDraining",
        f"Failed to drain node, {waiting} pods are waiting to be evicted",
    )


def awaiting_volume_detachment(node: Node, attachments: int) -> Event:
    """The node is drained, but `attachments` VolumeAttachments still hold its instance."""
    return warning(
        NODES,
        node,
        "AwaitingVolumeDetachment",
        f"Awaiting deletion of {attachments} VolumeAttachments bound to node",
    )
