"""Draining a Node: which pods go in which order, and evicting them without breaking PDBs.

Karpenter drains in tiers so that what other pods depend on leaves last: non-critical non-daemon
pods, then non-critical DaemonSet pods, then critical non-daemon, then critical DaemonSet pods; a
tier is evicted only once every earlier tier is gone. Pods the drain leaves alone neither are
evicted nor hold the Node: finished pods, and those `drainable` rejects, as Karpenter's
IsDrainable does: static and mirror pods (the kubelet owns them), pods that tolerate
karpenter.sh/disrupted:NoSchedule (they are meant to run until the instance goes; a DaemonSet
tolerating every taint would put them straight back) and pods stuck terminating. Pods annotated
karpenter.sh/do-not-disrupt=true are never evicted but keep the Node until its termination
grace period ends. Evictions go through the Eviction API, so PodDisruptionBudgets are honoured:
a 429 is retried per pod with backoff (100 ms to 10 s), never deleted around — with one
exception that is no way around a budget: an eviction the apiserver granted but whose pod
deletion never happened (the evicting process died mid-request, its connection cut). The
apiserver charges the budget first, recording the pod in the PDB's `status.disruptedPods`, and
deletes the pod after; cut off in between, the pod stays Running while the PDB counts it as
gone, so every later eviction of it meets a 429 until kube-controller-manager drops the entry
two minutes on. A pod a PDB of its namespace lists there since its creation (`granted`) is
deleted directly, with its own grace period: the deletion its eviction was granted.

Under a terminationGracePeriod the drain has a deadline, and a pod still there is deleted
directly (past its PDB and do-not-disrupt) at the deadline minus its own
terminationGracePeriodSeconds, with the time left as its grace: every pod gets its full grace
period and the node still goes at the deadline, as Karpenter's terminator does. A pod already
terminating whose grace runs past the deadline (a user deleted it, or an eviction began it, with
more grace than the time left) is deleted again with the time left, so it too is gone by the
deadline; the apiserver only ever shortens a deletion's grace.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from opentelemetry.metrics import Counter

from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import PodDisruptionBudget
from karpy.apis.v1.taints import DISRUPTED_TAINT
from karpy.controllers.node.termination import events
from karpy.core.taints import Effect, Taint
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError, TooManyRequestsError
from karpy.kube.events import Recorder
from karpy.kube.kinds import PODS
from karpy.runtime.backoff import Backoff, KeyedBackoff
from karpy.state.pods import (
    do_not_disrupt,
    is_daemon_owned,
    is_static,
    is_terminating,
    needs_drain,
)
from karpy.state.podview import toleration

log = logging.getLogger(__name__)

EVICTION_BACKOFF: Final = Backoff(base=0.1, cap=10.0)
"""Karpenter's eviction queue retries a refused eviction from 100 ms up to 10 s."""

STUCK_TERMINATING: Final = datetime.timedelta(minutes=1)
"""A pod whose deletion time passed this long ago is stuck (no kubelet finishes it, e.g. on a
node being repaired): the drain stops waiting for it, as Karpenter's does."""

DEFAULT_POD_GRACE: Final = datetime.timedelta(seconds=30)
"""A pod's terminationGracePeriodSeconds when it states none (the apiserver's default)."""

CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})


class Tier(enum.IntEnum):
    """Drain order: lower tiers leave first."""

    NON_CRITICAL = 0
    NON_CRITICAL_DAEMON = 1
    CRITICAL = 2
    CRITICAL_DAEMON = 3


def tier_of(pod: Pod) -> Tier:
    critical = pod.spec.priority_class_name in CRITICAL_PRIORITY_CLASSES
    daemon = is_daemon_owned(pod)
    if critical:
        return Tier.CRITICAL_DAEMON if daemon else Tier.CRITICAL
    return Tier.NON_CRITICAL_DAEMON if daemon else Tier.NON_CRITICAL


def next_to_evict(pods: Iterable[Pod]) -> tuple[Pod, ...]:
    """The pods to evict now: the not-yet-terminating ones of the first tier that still has
    evictable pods (terminating ones of that tier hold the next tier back)."""
    evictable = [p for p in pods if needs_drain(p) and not do_not_disrupt(p)]
    if not evictable:
        return ()
    first = min(tier_of(p) for p in evictable)
    return tuple(p for p in evictable if tier_of(p) == first and not is_terminating(p))


def stuck(pod: Pod, *, now: datetime.datetime) -> bool:
    """Terminating, and its deletion time (deletionTimestamp, which already includes its grace
    period) is more than STUCK_TERMINATING ago."""
    deleted = pod.metadata.deletion_timestamp
    return deleted is not None and now - deleted > STUCK_TERMINATING


_DISRUPTED: Taint = Taint(
    key=DISRUPTED_TAINT.key,
    effect=Effect(DISRUPTED_TAINT.effect),
    value=DISRUPTED_TAINT.value or "",
)


def tolerates_disrupted(pod: Pod) -> bool:
    """Whether the pod tolerates karpenter.sh/disrupted:NoSchedule (the drain leaves it be)."""
    return any(toleration(t).tolerates(_DISRUPTED) for t in pod.spec.tolerations)


def drainable(pod: Pod, *, now: datetime.datetime) -> bool:
    """Whether the drain moves the pod off its Node (Karpenter's IsDrainable): it does not
    tolerate the disrupted taint, is not a static pod, and is not stuck terminating."""
    return not (tolerates_disrupted(pod) or is_static(pod) or stuck(pod, now=now))


def pod_grace(pod: Pod) -> datetime.timedelta:
    """The pod's own terminationGracePeriodSeconds."""
    seconds = pod.spec.termination_grace_period_seconds
    return DEFAULT_POD_GRACE if seconds is None else datetime.timedelta(seconds=max(seconds, 0))


def deletion_time(pod: Pod, deadline: datetime.datetime) -> datetime.datetime:
    """When a pod still on the node is deleted: the node's deadline less the pod's own grace
    period, so the pod's grace runs out as the deadline comes."""
    return deadline - pod_grace(pod)


def deletion_grace(deadline: datetime.datetime, *, now: datetime.datetime) -> int:
    """The grace period (whole seconds, never negative) a pod deleted at `now` is given: the
    time left to the deadline, which is at most the pod's own once its deletion time came.
    Rounded up: the drain wakes a moment after a pod's deletion time, and truncating would take
    a second off the pod's grace (29 s of its 30); the pod's end may then pass the deadline by
    under a second."""
    return max(math.ceil((deadline - now).total_seconds()), 0)


def due_for_deletion(
    pods: Iterable[Pod], deadline: datetime.datetime, *, now: datetime.datetime
) -> tuple[Pod, ...]:
    """The pods to delete now: not yet terminating, and their deletion time has come."""
    return tuple(p for p in pods if not is_terminating(p) and deletion_time(p, deadline) <= now)


def overrunning(
    pods: Iterable[Pod], deadline: datetime.datetime, *, now: datetime.datetime
) -> tuple[Pod, ...]:
    """The terminating pods whose grace ends after the deadline and after `now` (their
    deletionTimestamp is the end of their grace): deleted again, with the time left as their
    grace. One whose grace has already run out gains nothing from another deletion."""
    end = max(deadline, now)
    return tuple(
        p for p in pods if (ends := p.metadata.deletion_timestamp) is not None and ends > end
    )


def next_deletion(
    pods: Iterable[Pod], deadline: datetime.datetime, *, now: datetime.datetime
) -> datetime.datetime | None:
    """The earliest deletion time still ahead among pods not yet terminating, or None."""
    ahead = [
        when for p in pods if not is_terminating(p) and (when := deletion_time(p, deadline)) > now
    ]
    return min(ahead, default=None)


def granted(pod: Pod, budgets: Iterable[PodDisruptionBudget]) -> bool:
    """Whether an eviction of this very pod was granted and its deletion has not happened: a
    PDB of its namespace lists it in `status.disruptedPods`, at or after the pod's creation (an
    entry older than the pod was made for an earlier pod of the same name), and the pod is not
    being deleted."""
    if pod.metadata.deletion_timestamp is not None:
        return False
    name, namespace = pod.metadata.name or "", pod.metadata.namespace or ""
    created = pod.metadata.creation_timestamp
    for budget in budgets:
        if (budget.metadata.namespace or "") != namespace:
            continue
        at = budget.status.disrupted_pods.get(name)
        if at is not None and (created is None or at >= created):
            return True
    return False


def _key(pod: Pod) -> str:
    return pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"


class Evictor:
    """Evicts pods through the Eviction API with per-pod backoff on 429.

    Side effects: POSTs evictions; remembers, per pod uid, how often it was refused and when it may
    be tried again (loop time), and forgets it once the eviction is accepted.
    """

    def __init__(
        self,
        kube: KubeClient,
        *,
        recorder: Recorder,
        backoff: Backoff = EVICTION_BACKOFF,
        requests: Counter | None = None,
        drained: tuple[Counter, Mapping[str, str]] | None = None,
        granted: Callable[[Pod], bool] | None = None,
    ) -> None:
        self._granted = granted
        self._requests = requests
        self._drained = drained
        self._kube = kube
        self._recorder = recorder
        self._backoff: KeyedBackoff[str] = KeyedBackoff(backoff)
        self._not_before: dict[str, float] = {}

    async def evict(self, pods: Sequence[Pod]) -> float | None:
        """Try to evict each pod whose backoff has passed. Returns the seconds until the next
        refused pod may be retried, or None when every eviction was accepted."""
        loop = asyncio.get_running_loop()
        wait: float | None = None
        for pod in pods:
            key = _key(pod)
            now = loop.time()
            due = self._not_before.get(key, now)
            if due > now:
                wait = min(wait if wait is not None else due - now, due - now)
                continue
            try:
                await self._kube.evict(
                    pod.metadata.name or "", namespace=pod.metadata.namespace or ""
                )
            except NotFoundError:
                self._count(404)
                self._forget(key)
                continue
            except TooManyRequestsError as error:
                self._count(429)
                if self._granted is not None and self._granted(pod):
                    await self._finish_granted(pod)
                    continue
                delay = max(self._backoff.failure(key), error.retry_after or 0.0)
                self._not_before[key] = loop.time() + delay
                wait = delay if wait is None else min(wait, delay)
                log.debug(
                    "eviction refused",
                    extra={
                        "pod": f"{pod.metadata.namespace}/{pod.metadata.name}",
                        "error": error.message,
                        "retry_after": delay,
                    },
                )
                continue
            self._count(200)
            if self._drained is not None:
                self._drained[0].add(1, self._drained[1])
            self._forget(key)
            log.info("evicted pod", extra={"pod": f"{pod.metadata.namespace}/{pod.metadata.name}"})
            await self._recorder.publish(events.evicted(pod), now=loop.time())
        return wait

    async def _finish_granted(self, pod: Pod) -> None:
        """Delete `pod`, whose eviction the apiserver granted without deleting it (the module
        docstring), with its own grace period, as the eviction would have."""
        key = _key(pod)
        try:
            await self._kube.delete(PODS, pod.metadata.name or "", namespace=pod.metadata.namespace)
        except NotFoundError:
            self._forget(key)
            return
        self._forget(key)
        if self._drained is not None:
            self._drained[0].add(1, self._drained[1])
        log.info(
            "deleted pod whose eviction was granted",
            extra={"pod": f"{pod.metadata.namespace}/{pod.metadata.name}"},
        )
        await self._recorder.publish(events.evicted(pod), now=asyncio.get_running_loop().time())

    def _count(self, code: int) -> None:
        if self._requests is not None:
            self._requests.add(1, {"code": str(code)})

    def refusals(self, pod: Pod) -> int:
        """How many times in a row the pod's eviction was refused."""
        return self._backoff.failures(_key(pod))

    def _forget(self, key: str) -> None:
        self._backoff.success(key)
        self._not_before.pop(key, None)
