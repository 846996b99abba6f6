"""Which pods should make karpy provision: the trigger on Karpenter's provisionable-pod predicate.

A pod triggers provisioning only when kube-scheduler has already tried and failed to place it
(PodScheduled=False, reason Unschedulable) and nothing else is about to place it: it is not bound,
not nominated by a preemption, not run by a DaemonSet (whose pods follow the nodes, not the other
way round), not a kubelet mirror pod, not being deleted, and is scheduled by the default scheduler.
The predicate itself (`karpy.state.pods.is_provisionable`) is a function of the Pod alone, so the
informer callback (`pod_subscriber`) can call it on every event without I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from karpy.apis.kube.pod import Pod
from karpy.controllers.provisioning.batcher import Batcher
from karpy.kube.watch import Event, EventType
from karpy.state.pods import DEFAULT_SCHEDULER, is_provisionable


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
