"""Karpenter's status-condition transitions and termination durations (operatorpkg's
``operator_<kind>_status_condition_transitions_total``, ``…_transition_seconds`` and
``operator_<kind>_termination_duration_seconds``) for NodeClaims, NodePools, Nodes and the
provider's NodeClass kinds that have such metrics (``operator_ec2nodeclass_*``).

These count what changed, so they need each object's previous conditions: this controller keeps
the conditions and deletion time it last saw of each object, keyed ``<kind>/<name>``, and compares
on every event. A condition that appears, or whose status changes, is a transition (labelled with
its new status and reason); a status change also records how long the old status held (from the
two lastTransitionTimes). Objects already there when karpy starts are taken as they are, not as
transitions; objects created since are compared from no conditions, as Karpenter's are. An object
seen terminating and then gone records the time since its deletion.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import attrs

from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES
from karpy.kube.resources import ResourceKind
from karpy.kube.watch import Event
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import ConditionMetrics, Metrics
from karpy.state.view import ClusterView


@attrs.frozen
class Seen:
    """One condition as last seen."""

    status: str
    reason: str
    since: datetime.datetime | None


@attrs.frozen
class Last:
    """An object as last seen: its conditions by type and its deletion time."""

    conditions: dict[str, Seen]
    deleted: datetime.datetime | None


class ConditionTransitions:
    """Counts condition transitions and times terminations of NodeClaims, NodePools and Nodes."""

    name = "metrics.conditions"

    def __init__(
        self,
        view: ClusterView,
        *,
        metrics: Metrics,
        clock: Clock,
        nodeclass_kinds: Sequence[ResourceKind[Any]] = (),
    ) -> None:
        self._view = view
        # The provider's NodeClass kinds that have operator_<kind>_* metrics, by that name.
        self._nodeclasses = {
            k.kind.lower(): k for k in nodeclass_kinds if k.kind.lower() in metrics.conditions
        }
        self._metrics = metrics
        self._clock = clock
        self._started = clock.now()
        self._last: dict[str, Last] = {}

    def spec(self) -> Controller:
        """Keyed ``<kind>/<name>`` by every event of the kinds, deletions included."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(
                Watch(kind=NODES, keys=partial(_key, "node")),
                Watch(kind=NODECLAIMS, keys=partial(_key, "nodeclaim")),
                Watch(kind=NODEPOOLS, keys=partial(_key, "nodepool")),
                *(Watch(kind=k, keys=partial(_key, n)) for n, k in self._nodeclasses.items()),
            ),
            reads=(NODES, NODECLAIMS, NODEPOOLS, *self._nodeclasses.values()),
        )

    async def reconcile(self, key: str) -> Result:
        kind, _, name = key.partition("/")
        metrics = self._metrics.conditions[kind]
        obj = self._get(kind, name)
        last = self._last.pop(key, None)
        if obj is None:
            timer = metrics.termination_duration_seconds
            if last is not None and last.deleted is not None and timer is not None:
                gone = (self._clock.now() - last.deleted).total_seconds()
                timer.record(max(0.0, gone))
            return Result()
        now = _conditions(obj)
        created = obj.metadata.creation_timestamp
        if last is None and created is not None and created >= self._started:
            last = Last(conditions={}, deleted=None)
        if last is not None:
            _record(metrics, last.conditions, now)
        self._last[key] = Last(conditions=now, deleted=obj.metadata.deletion_timestamp)
        return Result()

    def _get(self, kind: str, name: str) -> Any:
        if kind == "node":
            return self._view.node(name)
        if kind == "nodeclaim":
            return self._view.nodeclaim(name)
        if kind == "nodepool":
            return self._view.nodepool(name)
        return self._view.get(self._nodeclasses[kind], name)


def _key(kind: str, event: Event[Any]) -> Iterable[str]:
    return (f"{kind}/{event.item.ref.name}",)


def _conditions(obj: Any) -> dict[str, Seen]:
    return {
        c.type: Seen(status=str(c.status), reason=c.reason or "", since=c.last_transition_time)
        for c in obj.status.conditions
    }


def _record(metrics: ConditionMetrics, before: dict[str, Seen], after: dict[str, Seen]) -> None:
    for kind, now in after.items():
        old = before.get(kind)
        if old is not None and old.status == now.status:
            continue
        metrics.transitions_total.add(1, {"type": kind, "status": now.status, "reason": now.reason})
        if old is not None and old.since is not None and now.since is not None:
            metrics.transition_seconds.record(
                max(0.0, (now.since - old.since).total_seconds()),
                {"type": kind, "status": old.status, "reason": old.reason},
            )
