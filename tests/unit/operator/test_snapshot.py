"""A cluster's state, snapshotted into a scenario, reads back in `karpy simulate` and plans the
same pods onto the same pools: the pieces of `karpy simulate --from-cluster` without I/O."""

from __future__ import annotations

from typing import Any

from karpy.core.scheduling import solve
from karpy.kube.kinds import DAEMONSETS, NODECLAIMS, NODEPOOLS, NODES, PODS
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


def _pod(name: str, *, node: str | None = None) -> dict[str, Any]:
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
        status = {"phase": "Running"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, namespace="default", labels={"app": "inflate"}),
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
    for kind in (NODES, PODS, NODEPOOLS, NODECLAIMS, DAEMONSETS):
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
    document = scenario_document(view, view.nodepools(), catalog)
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
