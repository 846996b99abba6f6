"""The labels of a NodeClaim's created and disrupted counters, read off the NodeClaim (pure)."""

from __future__ import annotations

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.state.series import PROVISIONED_REASON, created_labels, disrupted_labels

REF = NodeClassReference(group="g", kind="K", name="n")


def _claim(labels: dict[str, str], annotations: dict[str, str] | None = None) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(name="c", labels=labels, annotations=annotations or {}),
        spec=NodeClaimSpec(requirements=(), node_class_ref=REF),
    )


def test_created_says_whether_min_values_was_relaxed() -> None:
    relaxed = _claim(
        {wk.LABEL_NODEPOOL: "general"}, {wk.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: "true"}
    )
    assert created_labels(relaxed, PROVISIONED_REASON) == {
        "reason": "provisioned",
        "nodepool": "general",
        "min_values_relaxed": "true",
    }
    # Without the annotation nothing was relaxed, as Karpenter assumes.
    plain = _claim({wk.LABEL_NODEPOOL: "general"})
    assert created_labels(plain, "underutilized")["min_values_relaxed"] == "false"


def test_disrupted_carries_the_capacity_type() -> None:
    spot = _claim({wk.LABEL_NODEPOOL: "general", wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT})
    assert disrupted_labels(spot, "expired") == {
        "reason": "expired",
        "nodepool": "general",
        "capacity_type": "spot",
    }
    # Before launch a NodeClaim has no capacity type: the label is there, empty.
    unlaunched = _claim({wk.LABEL_NODEPOOL: "general"})
    assert disrupted_labels(unlaunched, "drifted")["capacity_type"] == ""
