"""A solver plan becomes a NodeClaim of Karpenter's shape; nominations hold pods until launch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.controllers.provisioning.provisioner import Nominations
from karpy.core.pods import PodUID
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.scheduling.results import NodeClaimPlan
from karpy.state.nodepools import nodepool_hash
from karpy.state.plans import (
    PlanError,
    nodeclaim_from_plan,
    summarize_instance_types,
)

REF = NodeClassReference(group="karpenter.test.sh", kind="TestNodeClass", name="default")


def _pool(name: str = "default", *, uid: str | None = "pool-uid") -> NodePool:
    template = NodeClaimTemplate(
        metadata=NodeClaimTemplateMetadata(
            labels={"intent": "apps"}, annotations={"team": "payments"}
        ),
        spec=NodeClaimTemplateSpec(
            requirements=(
                NodeSelectorRequirementWithMinValues(
                    key=wk.LABEL_OS, operator=RequirementOperator.IN, values=(wk.OS_LINUX,)
                ),
            ),
            node_class_ref=REF,
            taints=(Taint(key="dedicated", value="apps", effect=TaintEffect.NO_SCHEDULE),),
            startup_taints=(Taint(key="warming", effect=TaintEffect.NO_EXECUTE),),
            expire_after="48h",
            termination_grace_period="1h",
        ),
    )
    return NodePool(metadata=ObjectMeta(name=name, uid=uid), spec=NodePoolSpec(template=template))


def _plan(nodepool: str = "default", *, relaxed: bool = False) -> NodeClaimPlan:
    reqs = Requirements(
        [
            Requirement.new(wk.LABEL_INSTANCE_TYPE, "In", ["m5.large", "c5.large"]),
            Requirement.new(wk.LABEL_CAPACITY_TYPE, "In", ["on-demand"]),
            Requirement.new("intent", "In", ["apps"]),
        ]
    )
    return NodeClaimPlan(
        name="plan-0",
        nodepool=nodepool,
        requirements=reqs,
        instance_types=("c5.large", "m5.large"),
        zones=("test-zone-1",),
        capacity_types=("on-demand",),
        requests=Resources.of({"cpu": 3, "memory": "4608Mi", "pods": 3}),
        pods=(PodUID("a"), PodUID("b"), PodUID("c")),
        price=0.1,
        min_values_relaxed=relaxed,
    )


def test_a_plan_becomes_a_nodeclaim_named_owned_and_labelled_from_its_nodepool() -> None:
    claim = nodeclaim_from_plan(_plan(), _pool())
    meta = claim.metadata
    assert meta.name is None
    assert meta.generate_name == "default-"
    (owner,) = meta.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
        "karpenter.sh/v1",
        "NodePool",
        "default",
        "pool-uid",
    )
    assert owner.block_owner_deletion is True
    assert meta.labels == {"intent": "apps", wk.LABEL_NODEPOOL: "default"}
    assert meta.annotations == {
        "team": "payments",
        wk.ANNOTATION_NODEPOOL_HASH: nodepool_hash(_pool()),
        wk.ANNOTATION_NODEPOOL_HASH_VERSION: "karpy-v1",
    }
    reqs = {(r.key, r.operator): r.values for r in claim.spec.requirements}
    assert reqs[(wk.LABEL_INSTANCE_TYPE, RequirementOperator.IN)] == ("c5.large", "m5.large")
    assert reqs[(wk.LABEL_CAPACITY_TYPE, RequirementOperator.IN)] == ("on-demand",)
    assert reqs[("intent", RequirementOperator.IN)] == ("apps",)
    assert claim.spec.resources.requests == {
        "cpu": Quantity("3"),
        "memory": Quantity("4608Mi"),
        "pods": Quantity("3"),
    }
    template = _pool().spec.template.spec
    assert claim.spec.taints == template.taints
    assert claim.spec.startup_taints == template.startup_taints
    assert claim.spec.node_class_ref == REF
    assert (claim.spec.expire_after, claim.spec.termination_grace_period) == ("48h", "1h")


def test_a_plan_that_relaxed_min_values_says_so() -> None:
    claim = nodeclaim_from_plan(_plan(relaxed=True), _pool())
    assert claim.metadata.annotations[wk.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] == "true"


@pytest.mark.parametrize(
    ("plan", "pool", "match"),
    [
        pytest.param(_plan("other"), _pool(), "planned for NodePool 'other'", id="wrong-pool"),
        pytest.param(_plan(), _pool(uid=None), "metadata.uid is missing", id="no-uid"),
    ],
)
def test_a_plan_that_cannot_become_a_nodeclaim_is_refused_by_name(
    plan: NodeClaimPlan, pool: NodePool, match: str
) -> None:
    with pytest.raises(PlanError, match=match):
        nodeclaim_from_plan(plan, pool)


def test_instance_types_are_summarized_after_five() -> None:
    assert summarize_instance_types(["a", "b"]) == "a, b"
    names = [f"t{i}" for i in range(12)]
    assert summarize_instance_types(names) == "t0, t1, t2, t3, t4 and 7 other(s)"


def _claim(name: str, *, launched: bool = False, deleting: bool = False) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(
            name=name, deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC) if deleting else None
        ),
        spec=NodeClaimSpec(requirements=(), node_class_ref=REF),
        status=NodeClaimStatus(allocatable={"cpu": Quantity("2")} if launched else {}),
    )


def test_nominations_hold_a_pod_until_its_nodeclaim_launches_or_goes() -> None:
    nominations = Nominations(window=20.0)
    nominations.nominate(["a", "b"], "nc-1", now=0.0)
    # Not yet seen by the informer: held within the window, released after it.
    assert nominations.holds("a", {}, now=5.0)
    assert not nominations.holds("a", {}, now=25.0)
    assert not nominations.holds("a", {"nc-1": _claim("nc-1")}, now=26.0), "forgotten"
    # Seen and unlaunched: held whatever the time; launched: released.
    assert nominations.holds("b", {"nc-1": _claim("nc-1")}, now=100.0)
    assert not nominations.holds("b", {"nc-1": _claim("nc-1", launched=True)}, now=101.0)
    nominations.nominate(["c"], "nc-2", now=0.0)
    assert not nominations.holds("c", {"nc-2": _claim("nc-2", deleting=True)}, now=1.0)
    assert not nominations.holds("unknown", {}, now=0.0)


def test_nominations_forget_pods_that_are_no_longer_pending() -> None:
    nominations = Nominations(window=20.0)
    nominations.nominate(["a", "b"], "nc-1", now=0.0)
    nominations.retain(["b"])
    claims = {"nc-1": _claim("nc-1")}
    assert not nominations.holds("a", claims, now=1.0)
    assert nominations.holds("b", claims, now=1.0)
