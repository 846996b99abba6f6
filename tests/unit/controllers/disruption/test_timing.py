"""Each disruption method's evaluation is timed, labelled as Karpenter labels it, and the timed
method decides exactly as the bare one does."""

from __future__ import annotations

from collections import Counter

from karpy.apis.v1 import labels as wk
from karpy.controllers.disruption.timing import timed
from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.candidates import PoolDisruption
from karpy.core.disruption.decision import disrupt, disruption_methods
from karpy.core.pods import Container, Pod, PodUID
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.runtime.telemetry import Telemetry
from karpy.testing.fleet import Fleet, FleetNode, pool
from karpy.testing.instancetypes import make_instance_types
from tests.support.metrics import sample

NOW = 1_800_000_000.0
TYPES = make_instance_types(16)
OD = wk.CAPACITY_TYPE_ON_DEMAND
NAME = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count"


def _fleet() -> Fleet:
    """Two half-used nodes whose pods fit on one: consolidation, the last method, acts."""
    nodes = tuple(
        FleetNode(
            name=f"node-{n}",
            instance_type=TYPES[3].name,
            zone="test-zone-1",
            capacity_type=OD,
            pods=tuple(
                Pod(
                    uid=PodUID(f"pod-{n}-{i}"),
                    namespace="default",
                    name=f"pod-{n}-{i}",
                    containers=(Container("app", Resources.of({"cpu": "500m"})),),
                    creation=i,
                )
                for i in range(2)
            ),
        )
        for n in range(2)
    )
    return Fleet(
        pool=pool(
            requirements=Requirements([Requirement(wk.LABEL_CAPACITY_TYPE, False, frozenset({OD}))])
        ),
        types=TYPES,
        nodes=nodes,
        disruption=PoolDisruption(consolidate_after=0.0, budgets=(BudgetSpec(nodes="100%"),)),
    )


def test_every_method_asked_is_timed_by_reason_and_consolidation_type(
    telemetry: Telemetry,
) -> None:
    start = _fleet()
    histogram = telemetry.metrics.disruption_evaluation_duration_seconds
    bare = disrupt(start.facts(), start.pools(), now=NOW, simulate=start.simulate)
    methods = tuple(timed(m, histogram) for m in disruption_methods())
    result = disrupt(
        start.facts(), start.pools(), now=NOW, simulate=start.simulate, methods=methods
    )

    assert result.outcome == bare.outcome
    assert result.outcome.method is not None
    assert result.outcome.method.consolidation
    # The methods before the one that acted found nothing; each asked is timed once.
    acted = [m.name for m in methods].index(result.outcome.method)
    asked = Counter(
        (m.reason.value.lower(), m.name.consolidation_type) for m in methods[: acted + 1]
    )
    assert asked[("empty", "")] == 1
    assert asked[("drifted", "")] == 2  # static drift and drift
    for (reason, kind), times in asked.items():
        series = f'{NAME}{{consolidation_type="{kind}",reason="{reason}"}}'
        assert sample(telemetry, series) == times, series
