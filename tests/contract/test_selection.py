"""selection.py, the shared meaning of "cheapest compatible offering", as properties: whatever
the NodeClaim asks, the chosen launch satisfies it and nothing compatible is cheaper."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClaimRequirement, NodeClassReference, RequirementOperator
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy.cloudprovider.selection import (
    cheapest_launch,
    compatible_launches,
    launched_nodeclaim,
    nodeclaim_requirements,
)
from karpy.core.instancetypes import Offering
from karpy.core.resources import CPU
from karpy.testing.instancetypes import FAKE_ZONES, make_instance_types

TYPES = make_instance_types(6)
REF = NodeClassReference(group="karpenter.test.sh", kind="TestNodeClass", name="default")


@st.composite
def nodeclaims(draw: st.DrawFn) -> NodeClaim:
    reqs: list[NodeClaimRequirement] = []
    for key, universe in (
        (wk.LABEL_TOPOLOGY_ZONE, FAKE_ZONES),
        (wk.LABEL_CAPACITY_TYPE, (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)),
        (wk.LABEL_INSTANCE_TYPE, tuple(it.name for it in TYPES)),
    ):
        if draw(st.booleans()):
            values = draw(st.lists(st.sampled_from(universe), min_size=1, unique=True))
            op = draw(st.sampled_from((RequirementOperator.IN, RequirementOperator.NOT_IN)))
            reqs.append(NodeClaimRequirement(key=key, operator=op, values=tuple(sorted(values))))
    cpu = draw(st.integers(min_value=0, max_value=8000))
    return NodeClaim(
        metadata=ObjectMeta(name="claim"),
        spec=NodeClaimSpec(
            requirements=tuple(reqs),
            node_class_ref=REF,
            resources=ResourceRequests(requests={CPU: Quantity(f"{cpu}m")}),
        ),
    )


@given(nodeclaims(), st.sets(st.integers(min_value=0, max_value=len(TYPES) * 5 - 1)))
def test_the_choice_is_compatible_and_nothing_compatible_is_cheaper(
    nodeclaim: NodeClaim, unavailable: set[int]
) -> None:
    types = [
        it.__class__.make(
            it.name,
            it.capacity,
            (
                Offering(o.zone, o.capacity_type, o.price, available=5 * i + j not in unavailable)
                for j, o in enumerate(it.offerings)
            ),
            overhead=it.overhead,
            labels=it.requirements.labels(),
        )
        for i, it in enumerate(TYPES)
    ]
    reqs = nodeclaim_requirements(nodeclaim)
    requested = int(nodeclaim.spec.resources.requests[CPU].removesuffix("m"))
    chosen = cheapest_launch(nodeclaim, types)
    every = [
        (it, o)
        for it in types
        for o in it.offerings
        if o.available
        and reqs.matches_labels(
            {
                wk.LABEL_INSTANCE_TYPE: it.name,
                wk.LABEL_TOPOLOGY_ZONE: o.zone,
                wk.LABEL_CAPACITY_TYPE: o.capacity_type,
            }
        )
        is None
        and it.allocatable.get_amount(CPU) >= requested
    ]
    assert len(compatible_launches(nodeclaim, types)) == len(every)
    if not every:
        assert chosen is None
        return
    assert chosen is not None
    assert chosen.offering.price == min(o.price for _, o in every)
    launched = launched_nodeclaim(nodeclaim, chosen, provider_id="test:///x")
    labels = launched.metadata.labels
    assert reqs.matches_labels(labels) is None
    assert labels[wk.LABEL_INSTANCE_TYPE] == chosen.instance_type.name
