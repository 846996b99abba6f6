"""Karpenter's pod latency histograms, recorded once per pod that karpy saw waiting."""

from __future__ import annotations

import datetime
from typing import Any

from karpy.apis.codec import from_dict
from karpy.apis.kube.pod import Pod
from karpy.controllers.metrics.pods import PodLatency
from karpy.kube import kinds
from karpy.kube.resources import Item, ObjectRef
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.schedulable import SchedulableTimes
from karpy.state.view import ClusterView
from tests.support.metrics import sample

T0 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


def _at(seconds: float) -> str:
    return (T0 + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, *, bound: float | None = None, ready: float | None = None) -> Item[Pod]:
    spec: dict[str, Any] = {"containers": []}
    status: dict[str, Any] = {"phase": "Pending", "conditions": []}
    if bound is not None:
        spec["nodeName"] = "n1"
        status["conditions"].append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _at(bound)}
        )
    if ready is not None:
        status["phase"] = "Running"
        status["conditions"].append(
            {"type": "Ready", "status": "True", "lastTransitionTime": _at(ready)}
        )
    metadata = {"name": name, "namespace": "default", "creationTimestamp": _at(0)}
    pod = from_dict(Pod, {"metadata": metadata, "spec": spec, "status": status})
    ref = ObjectRef(kind="Pod", namespace="default", name=name, uid=name, resource_version="1")
    return Item(ref=ref, obj=pod)


async def test_bound_and_startup_are_recorded_once_for_pods_seen_waiting(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    pods = state.register(kinds.PODS)
    pods.replace([_pod("waiting"), _pod("old", bound=1, ready=2)])
    state.mark_listed()
    latency = PodLatency(ClusterView(state), metrics=telemetry.metrics, clock=FakeClock(T0))
    for key in ("default/waiting", "default/old"):
        await latency.reconcile(key)

    pods.replace([_pod("waiting", bound=3), _pod("old", bound=1, ready=2)])
    await latency.reconcile("default/waiting")
    pods.replace([_pod("waiting", bound=3, ready=7), _pod("old", bound=1, ready=2)])
    for _ in range(2):
        await latency.reconcile("default/waiting")
        await latency.reconcile("default/old")

    # Only `waiting` was seen before it was bound and before it ran; each is recorded once.
    assert sample(telemetry, "karpenter_pods_bound_duration_seconds_count") == 1
    assert sample(telemetry, "karpenter_pods_bound_duration_seconds_sum") == 3
    assert sample(telemetry, "karpenter_pods_startup_duration_seconds_count") == 1
    assert sample(telemetry, "karpenter_pods_startup_duration_seconds_sum") == 7


async def test_provisioning_latencies_run_from_the_first_placement(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    pods = state.register(kinds.PODS)
    pods.replace([_pod("placed"), _pod("unplaced")])
    state.mark_listed()
    schedulable = SchedulableTimes()
    latency = PodLatency(
        ClusterView(state), metrics=telemetry.metrics, clock=FakeClock(T0), schedulable=schedulable
    )
    for key in ("default/placed", "default/unplaced"):
        await latency.reconcile(key)
    schedulable.placed([("default", "placed")], at=T0 + datetime.timedelta(seconds=2))

    pods.replace([_pod("placed", bound=3, ready=7), _pod("unplaced", bound=3, ready=7)])
    for key in ("default/placed", "default/unplaced"):
        await latency.reconcile(key)

    # Both are timed from creation; only the placed one from its placement (2 s in).
    assert sample(telemetry, "karpenter_pods_bound_duration_seconds_count") == 2
    assert sample(telemetry, "karpenter_pods_provisioning_bound_duration_seconds_count") == 1
    assert sample(telemetry, "karpenter_pods_provisioning_bound_duration_seconds_sum") == 1
    assert sample(telemetry, "karpenter_pods_provisioning_startup_duration_seconds_count") == 1
    assert sample(telemetry, "karpenter_pods_provisioning_startup_duration_seconds_sum") == 5
    # Running, it is forgotten: nothing more is measured from its placement.
    assert schedulable.since(("default", "placed")) is None


async def test_a_pod_that_goes_is_forgotten_by_the_placement_record(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    pods = state.register(kinds.PODS)
    pods.replace([_pod("short-lived")])
    state.mark_listed()
    schedulable = SchedulableTimes()
    schedulable.placed([("default", "short-lived")], at=T0)
    latency = PodLatency(
        ClusterView(state), metrics=telemetry.metrics, clock=FakeClock(T0), schedulable=schedulable
    )
    await latency.reconcile("default/short-lived")
    assert len(schedulable) == 1
    pods.replace([])
    await latency.reconcile("default/short-lived")
    assert len(schedulable) == 0
