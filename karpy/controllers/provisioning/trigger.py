"""Which pods should make karpy provision: Karpenter's provisionable-pod predicate.

A pod triggers provisioning only when kube-scheduler has already tried and failed to place it
(PodScheduled=False, reason Unschedulable) and nothing else is about to place it: it is not bound,
not nominated by a preemption, not run by a DaemonSet (whose pods follow the nodes, not the other
way round), not a kubelet mirror pod, not being deleted, and is scheduled by the default scheduler.
Pure: a function of the Pod alone, so the informer callback (`pod_subscriber`) can call it on
every event without I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from typing import Final

from karpy.apis.kube.pod import Pod
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1.labels import ANNOTATION_MIRROR_POD
from karpy.controllers.provisioning.batcher import Batcher
from karpy.kube.watch import Event, EventType

DEFAULT_SCHEDULER: Final = "default-scheduler"
POD_SCHEDULED: Final = "PodScheduled"
REASON_UNSCHEDULABLE: Final = "Unschedulable"


class NotProvisionable(enum.StrEnum):
    """Why a pod does not trigger provisioning (the first rule it fails, in this order)."""

    TERMINATING = "terminating"
    BOUND = "bound"
    NOMINATED = "nominated"
    NOT_FAILED_TO_SCHEDULE = "not-failed-to-schedule"
    DAEMONSET = "daemonset"
    MIRROR = "mirror"
    OTHER_SCHEDULER = "other-scheduler"


def _failed_to_schedule(pod: Pod) -> bool:
    return any(
        c.type == POD_SCHEDULED
        and c.status is ConditionStatus.FALSE
        and c.reason == REASON_UNSCHEDULABLE
        for c in pod.status.conditions
    )


def not_provisionable(
    pod: Pod, *, scheduler_names: Collection[str] = (DEFAULT_SCHEDULER,)
) -> NotProvisionable | None:
    """The first reason `pod` should not trigger provisioning, or None when it should.

    `scheduler_names` are the schedulers whose pods karpy provisions for; a pod without a
    schedulerName is the default scheduler's, as the apiserver defaults it.
    """
    meta = pod.metadata
    if meta.deletion_timestamp is not None:
        return NotProvisionable.TERMINATING
    if pod.spec.node_name:
        return NotProvisionable.BOUND
    if pod.status.nominated_node_name:
        return NotProvisionable.NOMINATED
    if not _failed_to_schedule(pod):
        return NotProvisionable.NOT_FAILED_TO_SCHEDULE
    if any(ref.kind == "DaemonSet" for ref in meta.owner_references):
        return NotProvisionable.DAEMONSET
    if ANNOTATION_MIRROR_POD in meta.annotations or any(
        ref.kind == "Node" for ref in meta.owner_references
    ):
        return NotProvisionable.MIRROR
    if (pod.spec.scheduler_name or DEFAULT_SCHEDULER) not in scheduler_names:
        return NotProvisionable.OTHER_SCHEDULER
    return None


def is_provisionable(pod: Pod, *, scheduler_names: Collection[str] = (DEFAULT_SCHEDULER,)) -> bool:
    """Whether `pod` should trigger provisioning (see `not_provisionable`)."""
    return not_provisionable(pod, scheduler_names=scheduler_names) is None


def pod_subscriber(
    batcher: Batcher, *, scheduler_names: Collection[str] = (DEFAULT_SCHEDULER,)
) -> Callable[[Event[Pod]], None]:
    """An informer callback that triggers `batcher` with each provisionable pod's UID.

    Synchronous and non-blocking, as informer subscribers must be.
    """

    def on_event(event: Event[Pod]) -> None:
        if event.type is EventType.DELETED:
            return
        if is_provisionable(event.item.obj, scheduler_names=scheduler_names):
            batcher.trigger(event.item.ref.uid)

    return on_event
