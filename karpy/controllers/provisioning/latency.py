"""How long provisionable pods wait for the provisioner's first scheduling decision, how long
the simulation running now has been at it, and how long pods it placed have waited since
(Karpenter's ``karpenter_pods_scheduling_decision_duration_seconds``,
``karpenter_pods_provisioning_scheduling_undecided_time_seconds``,
``karpenter_scheduler_unfinished_work_seconds``,
``karpenter_pods_provisioning_unbound_time_seconds`` and
``karpenter_pods_provisioning_unstarted_time_seconds``).

A pod is seen when it is created, or when karpy started if it is older (karpy cannot have seen it
before); its decision is the first simulation it takes part in, recorded once. The two gauges are
read at scrape time (the undecided pods from cluster state: provisionable, no decision yet), so a
stuck simulation or a pod no pass decides on shows as it grows.

A pod a pass placed (on a new NodeClaim or an existing or in-flight node) is recorded in cluster
state with the time of its first placement (karpy.state.schedulable); while it is not bound, or
not running, the two provisioning gauges read the seconds since. The metrics.pods controller
records the matching histograms when it binds and runs.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from functools import partial

from karpy.apis.kube.pod import Pod, PodPhase
from karpy.runtime.clock import Clock
from karpy.runtime.telemetry import Attributes, Telemetry, observe_state
from karpy.state.pods import is_provisionable, is_terminal
from karpy.state.schedulable import SchedulableTimes
from karpy.state.view import ClusterView

_PROVISIONER: Attributes = {"controller": "provisioner"}


class DecisionLatency:
    """The provisioner's record of which pods have had a decision, of the running simulation,
    and of when each pod was first placed."""

    def __init__(
        self, view: ClusterView, telemetry: Telemetry, clock: Clock, schedulable: SchedulableTimes
    ) -> None:
        self._view = view
        self._schedulable = schedulable
        self._histogram = telemetry.metrics.pods_scheduling_decision_duration_seconds
        self._clock = clock
        self._started = clock.now()
        self._decided: set[str] = set()
        self._solving: datetime.datetime | None = None
        observe_state(
            telemetry.meter,
            {
                "pods_provisioning_scheduling_undecided_time_seconds": self._undecided,
                "scheduler_unfinished_work_seconds": self._unfinished,
                "pods_provisioning_unbound_time_seconds": partial(self._waiting, started=False),
                "pods_provisioning_unstarted_time_seconds": partial(self._waiting, started=True),
            },
        )

    def solving(self, pods: Iterable[Pod]) -> None:
        """A simulation over `pods` starts: each pod's first decision is recorded. Pods no
        longer provisionable (bound, gone) are forgotten."""
        now = self._clock.now()
        self._solving = now
        for pod in pods:
            uid = pod.metadata.uid or ""
            if uid not in self._decided:
                self._decided.add(uid)
                self._histogram.record(max(0.0, (now - self._seen(pod)).total_seconds()))
        self._decided &= {p.metadata.uid or "" for p in self._view.pods() if is_provisionable(p)}

    def solved(self) -> None:
        self._solving = None

    def placed(self, pods: Iterable[Pod]) -> None:
        """A pass placed `pods`: each waits for its node from now (or its first placement)."""
        self._schedulable.placed(
            ((p.metadata.namespace or "", p.metadata.name or "") for p in pods),
            at=self._clock.now(),
        )

    def _seen(self, pod: Pod) -> datetime.datetime:
        created = pod.metadata.creation_timestamp
        return max(created, self._started) if created is not None else self._started

    def _undecided(self) -> Iterable[tuple[float, Attributes]]:
        now = self._clock.now()
        for pod in self._view.pods():
            if is_provisionable(pod) and (pod.metadata.uid or "") not in self._decided:
                yield (
                    max(0.0, (now - self._seen(pod)).total_seconds()),
                    {"name": pod.metadata.name or "", "namespace": pod.metadata.namespace or ""},
                )

    def _waiting(self, *, started: bool) -> Iterable[tuple[float, Attributes]]:
        """Placed pods not yet bound (or, with `started`, not yet running): seconds since their
        first placement."""
        now = self._clock.now()
        for pod in self._view.pods():
            namespace, name = pod.metadata.namespace or "", pod.metadata.name or ""
            since = self._schedulable.since((namespace, name))
            if since is None or is_terminal(pod) or pod.metadata.deletion_timestamp is not None:
                continue
            waiting = pod.status.phase != PodPhase.RUNNING if started else not pod.spec.node_name
            if waiting:
                yield (
                    max(0.0, (now - since).total_seconds()),
                    {"name": name, "namespace": namespace},
                )

    def _unfinished(self) -> Iterable[tuple[float, Attributes]]:
        since = self._solving
        seconds = max(0.0, (self._clock.now() - since).total_seconds()) if since else 0.0
        return [(seconds, _PROVISIONER)]
