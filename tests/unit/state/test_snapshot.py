"""build_snapshot: one consistent read of the cluster becomes a snapshot the solver plans on."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.codec import from_dict
from karpy.apis.kube.common import Taint as KubeTaint
from karpy.apis.kube.node import Node as KubeNode
from karpy.apis.kube.pod import Pod as KubePod
from karpy.apis.kube.storage import PersistentVolumeClaim
from karpy.apis.kube.workloads import DaemonSet
from karpy.apis.meta import Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool as KubeNodePool
from karpy.core.resources import Resources
from karpy.core.scheduling.scheduler import solve
from karpy.core.taints import Effect, Taint
from karpy.kube import kinds
from karpy.kube.resources import Item, ObjectRef, ResourceKind
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.snapshot import (
    ClusterObjects,
    SnapshotBuild,
    SnapshotKinds,
    build_snapshot,
    nodepool_template,
    read_cluster,
    translate_cluster,
)
from karpy.state.view import ClusterView
from karpy.testing.instancetypes import make_instance_types
from tests.unit.apis.strategies import models
from tests.unit.state.support import apps_nodepool, inflate, node, pod

TYPES = {"apps": make_instance_types(8)}
DELETING = datetime(2026, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize("replicas", [1, 6])
def test_the_seed_walkthrough_plans_every_inflate_pod_onto_apps_nodes(replicas: int) -> None:
    pending = inflate(replicas)
    built = build_snapshot(
        ClusterObjects(nodepools=[apps_nodepool()]), pending=pending, instance_types=TYPES
    )
    assert built.errors == ()
    assert [p.name for p in built.pods] == [p.metadata.name for p in pending]
    results = solve(built.snapshot, list(built.pods))
    assert results.unplaced == ()
    assert results.nominations == ()
    placed = sorted(uid for claim in results.nodeclaims for uid in claim.pods)
    assert placed == sorted(p.metadata.uid or "" for p in pending)
    types = {t.name: t for t in TYPES["apps"]}
    for claim in results.nodeclaims:
        assert claim.nodepool == "apps"
        assert claim.requirements.single_value("intent") == "apps"
        assert claim.capacity_types == (wk.CAPACITY_TYPE_ON_DEMAND,)
        # Each pod asks for 1 CPU and 1.5Gi (plus its pod slot); the first type must hold them.
        assert claim.requests.fits(types[claim.instance_types[0]].allocatable)
        assert claim.requests.get_amount("cpu") == 1000 * len(claim.pods)
    # fake-it-i has i+1 vCPU less 100m reserved, so n one-CPU pods need fake-it-n at the least,
    # and the cheapest plan puts them all on one such node.
    (claim,) = results.nodeclaims
    assert claim.instance_types[0] == f"fake-it-{replicas}"


def test_bound_pods_use_their_node_and_deleting_or_terminal_objects_drop_out() -> None:
    running = attrs.evolve(
        inflate(1)[0],
        spec=attrs.evolve(inflate(1)[0].spec, node_name="n1"),
    )
    done = from_dict(
        type(running),
        {
            "metadata": {"name": "job", "namespace": "default", "uid": "uid-job"},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Succeeded"},
        },
    )
    managed = node(
        "n1",
        labels={wk.LABEL_NODEPOOL: "apps", "intent": "apps"},
        allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"},
    )
    gone = attrs.evolve(
        node("n2"), metadata=attrs.evolve(node("n2").metadata, deletion_timestamp=DELETING)
    )
    built = build_snapshot(
        ClusterObjects(nodes=[managed, gone], pods=[running, done], nodepools=[apps_nodepool()]),
        pending=[],
        instance_types=TYPES,
    )
    (n1,) = built.snapshot.nodes
    assert n1.name == "n1"
    assert [p.name for p in n1.pods] == [running.metadata.name]
    assert n1.nodepool == "apps"
    assert not n1.initialized  # managed, but karpy has not labelled it initialized yet
    assert n1.allocatable == Resources.of({"cpu": 4, "memory": "8Gi", "pods": 110})


def test_pending_pods_fill_an_existing_node_before_new_capacity() -> None:
    ready = node(
        "n1",
        labels={wk.LABEL_NODEPOOL: "apps", "intent": "apps", wk.LABEL_NODE_INITIALIZED: "true"},
        allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"},
    )
    built = build_snapshot(
        ClusterObjects(nodes=[ready], nodepools=[apps_nodepool()]),
        pending=inflate(2),
        instance_types=TYPES,
    )
    results = solve(built.snapshot, list(built.pods))
    assert {n.node for n in results.nominations} == {"n1"}
    assert len(results.nominations) == 2
    assert results.nodeclaims == ()


def test_a_launched_nodeclaim_without_a_node_is_in_flight() -> None:
    claim = from_dict(
        NodeClaim,
        {
            "metadata": {"name": "apps-x1", "labels": {wk.LABEL_NODEPOOL: "apps"}},
            "spec": {
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
                ],
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "d",
                },
                "startupTaints": [{"key": "boot", "effect": "NoSchedule"}],
            },
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
        },
    )
    built = build_snapshot(ClusterObjects(nodeclaims=[claim]), pending=[], instance_types={})
    (flying,) = built.snapshot.nodes
    assert flying.in_flight
    assert not flying.initialized
    assert flying.allocatable == Resources.of({"cpu": "2", "memory": "4Gi", "pods": "10"})
    assert flying.label_map()["node.kubernetes.io/instance-type"] == "m"
    assert "topology.kubernetes.io/zone" not in flying.label_map()
    assert flying.taints == (Taint("boot", Effect.NO_SCHEDULE),)


def _launching(name: str, options: list[str], requests: dict[str, str]) -> NodeClaim:
    return from_dict(
        NodeClaim,
        {
            "metadata": {"name": name, "labels": {wk.LABEL_NODEPOOL: "apps", "intent": "apps"}},
            "spec": {
                "requirements": [
                    {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": options},
                ],
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "d",
                },
                "resources": {"requests": requests},
            },
        },
    )


def test_a_launching_nodeclaim_is_in_flight_with_the_least_of_its_options() -> None:
    types = {t.name: t for t in make_instance_types(12)}
    options = sorted(types)[:4]
    requests = {"cpu": "100m", "memory": "64Mi"}
    fitting = [t for t in options if Resources.of(requests).fits(types[t].allocatable)]
    claim = _launching("apps-x2", options, requests)
    built = build_snapshot(
        ClusterObjects(nodeclaims=[claim]),
        pending=[],
        instance_types={"apps": tuple(types.values())},
    )
    (flying,) = built.snapshot.nodes
    assert flying.in_flight
    assert flying.name == "apps-x2"
    for resource in ("cpu", "memory"):
        assert flying.allocatable[resource] == min(types[t].allocatable[resource] for t in fitting)


def test_a_launching_nodeclaim_without_known_options_is_its_requests() -> None:
    requests = {"cpu": "1500m", "memory": "1Gi", "pods": "3"}
    claim = _launching("apps-x3", ["unknown-type"], requests)
    built = build_snapshot(ClusterObjects(nodeclaims=[claim]), pending=[], instance_types={})
    (flying,) = built.snapshot.nodes
    assert flying.allocatable == Resources.of(requests)


def test_pending_pods_fill_a_launching_nodeclaim_before_new_capacity() -> None:
    """After a restart, pods that a still-launching NodeClaim was made for land on it again
    instead of on a second NodeClaim."""
    types = make_instance_types(12)
    pods = inflate(3)
    claim = _launching("apps-x4", [t.name for t in types], {"cpu": "3", "memory": "4608Mi"})
    built = build_snapshot(
        ClusterObjects(nodeclaims=[claim], nodepools=[apps_nodepool()]),
        pending=pods,
        instance_types={"apps": tuple(types)},
    )
    results = solve(built.snapshot, list(built.pods))
    assert not results.nodeclaims
    assert {n.node for n in results.nominations} == {"apps-x4"}


def test_bad_objects_are_left_out_with_errors_and_the_rest_still_builds() -> None:
    bad_pool = attrs.evolve(
        apps_nodepool(),
        metadata=attrs.evolve(apps_nodepool().metadata, name="broken"),
        spec=attrs.evolve(apps_nodepool().spec, limits={"cpu": Quantity("plenty")}),
    )
    bad_pod = pod("bad", {"containers": [{"name": "a", "resources": {"requests": {"cpu": "x"}}}]})
    ds = from_dict(
        DaemonSet,
        {
            "metadata": {"name": "logs", "namespace": "kube-system"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "logs"}},
                    "spec": {
                        "containers": [{"name": "l", "resources": {"requests": {"cpu": "100m"}}}]
                    },
                }
            },
        },
    )
    built = build_snapshot(
        ClusterObjects(nodepools=[apps_nodepool(), bad_pool], daemonsets=[ds]),
        pending=[bad_pod, *inflate(1)],
        instance_types=TYPES,
    )
    assert [p.name for p in built.snapshot.nodepools] == ["apps"]
    assert [p.name for p in built.pods] == ["inflate-5d8c-0"]
    assert [(e.kind, e.name) for e in built.errors] == [("NodePool", "broken"), ("Pod", "bad")]
    assert built.errors[0].message.startswith("NodePool broken: spec.limits[cpu]:")
    (logs,) = built.snapshot.daemonsets
    assert logs.pod.requests().get_amount("cpu") == 100
    assert logs.pod.namespace == "kube-system"


def test_nodepool_template_carries_labels_taints_limits_and_weight() -> None:
    pool = apps_nodepool()
    gpu = from_dict(KubeTaint, {"key": "gpu", "value": "true", "effect": "NoSchedule"})
    boot = from_dict(KubeTaint, {"key": "boot", "effect": "NoExecute"})
    template_spec = attrs.evolve(pool.spec.template.spec, taints=(gpu,), startup_taints=(boot,))
    spec = attrs.evolve(
        pool.spec, weight=7, template=attrs.evolve(pool.spec.template, spec=template_spec)
    )
    view = nodepool_template(attrs.evolve(pool, spec=spec))
    assert view.weight == 7
    assert dict(view.labels) == {"intent": "apps"}
    assert view.taints == (Taint("gpu", Effect.NO_SCHEDULE, "true"),)
    assert view.startup_taints == (Taint("boot", Effect.NO_EXECUTE),)
    assert view.limits == Resources.of({"cpu": 100})
    assert view.requirements.single_value(wk.LABEL_CAPACITY_TYPE) == wk.CAPACITY_TYPE_ON_DEMAND
    assert view.template_requirements().single_value(wk.LABEL_NODEPOOL) == "apps"


def _item(kind_name: str, name: str, obj: object) -> Item[object]:
    ref = ObjectRef(
        kind=kind_name, namespace="", name=name, uid=f"uid-{name}", resource_version="1"
    )
    return Item(ref=ref, obj=obj)


def test_read_cluster_reads_every_registered_store(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    stores = {
        k.kind: state.register(k)
        for k in (kinds.NODES, kinds.PODS, kinds.NODEPOOLS, kinds.NODECLAIMS)
    }
    stores["NodePool"].replace([_item("NodePool", "apps", apps_nodepool())])
    stores["Node"].replace([_item("Node", "n1", node("n1"))])
    for store in stores.values():
        store.listed.set()
    objects = read_cluster(ClusterView(state))
    assert [p.metadata.name for p in objects.nodepools] == ["apps"]
    assert [n.metadata.name for n in objects.nodes] == ["n1"]
    assert objects.pods == []
    assert objects.daemonsets == []


def test_read_cluster_reads_optional_kinds_when_given(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    state.register(kinds.NODES)
    state.register(kinds.PODS)
    state.register(kinds.NODEPOOLS)
    state.register(kinds.NODECLAIMS)
    pvcs = ResourceKind[PersistentVolumeClaim](
        kind="PersistentVolumeClaim",
        plural="persistentvolumeclaims",
        version="v1",
        decode=lambda raw: from_dict(PersistentVolumeClaim, raw),
    )
    claim = from_dict(PersistentVolumeClaim, {"metadata": {"name": "data", "namespace": "db"}})
    ref = ObjectRef(kind=pvcs.kind, namespace="db", name="data", uid="c", resource_version="1")
    state.register(pvcs).replace([Item(ref=ref, obj=claim)])
    objects = read_cluster(
        ClusterView(state), optional=SnapshotKinds(persistent_volume_claims=pvcs)
    )
    assert objects.volumes.claims == {("db", "data"): claim}
    with pytest.raises(KeyError, match="DaemonSet"):
        read_cluster(
            ClusterView(state), optional=SnapshotKinds(daemonsets=_unregistered_daemonsets())
        )


def _unregistered_daemonsets() -> ResourceKind[DaemonSet]:
    return ResourceKind[DaemonSet](
        kind="DaemonSet",
        plural="daemonsets",
        version="v1",
        group="apps",
        decode=lambda raw: from_dict(DaemonSet, raw),
    )


@given(
    pools=st.lists(models(KubeNodePool), max_size=2),
    nodes=st.lists(models(KubeNode), max_size=2),
    claims=st.lists(models(NodeClaim), max_size=2),
    daemonsets=st.lists(models(DaemonSet), max_size=2),
)
def test_any_decodable_objects_build_or_are_reported(
    pools: list[KubeNodePool],
    nodes: list[KubeNode],
    claims: list[NodeClaim],
    daemonsets: list[DaemonSet],
) -> None:
    objects = ClusterObjects(nodepools=pools, nodes=nodes, nodeclaims=claims, daemonsets=daemonsets)
    built = build_snapshot(objects, pending=[], instance_types={})
    live_pools = [p for p in pools if p.metadata.deletion_timestamp is None]
    pool_errors = [e for e in built.errors if e.kind == "NodePool"]
    assert len(built.snapshot.nodepools) + len(pool_errors) == len(live_pools)
    assert len(built.snapshot.daemonsets) + sum(e.kind == "DaemonSet" for e in built.errors) == len(
        daemonsets
    )
    for error in built.errors:
        assert error.message.startswith(f"{error.kind} ")
        assert ": spec." in error.message or ": status." in error.message


def test_namespaces_carry_their_name_label_and_any_labels_given() -> None:
    running = attrs.evolve(
        pod("db", {"nodeName": "n1", "containers": []}),
        metadata=attrs.evolve(pod("db").metadata, namespace="data"),
    )
    built = build_snapshot(
        ClusterObjects(nodes=[node("n1")], pods=[running], namespaces={"team": {"tier": "a"}}),
        pending=inflate(1),
        instance_types={},
    )
    name = "kubernetes.io/metadata.name"
    assert dict(built.snapshot.namespaces) == {
        "default": ((name, "default"),),
        "data": ((name, "data"),),
        "team": ((name, "team"), ("tier", "a")),
    }


def _bound_to(p: KubePod, node_name: str, namespace: str | None = None) -> KubePod:
    meta = p.metadata if namespace is None else attrs.evolve(p.metadata, namespace=namespace)
    return attrs.evolve(p, metadata=meta, spec=attrs.evolve(p.spec, node_name=node_name))


def _claim(name: str, node_name: str | None, **extra: object) -> NodeClaim:
    status: dict[str, object] = {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}
    if node_name is not None:
        status["nodeName"] = node_name
    return from_dict(
        NodeClaim,
        {
            "metadata": {"name": name, "labels": {wk.LABEL_NODEPOOL: "apps"}, **extra},
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "g", "kind": "K", "name": "d"},
            },
            "status": status,
        },
    )


def _without_creation(build: SnapshotBuild) -> SnapshotBuild:
    """`build` with its bound pods' creation indexes cleared (their order in each node kept)."""
    nodes = []
    for n in build.snapshot.nodes:
        creations = [p.creation for p in n.pods]
        assert creations == sorted(creations)  # tuple order is creation order
        nodes.append(attrs.evolve(n, pods=tuple(attrs.evolve(p, creation=0) for p in n.pods)))
    return attrs.evolve(build, snapshot=attrs.evolve(build.snapshot, nodes=tuple(nodes)))


def test_a_translation_built_without_some_nodes_is_the_snapshot_of_the_read_without_them() -> None:
    """One translation serves every build of a read: leaving Nodes, their pods and NodeClaims
    out of a build gives the snapshot built afresh from the read without them (bound pods are
    numbered over the whole read, so only their creation indexes differ, in the same order)."""
    apps = {wk.LABEL_NODEPOOL: "apps", "intent": "apps", wk.LABEL_NODE_INITIALIZED: "true"}
    a, b, c, d, e, f = inflate(6)
    bad = pod(
        "bad",
        {"nodeName": "n2", "containers": [{"name": "x", "resources": {"requests": {"cpu": "x"}}}]},
    )
    done = from_dict(
        KubePod,
        {
            "metadata": {"name": "job", "namespace": "batch", "uid": "uid-job"},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Succeeded"},
        },
    )
    gone = node("n3", labels=apps)
    objects = ClusterObjects(
        nodepools=[apps_nodepool()],
        nodes=[
            node("n1", labels=apps),
            node("n2", labels=apps),
            attrs.evolve(gone, metadata=attrs.evolve(gone.metadata, deletion_timestamp=DELETING)),
            node("n4", labels=apps, allocatable={"cpu": "lots"}),
        ],
        nodeclaims=[
            _claim("c1", "n1"),
            _claim("c2", "n2"),
            _claim("c2-twin", "n2"),  # a second NodeClaim naming n2: in flight once n2 is out
            _claim("c3", "n3"),
            _claim("flying", None),
            _claim("leaving", None, deletionTimestamp=DELETING.isoformat()),
        ],
        pods=[
            _bound_to(a, "n1"),
            _bound_to(b, "n2", "data"),
            _bound_to(c, "n2"),
            _bound_to(d, "n3"),
            _bound_to(e, "ghost", "elsewhere"),  # bound to a node not (yet) registered
            bad,
            done,
        ],
        namespaces={"team": {"tier": "a"}},
    )
    pending = [
        f,
        pod("worse", {"containers": [{"name": "x", "resources": {"requests": {"cpu": "y"}}}]}),
    ]
    translated = translate_cluster(objects, TYPES)
    cases: list[tuple[set[str], set[str]]] = [
        (set(), set()),
        ({"n2"}, {"c2"}),
        ({"n1"}, {"c1"}),
        ({"n2", "n3", "ghost"}, {"c2", "c3", "flying"}),
        ({"n4"}, set()),
        ({"n1", "n2"}, {"c1", "c2", "c2-twin"}),
        ({"n2"}, {"c2"}),  # again: a build leaves nothing behind for the next one
    ]
    for nodes, claims in cases:
        rest = attrs.evolve(
            objects,
            nodes=[n for n in objects.nodes if n.metadata.name not in nodes],
            nodeclaims=[c for c in objects.nodeclaims if c.metadata.name not in claims],
            pods=[p for p in objects.pods if p.spec.node_name not in nodes],
        )
        fresh = build_snapshot(rest, pending=pending, instance_types=TYPES)
        reused = translated.build(pending, without_nodes=nodes, without_claims=claims)
        assert _without_creation(reused) == _without_creation(fresh), (nodes, claims)
    # The case that made a second NodeClaim of n2 in flight, and the errors kept throughout.
    built = translated.build(pending, without_nodes={"n2"}, without_claims={"c2"})
    assert [(n.name, n.in_flight) for n in built.snapshot.nodes] == [
        ("n1", False),
        ("n2", True),
        ("flying", True),
    ]
    assert [(x.kind, x.name) for x in built.errors] == [("Node", "n4"), ("Pod", "worse")]
    assert "data" not in built.snapshot.namespaces
    assert "elsewhere" in built.snapshot.namespaces
