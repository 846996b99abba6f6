"""What a Pod is to karpy, in one place: terminal, terminating, DaemonSet-owned, mirror or static,
do-not-disrupt, reschedulable, drainable, provisionable.

Every controller asks these questions of the same Pods (provisioning: should it trigger a launch,
would it need a new home; disruption: does it keep its node busy; termination: must the drain
wait for it; pod events: does it still run on its node). Kept in one module so the answers agree
and no controller imports another for them.

Why karpy.state and not karpy.core: the predicates read the Pod's wire fields (status.phase and
conditions, ownerReferences, annotations, deletionTimestamp, schedulerName), so they work on the
API model `karpy.apis.kube.pod.Pod`, which the core may not import (the core stays free of wire
models; see the import contracts in pyproject.toml). Converting every Pod to a core view first,
just to ask one of these questions in an informer callback, would cost an allocation per event
for nothing. karpy.state already is where API Pods are read and turned into the core's
(`karpy.state.podview`), it sits below every controller and above karpy.apis, so the layering
stays as it is. Pure: functions of the object alone, no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Final

from karpy.apis.kube.pod import Pod, PodPhase
from karpy.apis.meta import ConditionStatus, HasMetadata
from karpy.apis.v1 import labels as wk

DEFAULT_SCHEDULER: Final = "default-scheduler"
POD_SCHEDULED: Final = "PodScheduled"
REASON_UNSCHEDULABLE: Final = "Unschedulable"


def is_terminal(pod: Pod) -> bool:
    """Succeeded or Failed: the pod no longer uses its node's resources."""
    return pod.status.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


def is_terminating(pod: Pod) -> bool:
    """Being deleted (it has a deletionTimestamp)."""
    return pod.metadata.deletion_timestamp is not None


def is_daemon_owned(pod: Pod) -> bool:
    """Run by a DaemonSet: it follows the nodes rather than needing one."""
    return any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references)


def is_mirror(pod: Pod) -> bool:
    """A kubelet mirror pod (annotated kubernetes.io/config.mirror): the kubelet owns it."""
    return wk.ANNOTATION_MIRROR_POD in pod.metadata.annotations


def is_node_owned(pod: Pod) -> bool:
    """Owned by its Node, as the apiserver makes a static pod's mirror."""
    return any(ref.kind == "Node" for ref in pod.metadata.owner_references)


def is_static(pod: Pod) -> bool:
    """A static pod's mirror, however it shows: the mirror annotation or a Node owner."""
    return is_mirror(pod) or is_node_owned(pod)


def do_not_disrupt(obj: HasMetadata) -> bool:
    """Whether the object (a Pod, or a Node or NodeClaim) carries karpenter.sh/do-not-disrupt=true.

    Voluntary disruption leaves such a pod's (or node's) node alone, and the drain never evicts
    the pod. The v1alpha5 names it succeeds (pod karpenter.sh/do-not-evict, node
    karpenter.sh/do-not-consolidate) count the same, so v0.x workloads keep their protection.
    """
    annotations = obj.metadata.annotations
    return any(annotations.get(key) == "true" for key in DO_NOT_DISRUPT_ANNOTATIONS)


DO_NOT_DISRUPT_ANNOTATIONS: Final = (
    wk.ANNOTATION_DO_NOT_DISRUPT,
    wk.ANNOTATION_DO_NOT_EVICT,
    wk.ANNOTATION_DO_NOT_CONSOLIDATE,
)
"""The annotations `do_not_disrupt` reads (a scenario carries these and no others)."""


def is_reschedulable(pod: Pod) -> bool:
    """Whether `pod` would need a new node if its node went away: not finished, not already
    being deleted, not a DaemonSet pod (it goes with its node) and not a static/mirror pod."""
    return not (is_terminal(pod) or is_terminating(pod) or is_daemon_owned(pod) or is_static(pod))


def needs_drain(pod: Pod) -> bool:
    """False for pods a drain never waits on: mirror pods and pods that already finished."""
    return not (is_mirror(pod) or is_terminal(pod))


class NotProvisionable(enum.StrEnum):
    """Why a pod does not trigger provisioning (the first rule it fails, in this order)."""

    TERMINATING = "terminating"
    BOUND = "bound"
    NOMINATED = "nominated"
    NOT_FAILED_TO_SCHEDULE = "not-failed-to-schedule"
    DAEMONSET = "daemonset"
    MIRROR = "mirror"
    OTHER_SCHEDULER = "other-scheduler"


def failed_to_schedule(pod: Pod) -> bool:
    """kube-scheduler tried and could not place it (PodScheduled=False, reason Unschedulable)."""
    return any(
        c.type == POD_SCHEDULED
        and c.status is ConditionStatus.FALSE
        and c.reason == REASON_UNSCHEDULABLE
        for c in pod.status.conditions
    )


def not_provisionable(
    pod: Pod, *, scheduler_names: Collection[str] = (DEFAULT_SCHEDULER,)
) -> NotProvisionable | None:
    """The first reason `pod` should not trigger provisioning, or None when it should
    (Karpenter's IsProvisionable).

    `scheduler_names` are the schedulers whose pods karpy provisions for; a pod without a
    schedulerName is the default scheduler's, as the apiserver defaults it.
    """
    if is_terminating(pod):
        return NotProvisionable.TERMINATING
    if pod.spec.node_name:
        return NotProvisionable.BOUND
    if pod.status.nominated_node_name:
        return NotProvisionable.NOMINATED
    if not failed_to_schedule(pod):
        return NotProvisionable.NOT_FAILED_TO_SCHEDULE
    if is_daemon_owned(pod):
        return NotProvisionable.DAEMONSET
    if is_static(pod):
        return NotProvisionable.MIRROR
    if (pod.spec.scheduler_name or DEFAULT_SCHEDULER) not in scheduler_names:
        return NotProvisionable.OTHER_SCHEDULER
    return None


def is_provisionable(pod: Pod, *, scheduler_names: Collection[str] = (DEFAULT_SCHEDULER,)) -> bool:
    """Whether `pod` should trigger provisioning (see `not_provisionable`)."""
    return not_provisionable(pod, scheduler_names=scheduler_names) is None
