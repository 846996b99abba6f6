"""Cluster state → disruption facts, and pod events → lastPodEventTime keys. No cluster needed:
these check the translation rules (which pods keep a node busy, what do-not-disrupt and PDBs
protect, how durations become seconds, which NodeClaims are in a command, what counts as a bind
or a removal)."""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator

import attrs
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.apis.kube.common import LabelSelector
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod, PodPhase, PodSpec, PodStatus
from karpy.apis.kube.workloads import (
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
)
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, OwnerReference
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.apis.v1.nodepool import Budget, Disruption, DisruptionReason, NodePool
from karpy.controllers.disruption import facts as inputs
from karpy.kube.kinds import PODS
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.podmoves import pod_moves
from karpy.state.view import ClusterView
from tests.cluster.provisioning.harness import make_nodepool

WHEN = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _claim(name: str, node: str, *, annotations: dict[str, str] | None = None) -> NodeClaim:
    initialized = Condition(
        type=ConditionType.INITIALIZED,
        status=ConditionStatus.TRUE,
        reason="Initialized",
        last_transition_time=WHEN,
    )
    return NodeClaim(
        metadata=ObjectMeta(
            name=name, labels={wk.LABEL_NODEPOOL: "p"}, annotations=annotations or {}
        ),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
        status=NodeClaimStatus(node_name=node, conditions=(initialized,)),
    )


def _pod(name: str, node: str, *, meta: ObjectMeta | None = None) -> Pod:
    base = meta or ObjectMeta()
    metadata = attrs.evolve(base, name=name, namespace="ns", uid=name)
    return Pod(metadata=metadata, spec=PodSpec(node_name=node))


def test_candidates_count_only_reschedulable_pods_and_read_annotations() -> None:
    daemon = OwnerReference(api_version="apps/v1", kind="DaemonSet", name="ds", uid="u")
    pods = [
        _pod("daemon", "n1", meta=ObjectMeta(owner_references=(daemon,))),
        _pod("mirror", "n1", meta=ObjectMeta(annotations={wk.ANNOTATION_MIRROR_POD: "x"})),
        _pod("leaving", "n1", meta=ObjectMeta(deletion_timestamp=WHEN)),
        _done(_pod("done", "n1")),
        _pod("app", "n2"),
    ]
    nodes = [
        Node(metadata=ObjectMeta(name="n1")),
        Node(metadata=ObjectMeta(name="n2", annotations={wk.ANNOTATION_DO_NOT_DISRUPT: "true"})),
    ]
    found = {
        c.nodeclaim: c
        for c in inputs.node_facts(
            [
                _claim("a", "n1"),
                _claim("b", "n2"),
                _claim("c", "n3", annotations={wk.ANNOTATION_DO_NOT_DISRUPT: "true"}),
            ],
            nodes,
            pods,
            now=WHEN.timestamp() + 60,
            nomination_window=20.0,
        )
    }
    assert found["c"].do_not_disrupt
    assert found["c"].node is None  # its Node is not in cluster state
    assert not found["a"].nominated
    assert found["a"].pods == ()
    assert found["a"].initialized_at == WHEN.timestamp()
    assert found["a"].nodepool == "p"
    assert not found["a"].do_not_disrupt
    assert [p.name for p in found["b"].pods] == ["ns/app"]
    assert found["b"].do_not_disrupt


def test_a_fresh_node_no_pod_reached_yet_counts_as_nominated() -> None:
    claim = _claim("a", "n1")
    nodes = [Node(metadata=ObjectMeta(name="n1"))]
    initialized = WHEN.timestamp()

    def nominated(after: float, last: datetime.datetime | None) -> bool:
        stamped = attrs.evolve(claim, status=attrs.evolve(claim.status, last_pod_event_time=last))
        (found,) = inputs.node_facts(
            [stamped], nodes, [], now=initialized + after, nomination_window=20.0
        )
        return found.nominated

    assert nominated(5.0, None)
    assert not nominated(25.0, None)
    assert not nominated(5.0, WHEN + datetime.timedelta(seconds=1))


def test_do_not_disrupt_duration_counts_from_the_pod_start() -> None:
    started = PodStatus(start_time=WHEN)
    annotated = attrs.evolve(
        _pod("p", "n1", meta=ObjectMeta(annotations={wk.ANNOTATION_DO_NOT_DISRUPT: "5m"})),
        status=started,
    )
    assert inputs.do_not_disrupt_until(annotated) == WHEN.timestamp() + 300
    forever = _pod("q", "n1", meta=ObjectMeta(annotations={wk.ANNOTATION_DO_NOT_DISRUPT: "true"}))
    assert inputs.do_not_disrupt_until(forever) == math.inf
    odd = _pod("r", "n1", meta=ObjectMeta(annotations={wk.ANNOTATION_DO_NOT_DISRUPT: "yes"}))
    assert inputs.do_not_disrupt_until(odd) == math.inf  # fails safe
    assert inputs.do_not_disrupt_until(_pod("s", "n1")) is None


def _pdb(name: str, labels: dict[str, str] | None, allowed: int) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace="ns"),
        spec=PodDisruptionBudgetSpec(
            selector=LabelSelector(match_labels=labels) if labels is not None else None
        ),
        status=PodDisruptionBudgetStatus(disruptions_allowed=allowed),
    )


def test_a_pdb_with_no_disruptions_allowed_or_two_pdbs_block_eviction() -> None:
    web = _pod("web", "n1", meta=ObjectMeta(labels={"app": "web"}))
    db = _pod("db", "n1", meta=ObjectMeta(labels={"app": "db"}))
    other = _pod("other", "n1", meta=ObjectMeta(labels={"app": "other"}))
    budgets = inputs.Budgets(
        [
            _pdb("web", {"app": "web"}, 0),
            _pdb("db", {"app": "db"}, 1),
            _pdb("db-too", {"app": "db"}, 1),
            _pdb("none", None, 0),
        ]
    )
    assert budgets.blocking("ns", web.metadata.labels) == "ns/web"
    assert budgets.blocking("ns", db.metadata.labels) == "ns/db"
    assert budgets.blocking("ns", other.metadata.labels) is None
    assert (
        inputs.Budgets([_pdb("web", {"app": "web"}, 1)]).blocking("ns", web.metadata.labels) is None
    )


def test_drift_and_commands_are_read_from_the_nodeclaim() -> None:
    drifted = Condition(
        type=ConditionType.DRIFTED,
        status=ConditionStatus.TRUE,
        reason="NodePoolDrifted",
        last_transition_time=WHEN,
    )
    claim = _claim("a", "n1", annotations={wk.ANNOTATION_DISRUPTION_COMMAND: "c1"})
    claim = attrs.evolve(
        claim,
        status=attrs.evolve(claim.status, conditions=(*claim.status.conditions, drifted)),
    )
    replacement = _claim("b", "n2", annotations={wk.ANNOTATION_REPLACEMENT_FOR: "c1"})
    finished = _claim("c", "n3", annotations={wk.ANNOTATION_REPLACEMENT_FOR: "gone"})
    found = {
        f.nodeclaim: f
        for f in inputs.node_facts(
            [claim, replacement, finished],
            [],
            [],
            now=WHEN.timestamp() + 600,
            nomination_window=20.0,
        )
    }
    assert found["a"].drifted == "NodePoolDrifted"
    assert found["a"].disrupting
    assert found["b"].nominated  # its command's candidate still exists
    assert not found["c"].nominated


def _done(pod: Pod) -> Pod:
    return attrs.evolve(pod, status=PodStatus(phase=PodPhase.SUCCEEDED))


def test_pool_durations_become_seconds_and_bad_ones_fail_closed() -> None:
    pool = make_nodepool("p", "i")
    disruption = Disruption(
        consolidate_after="1m30s",
        budgets=(
            Budget(
                nodes="0", schedule="@daily", duration="1h30m", reasons=(DisruptionReason.EMPTY,)
            ),
            Budget(nodes="1", schedule="@daily", duration="soon"),
        ),
    )
    pool = _with(pool, disruption)
    (translated,) = inputs.pools([pool]).values()
    assert translated.consolidate_after == 90.0
    assert translated.budgets[0].duration == 5400.0
    assert translated.budgets[0].reasons == frozenset({"Empty"})
    assert translated.budgets[1].error is not None
    assert "budgets[1].duration" in translated.budgets[1].error
    never = _with(pool, Disruption(consolidate_after="Never"))
    assert inputs.pool_disruption(never).consolidate_after is None


def _with(pool: NodePool, disruption: Disruption) -> NodePool:
    return attrs.evolve(pool, spec=attrs.evolve(pool.spec, disruption=disruption))


@pytest.fixture
def state() -> Iterator[ClusterState]:
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=InMemorySpanExporter())
    state = ClusterState(metrics=telemetry.metrics)
    state.register(PODS)
    yield state
    telemetry.shutdown()


def _event(kind: EventType, pod: Pod) -> Event[Pod]:
    ref = ObjectRef(
        kind="Pod",
        namespace="ns",
        name=pod.metadata.name or "",
        uid=pod.metadata.uid or "",
        resource_version="1",
    )
    return Event(type=kind, item=Item(ref=ref, obj=pod))


def test_pod_moves_name_binds_and_removals_once_synced(state: ClusterState) -> None:
    queued: list[str] = []
    view = ClusterView(state)
    keys = pod_moves(lambda: view.informers_synced)

    def on_event(event: Event[Pod]) -> None:
        queued.extend(keys(event))

    on_event(_event(EventType.ADDED, _pod("listed", "n0")))
    assert queued == []  # the initial list is remembered, not an event on the node
    state.store(PODS).replace([])
    state.mark_listed()
    on_event(_event(EventType.ADDED, _pod("new", "")))
    on_event(_event(EventType.MODIFIED, _pod("new", "n1")))
    on_event(_event(EventType.MODIFIED, _pod("new", "n1")))
    assert queued == ["n1"]
    on_event(_event(EventType.MODIFIED, _done(_pod("new", "n1"))))
    on_event(_event(EventType.DELETED, _done(_pod("new", "n1"))))
    on_event(_event(EventType.DELETED, _pod("listed", "n0")))
    assert queued == ["n1", "n1", "n0"]


def test_min_improvement_comes_from_the_option_or_the_pool_annotation() -> None:
    pool = make_nodepool("p", "i")
    assert inputs.pool_disruption(pool, min_improvement=0.05).min_improvement == 0.05
    annotated = attrs.evolve(
        pool,
        metadata=attrs.evolve(
            pool.metadata, annotations={inputs.ANNOTATION_MIN_IMPROVEMENT: "10%"}
        ),
    )
    assert inputs.pool_disruption(annotated, min_improvement=0.05).min_improvement == 0.1
    bad = attrs.evolve(
        pool,
        metadata=attrs.evolve(pool.metadata, annotations={inputs.ANNOTATION_MIN_IMPROVEMENT: "x"}),
    )
    error = inputs.pool_disruption(bad).error
    assert error is not None
    assert inputs.ANNOTATION_MIN_IMPROVEMENT in error


def test_nodeclaims_are_priced_from_their_pools_offerings() -> None:
    from karpy.testing.instancetypes import make_instance_types

    (it,) = make_instance_types(1)
    claim = _claim("a", "node-a")
    labels = {
        wk.LABEL_NODEPOOL: "p",
        wk.LABEL_INSTANCE_TYPE: it.name,
        wk.LABEL_TOPOLOGY_ZONE: "test-zone-2",
        wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT,
    }
    claim = attrs.evolve(claim, metadata=attrs.evolve(claim.metadata, labels=labels))
    other = _claim("b", "node-b")
    found = inputs.node_facts([claim, other], [], [], now=WHEN.timestamp(), nomination_window=0)
    priced = inputs.priced(found, {"p": [it]})
    expected = next(
        o.price
        for o in it.offerings
        if o.zone == "test-zone-2" and o.capacity_type == wk.CAPACITY_TYPE_SPOT
    )
    assert [f.price for f in priced] == [expected, None]
