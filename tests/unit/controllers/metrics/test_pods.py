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
