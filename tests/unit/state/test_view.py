"""ClusterView: the read path controllers use, over stores filled as informers fill them."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.apis.codec import from_dict
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube import kinds
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView
from tests.unit.state.support import apps_nodepool, pod


def _item(obj: Any, kind: str, *, version: str = "1") -> Item[Any]:
    meta = obj.metadata
    ref = ObjectRef(
        kind=kind,
        namespace=meta.namespace or "",
        name=meta.name or "",
        uid=f"uid-{meta.name}",
        resource_version=version,
    )
    return Item(ref=ref, obj=obj)


def _node(name: str, provider_id: str) -> Node:
    return from_dict(Node, {"metadata": {"name": name}, "spec": {"providerID": provider_id}})


def _claim(name: str, provider_id: str = "", node_name: str = "", pool: str = "") -> NodeClaim:
    status: dict[str, Any] = {}
    if provider_id:
        status["providerID"] = provider_id
    if node_name:
        status["nodeName"] = node_name
    return from_dict(
        NodeClaim,
        {
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool} if pool else {}},
            "spec": {
                "requirements": [],
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "x",
                },
            },
            "status": status,
        },
    )


@pytest.fixture
def state(telemetry: Telemetry) -> ClusterState:
    state = ClusterState(metrics=telemetry.metrics)
    state.register(kinds.NODES).replace(
        [_item(_node("n1", "kwok://n1"), "Node"), _item(_node("n2", "kwok://n2"), "Node")]
    )
    state.register(kinds.NODECLAIMS).replace(
        [
            _item(_claim("c1", "kwok://n1", "n1"), "NodeClaim"),
            _item(_claim("c2", "kwok://n2"), "NodeClaim"),
            _item(_claim("c3"), "NodeClaim"),
        ]
    )
    state.register(kinds.PODS).replace(
        [
            _item(pod("a", {"containers": [], "nodeName": "n1"}), "Pod"),
            _item(pod("b", {"containers": [], "nodeName": "n1"}), "Pod"),
            _item(pod("c", {"containers": [], "nodeName": "n2"}), "Pod"),
            _item(pod("pending"), "Pod"),
        ]
    )
    state.register(kinds.NODEPOOLS).replace([_item(apps_nodepool(), "NodePool")])
    state.mark_listed()
    return state


def _names(objects: list[Any]) -> list[str]:
    return sorted(o.metadata.name for o in objects)


def test_lookups_by_name(state: ClusterState) -> None:
    view = ClusterView(state)
    assert view.informers_synced
    node = view.node("n1")
    assert node is not None
    assert node.spec.provider_id == "kwok://n1"
    assert view.node("n9") is None
    claim = view.nodeclaim("c2")
    assert claim is not None
    assert claim.status.provider_id == "kwok://n2"
    assert view.nodeclaim("c9") is None
    assert view.nodepool("apps") is not None
    found = view.get(kinds.PODS, "a", namespace="default")
    assert found is not None
    assert found.spec.node_name == "n1"
    assert view.get(kinds.PODS, "a") is None  # pods are namespaced
    assert _names(view.nodes()) == ["n1", "n2"]
    assert _names(view.nodeclaims()) == ["c1", "c2", "c3"]
    assert _names(view.nodepools()) == ["apps"]
    assert _names(view.pods()) == ["a", "b", "c", "pending"]
    assert _names(view.objects(kinds.NODES)) == ["n1", "n2"]


def test_lookups_by_provider_id_and_by_node(state: ClusterState) -> None:
    view = ClusterView(state)
    assert _names(view.nodes_with_provider_id("kwok://n2")) == ["n2"]
    assert view.nodes_with_provider_id("kwok://gone") == []
    assert _names(view.nodeclaims_with_provider_id("kwok://n1")) == ["c1"]
    assert _names(view.nodeclaims_on("n1")) == ["c1"]
    assert view.nodeclaims_on("n2") == []  # c2 has not registered its Node yet
    assert _names(view.pods_on("n1")) == ["a", "b"]
    assert _names(view.pods_on("n2")) == ["c"]
    assert view.pods_on("n9") == []


def test_the_indexes_follow_watch_events(state: ClusterState) -> None:
    view = ClusterView(state)
    pods = state.store(kinds.PODS)
    moved = pod("a", {"containers": [], "nodeName": "n2"})
    pods.apply(Event(type=EventType.MODIFIED, item=_item(moved, "Pod", version="2")))
    assert _names(view.pods_on("n1")) == ["b"]
    assert _names(view.pods_on("n2")) == ["a", "c"]
    claims = state.store(kinds.NODECLAIMS)
    registered = _claim("c2", "kwok://n2", "n2")
    claims.apply(Event(type=EventType.MODIFIED, item=_item(registered, "NodeClaim", version="2")))
    assert _names(view.nodeclaims_on("n2")) == ["c2"]
    nodes = state.store(kinds.NODES)
    nodes.apply(Event(type=EventType.DELETED, item=_item(_node("n1", "kwok://n1"), "Node")))
    assert view.node("n1") is None
    assert view.nodes_with_provider_id("kwok://n1") == []


def test_a_nodepools_nodeclaims_are_found_by_its_label_and_follow_relabels(
    state: ClusterState,
) -> None:
    view = ClusterView(state)
    claims = state.store(kinds.NODECLAIMS)
    for name, pool in (("p1", "a"), ("p2", "a"), ("p3", "b")):
        claims.apply(Event(type=EventType.ADDED, item=_item(_claim(name, pool=pool), "NodeClaim")))
    assert _names(view.nodeclaims_of("a")) == ["p1", "p2"]
    assert _names(view.nodeclaims_of("b")) == ["p3"]
    moved = _claim("p2", pool="b")
    claims.apply(Event(type=EventType.MODIFIED, item=_item(moved, "NodeClaim", version="2")))
    assert _names(view.nodeclaims_of("a")) == ["p1"]
    assert _names(view.nodeclaims_of("b")) == ["p2", "p3"]
    claims.apply(Event(type=EventType.DELETED, item=_item(moved, "NodeClaim", version="3")))
    assert _names(view.nodeclaims_of("b")) == ["p3"]
    assert view.nodeclaims_of("c1") == []  # unlabelled claims (c1, c2) belong to no pool


def test_a_kind_not_informed_raises_key_error_naming_it(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    state.register(kinds.NODES)
    view = ClusterView(state)
    assert view.informs(kinds.NODES)
    assert not view.informs(kinds.PODS)
    assert not view.synced
    with pytest.raises(KeyError, match="'Pod'"):
        view.pods_on("n1")
    with pytest.raises(KeyError, match="'NodeClaim'"):
        view.nodeclaim("c1")
    with pytest.raises(KeyError, match="'DaemonSet'"):
        view.objects(kinds.DAEMONSETS)


def test_sync_waits_for_every_nodeclaim_to_resolve_its_provider_id(state: ClusterState) -> None:
    """Karpenter's Synced(): a NodeClaim still launching is capacity of unknown shape, so
    nothing may decide until its launch resolves (or it is deleted)."""
    view = ClusterView(state)
    assert view.informers_synced
    assert _names(view.launching()) == ["c3"]
    assert not view.synced
    claims = state.store(kinds.NODECLAIMS)
    launched = _claim("c3", "kwok://n3")
    claims.apply(Event(type=EventType.MODIFIED, item=_item(launched, "NodeClaim", version="2")))
    assert view.launching() == []
    assert view.synced
    claims.apply(Event(type=EventType.ADDED, item=_item(_claim("c4"), "NodeClaim", version="3")))
    assert not view.synced
    claims.apply(Event(type=EventType.DELETED, item=_item(_claim("c4"), "NodeClaim", version="4")))
    assert view.synced


def test_a_nomination_holds_while_a_nominated_pod_is_pending_and_lapses_after(
    state: ClusterState,
) -> None:
    view = ClusterView(state)
    assert not view.nominated("n2", 100.0)
    state.nominations.nominate("n2", [("default", "pending")], now=100.0, window=20.0)
    state.nominations.passed()
    assert view.nominated("n2", 110.0)
    assert not view.nominated("n1", 110.0)
    assert view.nominated("n2", 125.0)  # past the window, but no pass has looked since
    state.nominations.passed()
    assert not view.nominated("n2", 125.0)  # a later pass did not renew it
    state.nominations.nominate("n2", [("default", "pending")], now=130.0, window=20.0)
    state.nominations.passed()
    state.nominations.nominate("n2", [("default", "pending")], now=145.0, window=20.0)
    state.nominations.passed()
    assert view.nominated("n2", 160.0)  # renewed by the later pass


def test_a_held_nomination_counts_pending_pods_only(state: ClusterState) -> None:
    """Past its window a nomination is held for pods still pending; a pod already bound there
    keeps the node busy on its own account, not as a nomination."""
    view = ClusterView(state)
    state.nominations.nominate("n1", [("default", "a")], now=100.0, window=20.0)
    state.nominations.passed()
    assert view.nominated("n1", 101.0)  # "a" is bound to n1
    assert not view.nominated("n1", 130.0)


def test_a_node_whose_pod_kube_scheduler_bound_elsewhere_stays_nominated_while_its_pass_waits(
    state: ClusterState,
) -> None:
    """kube-scheduler bound "c" (nominated to n1) to n2, where the pass placed "pending": n1 is
    now the node "pending" needs, so it holds while "pending" waits, until a pass looks again."""
    view = ClusterView(state)
    state.nominations.nominate("n1", [("default", "c")], now=100.0, window=20.0)
    state.nominations.nominate("n2", [("default", "pending")], now=100.0, window=20.0)
    state.nominations.passed()
    assert view.nominated("n1", 110.0)
    assert view.nominated("n1", 125.0)  # held: no pass has looked since
    state.nominations.passed()  # a later pass placed "pending" and did not renew n1
    assert not view.nominated("n1", 125.0)
    # Without a pending pod of its pass, a nomination whose pods went elsewhere lapses.
    state.nominations.nominate("n1", [("default", "c")], now=130.0, window=20.0)
    state.nominations.passed()
    assert not view.nominated("n1", 131.0)


def test_nominations_are_known_once_the_provisioner_passed_or_nothing_is_pending(
    state: ClusterState,
) -> None:
    view = ClusterView(state)
    assert view.nominations_known()  # "pending" has not failed to schedule: nothing waits
    unschedulable = from_dict(
        Pod,
        {
            "metadata": {"name": "waits", "namespace": "default", "uid": "uid-waits"},
            "spec": {"containers": []},
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ]
            },
        },
    )
    state.store(kinds.PODS).apply(
        Event(type=EventType.ADDED, item=_item(unschedulable, "Pod", version="9"))
    )
    assert not view.nominations_known()  # a restarted process: no pass has run yet
    state.nominations.passed()
    assert view.nominations_known()


def test_a_nomination_whose_pods_bound_elsewhere_or_went_does_not_hold(
    state: ClusterState,
) -> None:
    view = ClusterView(state)
    state.nominations.nominate(
        "n2", [("default", "a"), ("default", "gone")], now=100.0, window=20.0
    )
    state.nominations.passed()
    assert not view.nominated("n2", 101.0)  # "a" runs on n1, "gone" does not exist
    state.nominations.nominate("n1", [("default", "a")], now=100.0, window=20.0)
    assert view.nominated("n1", 101.0)  # bound where it was nominated
