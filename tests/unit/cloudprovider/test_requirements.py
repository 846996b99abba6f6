"""Wire requirements and quantities <-> core Requirements and Resources: round trips and errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClaimRequirement,
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.cloudprovider.requirements import (
    nodepool_requirements,
    quantities_from_resources,
    requirement_from_api,
    requirements_from_api,
    requirements_to_api,
    resources_from_quantities,
)
from karpy.core.requirements import Requirement, RequirementError, Requirements
from karpy.core.resources import QuantityError, Resources, parse_quantity
from karpy_aws.apis import labels as awslabels

KEYS = [wk.LABEL_ARCH, "beta.kubernetes.io/arch", wk.LABEL_INSTANCE_TYPE, "team", "size"]
VALUES = ["a", "b", "c", "0", "1", "2", "5", "10", "amd64", "arm64"]
NUMERIC = (
    RequirementOperator.GT,
    RequirementOperator.LT,
    RequirementOperator.GTE,
    RequirementOperator.LTE,
)


@st.composite
def wire_requirements(draw: st.DrawFn) -> NodeClaimRequirement:
    op = draw(st.sampled_from(list(RequirementOperator)))
    key = draw(st.sampled_from(KEYS))
    min_values = None
    if op in (RequirementOperator.IN, RequirementOperator.NOT_IN):
        values = tuple(draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=4, unique=True)))
        if op is RequirementOperator.IN:
            min_values = draw(st.none() | st.integers(1, len(values)))
    elif op in NUMERIC:
        values = (str(draw(st.integers(0, 12))),)
    else:
        values = ()
    return NodeClaimRequirement(key=key, operator=op, values=values, min_values=min_values)


def _oracle(req: NodeClaimRequirement, value: str | None) -> bool:
    """Kubernetes' node-selector meaning of one wire entry, written independently of the core
    (``value`` None means the node lacks the label)."""
    op = req.operator
    if value is None:
        return op in (RequirementOperator.NOT_IN, RequirementOperator.DOES_NOT_EXIST)
    if op is RequirementOperator.IN:
        return value in req.values
    if op is RequirementOperator.NOT_IN:
        return value not in req.values
    if op is RequirementOperator.EXISTS:
        return True
    if op is RequirementOperator.DOES_NOT_EXIST:
        return False
    if not value.isdigit():
        return False
    number, bound = int(value), int(req.values[0])
    return {
        RequirementOperator.GT: number > bound,
        RequirementOperator.LT: number < bound,
        RequirementOperator.GTE: number >= bound,
        RequirementOperator.LTE: number <= bound,
    }[op]


def _holds(reqs: Requirements, key: str, value: str | None) -> bool:
    req = reqs.get(key)
    assert req is not None
    labels = {} if value is None else {key: value}
    return Requirements([req]).matches_labels(labels) is None


def _normal(key: str) -> str:
    return wk.NORMALIZED_LABELS.get(key, key)


@given(st.lists(wire_requirements(), max_size=5), st.sampled_from([None, *VALUES]))
def test_reading_keeps_kubernetes_meaning(
    wire: list[NodeClaimRequirement], value: str | None
) -> None:
    reqs = requirements_from_api(wire)
    for key in {_normal(r.key) for r in wire}:
        entries = [r for r in wire if _normal(r.key) == key]
        if value is None and len(entries) > 1:
            # Entries that leave no value in common read as DoesNotExist, as in Karpenter, so
            # the absent label is compared only for keys named once.
            continue
        assert _holds(reqs, key, value) == all(_oracle(r, value) for r in entries)


def _below_min_values(reqs: Requirements) -> bool:
    return any(r.values and not r.complement and len(r.values) < (r.min_values or 0) for r in reqs)


@given(st.lists(wire_requirements(), max_size=5))
def test_write_then_read_is_identity(wire: list[NodeClaimRequirement]) -> None:
    reqs = requirements_from_api(wire)
    if _below_min_values(reqs):
        with pytest.raises(RequirementError, match="fewer than minValues"):
            requirements_to_api(reqs)
    else:
        assert requirements_from_api(requirements_to_api(reqs)) == reqs


@given(st.lists(wire_requirements(), max_size=5))
def test_written_entries_pass_the_crd_rules(wire: list[NodeClaimRequirement]) -> None:
    reqs = requirements_from_api(wire)
    if _below_min_values(reqs):
        return
    for entry in requirements_to_api(reqs):
        assert entry.key in {_normal(k) for k in KEYS}
        if entry.operator is RequirementOperator.IN:
            assert entry.values
            assert entry.min_values is None or len(entry.values) >= entry.min_values
        elif entry.operator in NUMERIC:
            assert len(entry.values) == 1
            assert entry.values[0].isdigit()
        elif entry.operator in (RequirementOperator.EXISTS, RequirementOperator.DOES_NOT_EXIST):
            assert entry.values == ()


def test_deprecated_keys_are_normalised_and_intersected() -> None:
    reqs = requirements_from_api(
        [
            NodeClaimRequirement(
                key="beta.kubernetes.io/arch",
                operator=RequirementOperator.IN,
                values=("amd64", "arm64"),
            ),
            NodeClaimRequirement(
                key=wk.LABEL_ARCH, operator=RequirementOperator.NOT_IN, values=("arm64",)
            ),
        ]
    )
    assert reqs.keys() == (wk.LABEL_ARCH,)
    assert reqs.single_value(wk.LABEL_ARCH) == "amd64"


def test_min_values_survive_the_round_trip() -> None:
    wire = NodeSelectorRequirementWithMinValues(
        key=wk.LABEL_INSTANCE_TYPE,
        operator=RequirementOperator.IN,
        values=("m5.large", "m5.xlarge", "c5.large"),
        min_values=2,
    )
    req = requirement_from_api(wire)
    assert req.min_values == 2
    (back,) = requirements_to_api(Requirements([req]))
    assert back.min_values == 2
    assert back.values == ("c5.large", "m5.large", "m5.xlarge")


def test_gte_zero_is_written_as_gte() -> None:
    wire = NodeClaimRequirement(key="size", operator=RequirementOperator.GTE, values=("0",))
    (back,) = requirements_to_api(requirements_from_api([wire]))
    assert (back.operator, back.values) == (RequirementOperator.GTE, ("0",))


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        pytest.param("Gt", "-5", [(RequirementOperator.EXISTS, ())], id="gt-negative-left-out"),
        pytest.param("Gte", "-5", [(RequirementOperator.EXISTS, ())], id="gte-negative-left-out"),
        pytest.param("Lt", "-5", [(RequirementOperator.EXISTS, ())], id="lt-negative-left-out"),
        pytest.param("Gt", "-1", [(RequirementOperator.GTE, ("0",))], id="gt-minus-one-is-gte-0"),
        pytest.param("Lt", "0", [(RequirementOperator.LT, ("0",))], id="lt-zero-kept"),
    ],
)
def test_negative_bounds_a_pod_may_ask_for_never_reach_the_wire(
    operator: str, value: str, expected: list[tuple[RequirementOperator, tuple[str, ...]]]
) -> None:
    """The NodeClaim CRD takes one non-negative integer per bound (as Karpenter's does); a bound
    left out still requires the label to exist, as any integer bound does."""
    reqs = Requirements([Requirement.new("size", operator, [value])])
    entries = [(e.operator, e.values) for e in requirements_to_api(reqs)]
    assert entries == expected


def test_not_in_with_bounds_becomes_several_entries_on_one_key() -> None:
    reqs = requirements_from_api(
        [
            NodeClaimRequirement(key="size", operator=RequirementOperator.NOT_IN, values=("5",)),
            NodeClaimRequirement(key="size", operator=RequirementOperator.GT, values=("1",)),
            NodeClaimRequirement(key="size", operator=RequirementOperator.LT, values=("10",)),
        ]
    )
    ops = [(e.operator, e.values) for e in requirements_to_api(reqs)]
    assert ops == [
        (RequirementOperator.NOT_IN, ("5",)),
        (RequirementOperator.GT, ("1",)),
        (RequirementOperator.LT, ("10",)),
    ]


def test_bad_requirement_names_the_field_and_key() -> None:
    wire = [
        NodeClaimRequirement(key="team", operator=RequirementOperator.EXISTS),
        NodeClaimRequirement(key="size", operator=RequirementOperator.GT, values=("big",)),
    ]
    with pytest.raises(RequirementError, match=r"spec\.requirements\[1\]: requirement 'size'"):
        requirements_from_api(wire)


def test_nodepool_requirements_add_template_labels_and_the_pool_name() -> None:
    pool = NodePool(
        metadata=ObjectMeta(name="general"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                metadata=NodeClaimTemplateMetadata(labels={"team": "blue"}),
                spec=NodeClaimTemplateSpec(
                    requirements=(
                        NodeSelectorRequirementWithMinValues(
                            key=wk.LABEL_CAPACITY_TYPE,
                            operator=RequirementOperator.IN,
                            values=(wk.CAPACITY_TYPE_SPOT,),
                        ),
                    ),
                    node_class_ref=NodeClassReference(
                        group=awslabels.AWS_GROUP, kind="EC2NodeClass", name="default"
                    ),
                ),
            )
        ),
    )
    assert nodepool_requirements(pool).labels() == {
        wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT,
        wk.LABEL_NODEPOOL: "general",
        "team": "blue",
    }


RESOURCE_NAMES = ["cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu"]


@given(st.dictionaries(st.sampled_from(RESOURCE_NAMES), st.integers(-(2**70), 2**70)))
def test_resources_round_trip_through_quantities(milli: dict[str, int]) -> None:
    resources = Resources.milli(milli)
    quantities = quantities_from_resources(resources)
    assert resources_from_quantities(quantities) == resources


_SUFFIXES = ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]


@given(
    st.dictionaries(
        st.sampled_from(RESOURCE_NAMES),
        st.tuples(st.integers(0, 10**6), st.sampled_from(_SUFFIXES)).map(lambda t: f"{t[0]}{t[1]}"),
    )
)
def test_quantity_strings_keep_their_value(quantities: dict[str, str]) -> None:
    resources = resources_from_quantities(quantities)
    rendered = quantities_from_resources(resources)
    assert {k: parse_quantity(v) for k, v in rendered.items()} == {
        k: parse_quantity(v) for k, v in quantities.items()
    }


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param({"cpu": "1500m"}, {"cpu": "1500m"}, id="millicores"),
        pytest.param({"cpu": "2"}, {"cpu": "2"}, id="cores"),
        pytest.param({"memory": "8192Mi"}, {"memory": "8Gi"}, id="binary"),
        pytest.param({"memory": "1000"}, {"memory": "1000"}, id="bytes"),
        pytest.param({"pods": "110"}, {"pods": "110"}, id="count"),
    ],
)
def test_quantities_render_readably(resources: dict[str, str], expected: dict[str, str]) -> None:
    assert quantities_from_resources(resources_from_quantities(resources)) == expected


def test_bad_quantity_names_the_field_and_resource() -> None:
    with pytest.raises(QuantityError, match=r"spec\.resources\.requests\[memory\]: .*'lots'"):
        resources_from_quantities({"cpu": "1", "memory": "lots"}, field="spec.resources.requests")
