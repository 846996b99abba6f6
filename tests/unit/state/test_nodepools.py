"""Which NodePool template fields the hash covers (requirements never, the rest always), and
how a NodePool's extended-resource initialization timeout is read."""

from __future__ import annotations

import datetime

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
    DisruptionReason,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.controllers.nodepool.status import validation_error
from karpy.state.nodepools import (
    extended_resource_timeout,
    hash_annotations,
    nodepool_hash,
    pool_budgets,
)
from karpy.state.plans import MAX_INSTANCE_TYPES, nodeclaim_from_template


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


def _annotated(value: str) -> NodePool:
    pool = _pool()
    key = wk.ANNOTATION_EXTENDED_RESOURCE_INITIALIZATION_TIMEOUT
    return attrs.evolve(pool, metadata=attrs.evolve(pool.metadata, annotations={key: value}))


@pytest.mark.parametrize(
    ("pool", "default", "expected"),
    [
        pytest.param(None, None, None, id="no-pool-no-default"),
        pytest.param(
            None, datetime.timedelta(minutes=5), datetime.timedelta(minutes=5), id="no-pool"
        ),
        pytest.param(_pool(), None, None, id="off-by-default"),
        pytest.param(
            _pool(), datetime.timedelta(minutes=5), datetime.timedelta(minutes=5), id="global"
        ),
        pytest.param(_annotated("90s"), None, datetime.timedelta(seconds=90), id="pool-sets-it"),
        pytest.param(
            _annotated("1h"),
            datetime.timedelta(minutes=5),
            datetime.timedelta(hours=1),
            id="pool-overrides",
        ),
        pytest.param(_annotated("Never"), datetime.timedelta(minutes=5), None, id="pool-opts-out"),
    ],
)
def test_the_extended_resource_timeout_is_the_pools_else_the_global_one(
    pool: NodePool | None, default: datetime.timedelta | None, expected: datetime.timedelta | None
) -> None:
    assert extended_resource_timeout(pool, default=default) == expected


@pytest.mark.parametrize("value", ["soon", "0s", "-5m", ""])
def test_a_bad_timeout_annotation_is_refused_naming_it(value: str) -> None:
    key = wk.ANNOTATION_EXTENDED_RESOURCE_INITIALIZATION_TIMEOUT
    with pytest.raises(ValueError, match=f"nodepool 'default' annotation {key}"):
        extended_resource_timeout(_annotated(value), default=None)
    # The NodePool's runtime validation reports it (ValidationSucceeded=False).
    error = validation_error(_annotated(value))
    assert error is not None
    assert key in error


def test_a_static_pool_fails_validation_naming_the_gate_until_it_is_on() -> None:
    pool = _pool()
    static = attrs.evolve(pool, spec=attrs.evolve(pool.spec, replicas=3))
    error = validation_error(static)
    assert error is not None
    assert "spec.replicas" in error
    assert "StaticCapacity" in error
    assert validation_error(static, static_capacity=True) is None
    assert validation_error(pool) is None


def test_pool_budgets_translate_for_the_core_and_fail_closed_on_a_bad_duration() -> None:
    pool = _pool()
    budgets = (
        Budget(nodes="20%", reasons=(DisruptionReason.DRIFTED,)),
        Budget(nodes="0", schedule="@daily", duration="10m"),
        Budget(nodes="1", schedule="@daily", duration="Never"),
    )
    pool = attrs.evolve(pool, spec=attrs.evolve(pool.spec, disruption=Disruption(budgets=budgets)))
    drifted, windowed, bad = pool_budgets(pool)
    assert (drifted.nodes, drifted.reasons, drifted.error) == ("20%", frozenset({"Drifted"}), None)
    assert (windowed.schedule, windowed.duration) == ("@daily", 600.0)
    assert bad.error is not None
    assert "spec.disruption.budgets[2].duration" in bad.error


def test_a_static_nodeclaim_lists_the_compatible_types_cheapest_first_up_to_sixty() -> None:
    pool = _pool()
    pool = attrs.evolve(pool, metadata=attrs.evolve(pool.metadata, uid="uid-1"))
    names = [f"t{i:03d}" for i in range(70)]
    claim = nodeclaim_from_template(pool, instance_types=names)
    listed = [r for r in claim.spec.requirements if r.key == wk.LABEL_INSTANCE_TYPE]
    assert [tuple(r.values) for r in listed] == [tuple(names[:MAX_INSTANCE_TYPES])]
    assert claim.metadata.generate_name == f"{pool.metadata.name}-"
    assert claim.metadata.owner_references[0].uid == "uid-1"
    bare = nodeclaim_from_template(pool)
    assert not [r for r in bare.spec.requirements if r.key == wk.LABEL_INSTANCE_TYPE]
