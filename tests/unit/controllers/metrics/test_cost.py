"""What the cluster costs: each launched NodeClaim at the price of the offering it runs on."""

from __future__ import annotations

import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference
from karpy.controllers.metrics.state import cost_by_nodepool

PRICES = {
    "general": {
        ("m5.large", "us-west-2a", "on-demand"): 0.096,
        ("m5.large", "us-west-2a", "spot"): 0.035,
    },
    "batch": {("c5.xlarge", "us-west-2b", "spot"): 0.07},
}


def _claim(pool: str, instance_type: str, zone: str, capacity: str, *, launched: bool) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(
            name=f"{pool}-{instance_type}-{capacity}",
            labels={
                wk.LABEL_NODEPOOL: pool,
                wk.LABEL_INSTANCE_TYPE: instance_type,
                wk.LABEL_TOPOLOGY_ZONE: zone,
                wk.LABEL_CAPACITY_TYPE: capacity,
            },
        ),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
        status=NodeClaimStatus(provider_id="kwok://x" if launched else None),
    )


def test_cost_sums_launched_claims_by_nodepool_and_capacity_type() -> None:
    claims = [
        _claim("general", "m5.large", "us-west-2a", "on-demand", launched=True),
        _claim("general", "m5.large", "us-west-2a", "on-demand", launched=True),
        _claim("general", "m5.large", "us-west-2a", "spot", launched=True),
        _claim("batch", "c5.xlarge", "us-west-2b", "spot", launched=True),
        # Not launched yet: no instance, no cost.
        _claim("batch", "c5.xlarge", "us-west-2b", "spot", launched=False),
        # An offering with no known price adds nothing rather than a guess.
        _claim("batch", "c5.xlarge", "us-west-2c", "spot", launched=True),
    ]
    assert cost_by_nodepool(claims, PRICES) == {
        ("general", "on-demand"): pytest.approx(0.192),
        ("general", "spot"): pytest.approx(0.035),
        ("batch", "spot"): pytest.approx(0.07),
    }
