"""Karpenter's pod latency histograms: ``karpenter_pods_bound_duration_seconds`` (creation to
binding) and ``karpenter_pods_startup_duration_seconds`` (creation to running), and their
``karpenter_pods_provisioning_*`` twins measured from when the provisioner first placed the pod
(karpy.state.schedulable; only for pods a pass placed).

Each is recorded once per pod, and only for pods this controller saw before the moment it
measures (unbound, or not yet running), as Karpenter's pod metrics controller does: a restart does
not record every pod in the cluster again. The times come from the pod's own conditions
(PodScheduled, Ready) when it has them, else from when the change was seen. A pod that runs, or
goes, is forgotten by the placement record too.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from karpy.apis.kube.pod import Pod, PodPhase
from karpy.apis.meta import ConditionStatus
from karpy.kube.kinds import PODS
from karpy.kube.watch import Event
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Metrics
from karpy.state.pods import is_terminal
from karpy.state.schedulable import SchedulableTimes
from karpy.state.view import ClusterView


class PodLatency:
    """Records how long pods took to be bound and to run."""

    name = "metrics.pods"

    def __init__(
        self,
        view: ClusterView,
        *,
        metrics: Metrics,
        clock: Clock,
        schedulable: SchedulableTimes | None = None,
    ) -> None:
        self._view = view
        self._schedulable = schedulable if schedulable is not None else SchedulableTimes()
        self._metrics = metrics
        self._clock = clock
        self._unbound: set[str] = set()
        self._unstarted: set[str] = set()

    def spec(self) -> Controller:
        """Keyed ``<namespace>/<name>`` by every pod event, deletions included."""
        return object_controller(
            self.name, self.reconcile, watches=(Watch(kind=PODS, keys=_key),), reads=(PODS,)
        )

    async def reconcile(self, key: str) -> Result:
        namespace, _, name = key.partition("/")
        pod = self._view.get(PODS, name, namespace=namespace)
        if pod is None or pod.metadata.creation_timestamp is None:
            self._unbound.discard(key)
            self._unstarted.discard(key)
            self._schedulable.forget((namespace, name))
            return Result()
        created = pod.metadata.creation_timestamp
        placed = self._schedulable.since((namespace, name))
        now = self._clock.now()
        if not pod.spec.node_name:
            self._unbound.add(key)
        elif key in self._unbound:
            self._unbound.discard(key)
            bound = _since(pod, "PodScheduled") or now
            self._metrics.pods_bound_duration_seconds.record(_seconds(bound - created))
            if placed is not None:
                since_placed = _seconds(bound - placed)
                self._metrics.pods_provisioning_bound_duration_seconds.record(since_placed)
        if not is_running(pod):
            self._unstarted.add(key)
        elif key in self._unstarted:
            self._unstarted.discard(key)
            ready = _since(pod, "Ready") or now
            self._metrics.pods_startup_duration_seconds.record(_seconds(ready - created))
            if placed is not None:
                since_placed = _seconds(ready - placed)
                self._metrics.pods_provisioning_startup_duration_seconds.record(since_placed)
        if is_running(pod) or is_terminal(pod):
            self._schedulable.forget((namespace, name))
        return Result()


def is_running(pod: Pod) -> bool:
    """Whether the pod's phase is Running."""
    return pod.status.phase == PodPhase.RUNNING


def _since(pod: Pod, kind: str) -> datetime.datetime | None:
    for condition in pod.status.conditions:
        if condition.type == kind and condition.status is ConditionStatus.TRUE:
            return condition.last_transition_time
    return None


def _seconds(delta: datetime.timedelta) -> float:
    return max(0.0, delta.total_seconds())


def _key(event: Event[Any]) -> Iterable[str]:
    return (f"{event.item.ref.namespace}/{event.item.ref.name}",)
