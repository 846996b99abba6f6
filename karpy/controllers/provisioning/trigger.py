"""Which pods should make karpy provision: the trigger on Karpenter's provisionable-pod predicate.

A pod triggers provisioning only when kube-scheduler has already tried and failed to place it
(PodScheduled=False, reason Unschedulable) and nothing else is about to place it: it is not bound,
not nominated by a preemption, not run by a DaemonSet (whose pods follow the nodes, not the other
way round), not a kubelet mirror pod, not being deleted, and is scheduled by the default scheduler.
The predicate itself (`karpy.state.pods.is_provisionable`) is a function of the Pod alone, so the
watch's key function (`provisionable_pods`) can call it on every event without I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from karpy.apis.kube.pod import Pod
from karpy.kube.watch import Event, EventType
from karpy.state.pods import DEFAULT_SCHEDULER, is_provisionable


def provisionable_pods(
    scheduler_names: Collection[str] = (DEFAULT_SCHEDULER,),
) -> Callable[[Event[Pod]], Iterable[str]]:
    """A watch's key function naming each provisionable pod by its UID (the batch's key).

    Synchronous and non-blocking, as key functions must be.
    """

    def keys(event: Event[Pod]) -> Iterable[str]:
        if event.type is not EventType.DELETED and is_provisionable(
            event.item.obj, scheduler_names=scheduler_names
        ):
            return (event.item.ref.uid,)
        return ()

    return keys
