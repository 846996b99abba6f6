"""The event recorder on the real apiserver: what `kubectl describe` shows, and no repeats."""

from __future__ import annotations

import secrets
from typing import Any

import attrs
import pytest

from karpy.kube.client import KubeClient
from karpy.kube.events import Event, EventType, InvolvedObject, Recorder
from karpy.runtime.clock import SystemClock


def _event(involved: InvolvedObject, message: str = "Pod should schedule on: node/n1") -> Event:
    return Event(involved=involved, type=EventType.NORMAL, reason="Nominated", message=message)


async def _events_about(kube: KubeClient, namespace: str, uid: str) -> list[dict[str, Any]]:
    listing = await kube.request("GET", f"/api/v1/namespaces/{namespace}/events")
    return [e for e in listing.get("items", []) if e["involvedObject"].get("uid") == uid]


async def test_an_event_names_its_object_and_repeats_are_dropped_within_the_window(
    kube: KubeClient, namespace: str
) -> None:
    uid = f"uid-{secrets.token_hex(4)}"
    pod = InvolvedObject(api_version="v1", kind="Pod", name="p", namespace=namespace, uid=uid)
    recorder = Recorder(kube, SystemClock(), dedupe_window=60.0)

    assert await recorder.publish(_event(pod), now=0.0)
    assert not await recorder.publish(_event(pod), now=30.0), "same event within the window"
    assert await recorder.publish(_event(pod, "Pod should schedule on: node/n2"), now=31.0)
    assert await recorder.publish(_event(pod), now=61.0), "the window has passed"

    events = await _events_about(kube, namespace, uid)
    assert len(events) == 3
    first = events[0]
    assert first["reason"] == "Nominated"
    assert first["type"] == "Normal"
    assert first["reportingComponent"] == "karpy"
    assert first["source"] == {"component": "karpy"}
    assert first["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": namespace,
        "uid": uid,
    }


async def test_an_event_may_carry_its_own_window(kube: KubeClient, namespace: str) -> None:
    """Unconsolidatable repeats at most every 15 minutes while the recorder's window is 2."""
    uid = f"uid-{secrets.token_hex(4)}"
    node = InvolvedObject(api_version="v1", kind="Node", name="n", uid=uid)
    recorder = Recorder(kube, SystemClock(), dedupe_window=120.0)
    long = Event(
        involved=node,
        type=EventType.NORMAL,
        reason="Unconsolidatable",
        message="can't replace with a cheaper node",
        dedupe_window=900.0,
    )
    other = attrs.evolve(long, message="no allowed disruptions for disruption reason Underutilized")
    assert await recorder.publish(long, now=0.0)
    assert not await recorder.publish(long, now=600.0), "within its own window"
    assert await recorder.publish(_event(node), now=600.0)
    assert not await recorder.publish(_event(node), now=700.0)
    assert await recorder.publish(long, now=900.0), "its window has passed"
    # A changed reason goes out at once, and so does the first one when it comes back: the
    # newest Unconsolidatable event is always the current reason.
    assert await recorder.publish(other, now=910.0)
    assert not await recorder.publish(other, now=920.0)
    assert await recorder.publish(long, now=930.0)
    assert len(await _events_about(kube, "default", uid)) == 5


async def test_events_about_cluster_scoped_objects_go_to_the_default_namespace(
    kube: KubeClient,
) -> None:
    uid = f"uid-{secrets.token_hex(4)}"
    pool = InvolvedObject(api_version="karpenter.sh/v1", kind="NodePool", name="np", uid=uid)
    assert await Recorder(kube, SystemClock()).publish(_event(pool), now=0.0)
    (event,) = await _events_about(kube, "default", uid)
    assert "namespace" not in event["involvedObject"]


async def test_a_refused_event_is_reported_as_not_written(
    kube: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    pod = InvolvedObject(
        api_version="v1", kind="Pod", name="p", namespace="no-such-namespace", uid="u"
    )
    assert not await Recorder(kube, SystemClock()).publish(_event(pod), now=0.0)
    assert "failed to record event" in [r.getMessage() for r in caplog.records]


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ValueError, match="dedupe_window"):
        Recorder(object(), SystemClock(), dedupe_window=-1.0)  # type: ignore[arg-type]
