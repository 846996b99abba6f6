"""ClusterState: stores replace on relist (reporting the difference) and gate on `synced`."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.kube.resources import Item, ObjectRef, ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState

# Stand-in kinds whose objects are strings. Not named Node: a Node update is compared field by
# field to tell a heartbeat from a change (karpy/state/generation.py, tests/unit/state).
THINGS = ResourceKind[str](
    kind="Thing", plural="things", version="v1", namespaced=False, decode=str
)
PODS = ResourceKind[str](kind="Pod", plural="pods", version="v1", decode=str)


def item(kind: ResourceKind[Any], name: str, version: str, *, namespace: str = "") -> Item[str]:
    ref = ObjectRef(
        kind=kind.kind, namespace=namespace, name=name, uid=f"uid-{name}", resource_version=version
    )
    return Item(ref=ref, obj=f"{name}@{version}")


def test_synced_only_after_every_store_listed(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    seen = [state.synced]
    nodes = state.register(THINGS, indexes={})
    pods = state.register(PODS, indexes={})
    nodes.replace([item(THINGS, "n1", "1")])
    state.mark_listed()
    seen.append(state.synced)
    pods.replace([])
    state.mark_listed()
    seen.append(state.synced)
    assert seen == [False, False, True]
    assert "karpenter_cluster_state_synced 1" in telemetry.prometheus_text()


def test_replace_reports_added_modified_deleted(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    store = state.register(THINGS, indexes={})
    store.replace(
        [item(THINGS, "keep", "1"), item(THINGS, "change", "1"), item(THINGS, "gone", "1")]
    )
    changes = store.replace(
        [item(THINGS, "keep", "1"), item(THINGS, "change", "2"), item(THINGS, "new", "1")]
    )
    summary = sorted((change.type.value, change.item.ref.name) for change in changes)
    assert summary == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "change")]
    assert sorted(store.objects()) == ["change@2", "keep@1", "new@1"]


def test_apply_events(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    store = state.register(PODS, indexes={})
    store.apply(Event(type=EventType.ADDED, item=item(PODS, "p", "1", namespace="ns")))
    assert store.get("p", namespace="ns") == "p@1"
    assert store.get("p") is None
    store.apply(Event(type=EventType.MODIFIED, item=item(PODS, "p", "2", namespace="ns")))
    assert store.get("p", namespace="ns") == "p@2"
    store.apply(Event(type=EventType.DELETED, item=item(PODS, "p", "3", namespace="ns")))
    assert len(store) == 0


def test_kinds_register_once_and_must_be_registered(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    state.register(THINGS, indexes={})
    with pytest.raises(ValueError, match="already registered"):
        state.register(THINGS, indexes={})
    with pytest.raises(KeyError, match="not registered"):
        state.store(PODS)


def test_indexes_follow_replace_and_events(telemetry: Telemetry) -> None:
    """An index finds an object under its current values only: moved and deleted objects leave."""
    state = ClusterState(metrics=telemetry.metrics)
    store = state.register(PODS, indexes={"node": lambda obj: (obj.split("@")[1],)})
    store.replace([item(PODS, "a", "n1"), item(PODS, "b", "n1"), item(PODS, "c", "n2")])
    assert sorted(store.by_index("node", "n1")) == ["a@n1", "b@n1"]
    store.apply(Event(type=EventType.MODIFIED, item=item(PODS, "a", "n2")))
    store.apply(Event(type=EventType.DELETED, item=item(PODS, "b", "n1")))
    assert store.by_index("node", "n1") == []
    assert sorted(store.by_index("node", "n2")) == ["a@n2", "c@n2"]
    store.replace([item(PODS, "c", "n3")])
    assert store.by_index("node", "n2") == []
    assert store.by_index("node", "n3") == ["c@n3"]
    with pytest.raises(KeyError, match="no index 'zone'"):
        store.by_index("zone", "z")
