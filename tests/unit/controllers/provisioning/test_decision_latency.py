"""Karpenter's scheduling-decision latency, undecided-time and unfinished-work series, as the
provisioner feeds them around one simulation."""

from __future__ import annotations

import datetime

from karpy.apis.codec import from_dict
from karpy.apis.kube.pod import Pod
from karpy.controllers.provisioning.latency import DecisionLatency
from karpy.kube import kinds
from karpy.kube.resources import Item, ObjectRef
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.schedulable import SchedulableTimes
from karpy.state.view import ClusterView
from tests.support.metrics import sample

T0 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


def _pending(name: str, created: float, *, node: str = "") -> Item[Pod]:
    stamp = (T0 + datetime.timedelta(seconds=created)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod = from_dict(
        Pod,
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "creationTimestamp": stamp,
            },
            "spec": {"containers": [], **({"nodeName": node} if node else {})},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            },
        },
    )
    ref = ObjectRef(
        kind="Pod", namespace="default", name=name, uid=f"uid-{name}", resource_version="1"
    )
    return Item(ref=ref, obj=pod)


async def test_a_pod_waits_until_its_first_simulation_and_is_timed_once(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    pods = state.register(kinds.PODS)
    pods.replace([_pending("old", -60), _pending("new", 2)])
    state.mark_listed()
    clock = FakeClock(T0)
    latency = DecisionLatency(ClusterView(state), telemetry, clock, SchedulableTimes())
    undecided = "karpenter_pods_provisioning_scheduling_undecided_time_seconds"
    unfinished = 'karpenter_scheduler_unfinished_work_seconds{controller="provisioner"}'

    clock.set(T0 + datetime.timedelta(seconds=5))
    # "old" predates karpy: it is seen from karpy's start.
    assert sample(telemetry, f'{undecided}{{name="old",namespace="default"}}') == 5
    assert sample(telemetry, f'{undecided}{{name="new",namespace="default"}}') == 3
    assert sample(telemetry, unfinished) == 0

    latency.solving([p.obj for p in (_pending("old", -60), _pending("new", 2))])
    clock.set(T0 + datetime.timedelta(seconds=8))
    assert sample(telemetry, unfinished) == 3
    latency.solved()
    latency.solving([_pending("new", 2).obj])  # decided already: not timed again
    latency.solved()

    assert sample(telemetry, unfinished) == 0
    assert sample(telemetry, f'{undecided}{{name="new",namespace="default"}}') == 0
    histogram = "karpenter_pods_scheduling_decision_duration_seconds"
    assert sample(telemetry, f"{histogram}_count") == 2
    assert sample(telemetry, f"{histogram}_sum") == 5 + 3


async def test_a_placed_pod_waits_from_its_first_placement_until_bound_and_running(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    pods = state.register(kinds.PODS)
    pods.replace([_pending("placed", 0), _pending("unplaced", 0)])
    state.mark_listed()
    clock = FakeClock(T0)
    schedulable = SchedulableTimes()
    latency = DecisionLatency(ClusterView(state), telemetry, clock, schedulable)
    unbound = 'karpenter_pods_provisioning_unbound_time_seconds{name="placed",namespace="default"}'
    unstarted = (
        'karpenter_pods_provisioning_unstarted_time_seconds{name="placed",namespace="default"}'
    )

    clock.set(T0 + datetime.timedelta(seconds=2))
    latency.placed([_pending("placed", 0).obj])
    clock.set(T0 + datetime.timedelta(seconds=6))
    latency.placed([_pending("placed", 0).obj])  # placed again: its first time holds
    assert schedulable.since(("default", "placed")) == T0 + datetime.timedelta(seconds=2)
    assert sample(telemetry, unbound) == 4
    assert sample(telemetry, unstarted) == 4
    # A pod no pass placed has no provisioning series.
    text = telemetry.prometheus_text()
    assert 'provisioning_unbound_time_seconds{name="unplaced"' not in text

    # Bound, still pending: it no longer waits to be bound, it still waits to run.
    pods.replace([_pending("placed", 0, node="n1"), _pending("unplaced", 0)])
    clock.set(T0 + datetime.timedelta(seconds=9))
    assert unbound.split("{")[0] + '{name="placed"' not in telemetry.prometheus_text()
    assert sample(telemetry, unstarted) == 7
