"""ClusterState's generation: bumped by every store change a decision can see, and by no
Node update that only says its agent is alive (a heartbeat)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs

from karpy.apis.codec import from_dict
from karpy.apis.kube.node import Node, NodeCondition, NodeStatus
from karpy.kube import kinds
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.generation import node_changed
from tests.unit.state.support import pod


def _item(obj: Any, kind: str, version: str) -> Item[Any]:
    meta = obj.metadata
    ref = ObjectRef(
        kind=kind,
        namespace=meta.namespace or "",
        name=meta.name or "",
        uid=f"uid-{meta.name}",
        resource_version=version,
    )
    return Item(ref=ref, obj=obj)


def _node(name: str, *, heartbeat: str, version: str, labels: dict[str, str] | None = None) -> Node:
    return from_dict(
        Node,
        {
            "metadata": {"name": name, "resourceVersion": version, "labels": labels or {}},
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastHeartbeatTime": heartbeat,
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
        },
    )


def _state() -> ClusterState:
    state = ClusterState(metrics=Telemetry.setup(service_name="test").metrics)
    state.register(kinds.NODES)
    state.register(kinds.PODS)
    return state


def test_adds_deletes_and_updates_bump_the_generation() -> None:
    state = _state()
    pods = state.store(kinds.PODS)
    start = state.generation
    first = pod("a")
    pods.apply(Event(type=EventType.ADDED, item=_item(first, "Pod", "1")))
    assert state.generation == start + 1
    bound = attrs.evolve(first, spec=attrs.evolve(first.spec, node_name="n1"))
    pods.apply(Event(type=EventType.MODIFIED, item=_item(bound, "Pod", "2")))
    assert state.generation == start + 2
    pods.apply(Event(type=EventType.DELETED, item=_item(bound, "Pod", "2")))
    assert state.generation == start + 3


def test_a_node_heartbeat_does_not_bump_the_generation_and_a_label_does() -> None:
    state = _state()
    nodes = state.store(kinds.NODES)
    old = _node("n1", heartbeat="2026-01-01T00:00:00Z", version="1")
    nodes.apply(Event(type=EventType.ADDED, item=_item(old, "Node", "1")))
    before = state.generation
    beat = _node("n1", heartbeat="2026-01-01T00:05:00Z", version="2")
    assert not node_changed(old, beat)
    nodes.apply(Event(type=EventType.MODIFIED, item=_item(beat, "Node", "2")))
    assert state.generation == before
    assert nodes.get("n1") == beat  # stored all the same: reads see the latest
    labelled = _node("n1", heartbeat="2026-01-01T00:05:00Z", version="3", labels={"a": "b"})
    nodes.apply(Event(type=EventType.MODIFIED, item=_item(labelled, "Node", "3")))
    assert state.generation == before + 1


def test_a_relist_bumps_only_when_it_finds_a_change() -> None:
    state = _state()
    nodes = state.store(kinds.NODES)
    old = _node("n1", heartbeat="2026-01-01T00:00:00Z", version="1")
    nodes.replace([_item(old, "Node", "1")])
    listed = state.generation
    nodes.replace([_item(old, "Node", "1")])
    assert state.generation == listed
    beat = _node("n1", heartbeat=datetime(2026, 1, 1, 0, 9, tzinfo=UTC).isoformat(), version="2")
    nodes.replace([_item(beat, "Node", "2")])
    assert state.generation == listed
    nodes.replace([])
    assert state.generation == listed + 1


def test_node_changed_compares_every_field_of_the_node_status() -> None:
    """A field added to the Node model must be compared too (or named a heartbeat here)."""
    assert {f.name for f in attrs.fields(NodeStatus)} == {
        "capacity",
        "allocatable",
        "conditions",
        "addresses",
        "node_info",
        "phase",
    }
    assert {f.name for f in attrs.fields(NodeCondition)} == {
        "type",
        "status",
        "reason",
        "message",
        "last_heartbeat_time",
        "last_transition_time",
    }


def test_a_heartbeat_is_stored_and_reported_as_no_change() -> None:
    """What the informer tells its subscribers: nothing, for a heartbeat."""
    state = _state()
    nodes = state.store(kinds.NODES)
    old = _node("n1", heartbeat="2026-01-01T00:00:00Z", version="1")
    assert nodes.apply(Event(type=EventType.ADDED, item=_item(old, "Node", "1")))
    beat = _node("n1", heartbeat="2026-01-01T00:05:00Z", version="2")
    assert not nodes.apply(Event(type=EventType.MODIFIED, item=_item(beat, "Node", "2")))
    assert nodes.items()[0].ref.resource_version == "2"
    later = _node("n1", heartbeat="2026-01-01T00:10:00Z", version="3")
    assert nodes.replace([_item(later, "Node", "3")]) == []
    gone = nodes.replace([])
    assert [change.type for change in gone] == [EventType.DELETED]
