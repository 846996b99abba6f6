"""`karpy simulate --from-cluster` carries the NodeOverlays the cluster applies: each, written
as a scenario entry, reads back as the same overlay."""

from __future__ import annotations

import pytest

from karpy.apis.v1 import labels as wk
from karpy.core.overlays import Overlay, make_overlay
from karpy.operator.snapshot import scenario_overlay
from karpy.simulate.scenario import parse


@pytest.mark.parametrize(
    "overlay",
    [
        pytest.param(
            make_overlay(
                "savings",
                weight=7,
                requirements=(
                    (wk.LABEL_INSTANCE_TYPE, "In", ("m5.large", "m5.xlarge")),
                    ("karpenter.kwok.sh/instance-cpu", "Gte", ("4",)),
                    (wk.LABEL_CAPACITY_TYPE, "NotIn", (wk.CAPACITY_TYPE_SPOT,)),
                ),
                price_adjustment="-12.5%",
            ),
            id="adjustment",
        ),
        pytest.param(
            make_overlay("licence", price="1.25", capacity={"example.com/widget": "3"}),
            id="price-and-capacity",
        ),
    ],
)
def test_a_cluster_overlay_reads_back_from_the_scenario(overlay: Overlay) -> None:
    scenario = parse(
        {
            "nodePools": [{"name": "default"}],
            "instanceTypes": {"provider": "fake", "count": 2},
            "nodeOverlays": [scenario_overlay(overlay)],
        }
    )
    assert scenario.overlays.accepted == (overlay,)
