"""Which NodePool template fields the hash covers: requirements never, the rest always."""

from __future__ import annotations

import attrs
import pytest

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodepool import (
    Budget,
    Disruption,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.state.nodepools import hash_annotations, nodepool_hash


def _pool(**spec: object) -> NodePool:
    fields: dict[str, object] = {
        "requirements": (
            NodeSelectorRequirementWithMinValues(
                key=wk.LABEL_OS, operator=RequirementOperator.IN, values=(wk.OS_LINUX,)
            ),
        ),
        "node_class_ref": NodeClassReference(group="g", kind="K", name="default"),
        **spec,
    }
    return NodePool(
        metadata=ObjectMeta(name="default"),
        spec=NodePoolSpec(template=NodeClaimTemplate(spec=NodeClaimTemplateSpec(**fields))),  # type: ignore[arg-type]
    )


def test_requirements_limits_and_disruption_are_not_hashed() -> None:
    pool = _pool()
    other_reqs = _pool(
        requirements=(
            NodeSelectorRequirementWithMinValues(
                key=wk.LABEL_ARCH, operator=RequirementOperator.IN, values=("arm64",)
            ),
        )
    )
    assert nodepool_hash(other_reqs) == nodepool_hash(pool)
    spec = attrs.evolve(
        pool.spec,
        limits={"cpu": "10"},
        weight=5,
        disruption=Disruption(budgets=(Budget(nodes="0"),), consolidate_after="5m"),
    )
    assert nodepool_hash(attrs.evolve(pool, spec=spec)) == nodepool_hash(pool)


def test_durations_are_hashed_by_value() -> None:
    assert nodepool_hash(_pool(expire_after="60m")) == nodepool_hash(_pool(expire_after="1h"))
    assert nodepool_hash(_pool(expire_after="Never")) != nodepool_hash(_pool())


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"taints": (Taint(key="a", effect=TaintEffect.NO_SCHEDULE),)}, id="taints"),
        pytest.param(
            {"startup_taints": (Taint(key="a", effect=TaintEffect.NO_EXECUTE),)}, id="startup"
        ),
        pytest.param({"expire_after": "1h"}, id="expire-after"),
        pytest.param({"termination_grace_period": "1h"}, id="tgp"),
        pytest.param(
            {"node_class_ref": NodeClassReference(group="g", kind="K", name="other")}, id="ref"
        ),
    ],
)
def test_each_hashed_spec_field_changes_the_hash(spec: dict[str, object]) -> None:
    assert nodepool_hash(_pool(**spec)) != nodepool_hash(_pool())


def test_template_metadata_is_hashed() -> None:
    pool = _pool()
    labelled = attrs.evolve(
        pool,
        spec=attrs.evolve(
            pool.spec,
            template=attrs.evolve(
                pool.spec.template, metadata=NodeClaimTemplateMetadata(labels={"team": "a"})
            ),
        ),
    )
    assert nodepool_hash(labelled) != nodepool_hash(pool)
    assert hash_annotations(pool) == {
        wk.ANNOTATION_NODEPOOL_HASH: nodepool_hash(pool),
        wk.ANNOTATION_NODEPOOL_HASH_VERSION: "karpy-v1",
    }
