"""A cluster's state, snapshotted into a scenario, reads back in `karpy simulate` and plans the
same pods onto the same pools: the pieces of `karpy simulate --from-cluster` without I/O."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import yaml

from karpy.core.scheduling import solve
from karpy.kube.kinds import (
    DAEMONSETS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from karpy.kube.resources import ResourceKind, decode_item
from karpy.operator.snapshot import scenario_document, scenario_instance_type
from karpy.runtime.telemetry import Telemetry
from karpy.simulate.scenario import parse
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView
from karpy_kwok.catalog import shipped_instance_types


def _meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", **extra}


NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": _meta("default"),
    "spec": {
        "template": {
            "metadata": {"labels": {"intent": "apps"}},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "d",
                },
                "taints": [{"key": "dedicated", "value": "apps", "effect": "NoSchedule"}],
            },
        },
        "limits": {"cpu": "100"},
    },
}


NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


def _pod(
    name: str, *, node: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "nodeSelector": {"intent": "apps"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "apps", "effect": "NoSchedule"}
        ],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if node is None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    else:
        spec["nodeName"] = node
        status = {"phase": "Running", "startTime": "2030-01-01T11:45:00Z"}
    meta = _meta(name, namespace="default", labels={"app": "inflate"})
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": _meta(
        "node-1",
        labels={
            "karpenter.sh/nodepool": "default",
            "karpenter.sh/initialized": "true",
            "intent": "apps",
            "node.kubernetes.io/instance-type": "m5.large",
        },
    ),
    "spec": {"taints": [{"key": "dedicated", "value": "apps", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "1930m", "memory": "6Gi", "pods": "29"},
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
    },
}


def _view(
    telemetry: Telemetry, objects: dict[ResourceKind[Any], list[dict[str, Any]]]
) -> ClusterView:
    state = ClusterState(metrics=telemetry.metrics)
    for kind in (NODES, PODS, NODEPOOLS, NODECLAIMS, DAEMONSETS, PODDISRUPTIONBUDGETS):
        state.register(kind).replace([decode_item(kind, raw) for raw in objects.get(kind, [])])
    return ClusterView(state)


def test_snapshot_reads_back_and_plans_the_pending_pods(telemetry: Telemetry) -> None:
    view = _view(
        telemetry,
        {
            NODEPOOLS: [NODEPOOL],
            NODES: [NODE],
            PODS: [_pod("running", node="node-1"), _pod("pending-1"), _pod("pending-2")],
        },
    )
    catalog = [scenario_instance_type(t) for t in shipped_instance_types()]
    document = scenario_document(view, view.nodepools(), catalog, now=NOW)
    assert [p["name"] for p in document["pods"]] == ["pending-1", "pending-2"]
    assert [p["name"] for p in document["nodes"][0]["pods"]] == ["running"]

    scenario = parse(document)
    assert len(scenario.snapshot.nodes) == 1
    results = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    assert not results.unplaced
    # node-1 has room for no more than the pod it runs (1930m): one new NodeClaim takes both,
    # from the pool's on-demand offerings, carrying its taint and label.
    assert set(results.placed()) == {"uid-pending-1", "uid-pending-2"}
    (claim,) = results.nodeclaims
    assert claim.nodepool == "default"
    assert results.price > 0


def _protected_view(telemetry: Telemetry) -> ClusterView:
    pool = {
        **NODEPOOL,
        "metadata": _meta("default", annotations={"karpy.sh/consolidation-min-improvement": "10%"}),
        "spec": {
            **NODEPOOL["spec"],
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "30s",
                "budgets": [
                    {"nodes": "20%", "reasons": ["Underutilized"]},
                    {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
                ],
            },
        },
    }
    node = {
        **NODE,
        "metadata": {
            **NODE["metadata"],
            "annotations": {
                "karpenter.sh/do-not-disrupt": "true",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        },
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta("inflate", namespace="default"),
        "spec": {"selector": {"matchLabels": {"app": "inflate"}}, "maxUnavailable": "50%"},
        "status": {"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 2},
    }
    return _view(
        telemetry,
        {
            NODEPOOLS: [pool],
            NODES: [node],
            PODS: [
                _pod("held", node="node-1", annotations={"karpenter.sh/do-not-disrupt": "30m"}),
                _pod("odd", node="node-1", annotations={"karpenter.sh/do-not-disrupt": "yes"}),
                _pod("pending", annotations={"team": "web"}),
            ],
            PODDISRUPTIONBUDGETS: [pdb],
        },
    )


def test_snapshot_keeps_what_protects_the_nodes(telemetry: Telemetry) -> None:
    view = _protected_view(telemetry)
    catalog = [scenario_instance_type(t) for t in shipped_instance_types()]
    document = scenario_document(view, view.nodepools(), catalog, now=NOW)

    assert document["now"] == "2030-01-01T12:00:00Z"
    assert document["nodePools"][0]["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30s",
        "budgets": [
            {"nodes": "20%", "reasons": ["Underutilized"]},
            {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
        ],
        "minimumImprovement": "10%",
    }
    (node,) = document["nodes"]
    # Only the annotation the scenario reads, not every annotation of the node.
    assert node["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    held, odd = node["pods"]
    assert held["annotations"] == {"karpenter.sh/do-not-disrupt": "30m"}
    assert held["startTime"] == "2030-01-01T11:45:00Z"
    # Not a duration: protected for good in a cluster, so "true" in the scenario.
    assert odd["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert "annotations" not in document["pods"][0]
    assert document["podDisruptionBudgets"] == [
        {
            "name": "inflate",
            "namespace": "default",
            "selector": {"matchLabels": {"app": "inflate"}},
            "maxUnavailable": "50%",
        }
    ]

    # The written file reads back with the same protection, clock and budgets.
    scenario = parse(yaml.safe_load(yaml.safe_dump(document, sort_keys=False)))
    assert scenario.now == NOW.timestamp()
    assert scenario.protection.nodes == frozenset({"node-1"})
    assert scenario.protection.pods == {
        "uid-held": datetime(2030, 1, 1, 12, 15, tzinfo=UTC).timestamp(),
        "uid-odd": math.inf,
    }
    ((pdb),) = scenario.protection.pdbs
    assert (pdb.metadata.namespace, pdb.metadata.name) == ("default", "inflate")
    assert pdb.spec.max_unavailable == "50%"
    disruption = scenario.disruption["default"]
    assert disruption.consolidate_after == 30.0
    assert disruption.min_improvement == 0.1
    assert [(b.nodes, b.schedule, b.duration) for b in disruption.budgets] == [
        ("20%", None, None),
        ("0", "0 9 * * mon-fri", 8 * 3600.0),
    ]


def test_a_nodeclaims_do_not_disrupt_protects_its_node(telemetry: Telemetry) -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": _meta(
            "default-abc",
            labels={"karpenter.sh/nodepool": "default"},
            annotations={"karpenter.sh/do-not-disrupt": "true"},
        ),
        "spec": {
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"},
        },
        "status": {"nodeName": "node-1", "allocatable": {"cpu": "1930m"}},
    }
    pdb = {  # neither minAvailable nor maxUnavailable, no selector
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta("loose", namespace="default"),
        "spec": {},
    }
    view = _view(
        telemetry,
        {NODEPOOLS: [NODEPOOL], NODES: [NODE], NODECLAIMS: [claim], PODDISRUPTIONBUDGETS: [pdb]},
    )
    catalog = [scenario_instance_type(t) for t in shipped_instance_types()]
    document = scenario_document(view, view.nodepools(), catalog, now=NOW)
    (node,) = document["nodes"]
    assert node["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert document["podDisruptionBudgets"] == [
        {"name": "loose", "namespace": "default", "minAvailable": 0}
    ]
    scenario = parse(document)
    assert scenario.protection.nodes == frozenset({"node-1"})
    (loose,) = scenario.protection.pdbs
    assert loose.spec.selector is None
