"""Shadow mode: what a withheld write means, and the answer the apiserver would have given."""

from __future__ import annotations

from karpy.apis.codec import from_dict
from karpy.apis.kube.workloads import Deployment
from karpy.operator.autoscaler import is_cluster_autoscaler
from karpy.operator.dryrun import Decision, classify, merge


def test_classify_names_launches_disruptions_evictions_and_patches() -> None:
    body = {"metadata": {"generateName": "default-"}}
    assert classify("POST", "/apis/karpenter.sh/v1/nodeclaims", body) == Decision(
        action="launch", kind="NodeClaim", name="<generated>"
    )
    assert classify("DELETE", "/apis/karpenter.sh/v1/nodeclaims/default-x", None) == Decision(
        action="disrupt", kind="NodeClaim", name="default-x"
    )
    assert classify("POST", "/api/v1/namespaces/ns/pods/p/eviction", {}) == Decision(
        action="evict", kind="Pod", name="p", namespace="ns"
    )
    assert classify("PATCH", "/api/v1/nodes/n1", {}) == Decision(
        action="patch", kind="Node", name="n1"
    )
    assert classify("PATCH", "/apis/karpenter.sh/v1/nodepools/p/status", {}) == Decision(
        action="patch", kind="NodePool", name="p"
    )


def test_merge_applies_a_json_merge_patch() -> None:
    current = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"taints": [1]}}
    patch = {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"taints": []}}
    assert merge(current, patch) == {
        "metadata": {"labels": {"b": "2", "c": "3"}},
        "spec": {"taints": []},
    }


def _deployment(name: str, replicas: int, labels: dict[str, str] | None = None) -> Deployment:
    return from_dict(
        Deployment,
        {
            "metadata": {"name": name, "namespace": "kube-system", "labels": labels or {}},
            "spec": {"replicas": replicas},
        },
    )


def test_cluster_autoscaler_is_found_by_name_or_label_when_running() -> None:
    assert is_cluster_autoscaler(_deployment("cluster-autoscaler", 1))
    assert is_cluster_autoscaler(
        _deployment("ca", 1, {"app.kubernetes.io/name": "aws-cluster-autoscaler"})
    )
    assert not is_cluster_autoscaler(_deployment("cluster-autoscaler", 0))
    assert not is_cluster_autoscaler(_deployment("karpy", 1))
