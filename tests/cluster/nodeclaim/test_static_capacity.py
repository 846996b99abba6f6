"""The static NodePool controller (karpy.controllers.static) on the real local cluster, each
reconcile driven by hand against informer-fed cluster state with the fake cloud provider: a pool
launches its replicas from its template, cheapest compatible types listed, up to `limits.nodes`;
it scales down one NodeClaim at a time under a `nodes: "1"` budget, a NodeClaim still deleting
counting against it; and what it has just created counts before the informer shows it.
"""

from __future__ import annotations

import datetime
import secrets

import attrs
import pytest

from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeSelectorRequirementWithMinValues, RequirementOperator
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import (
    Budget,
    Disruption,
    NodeClaimTemplate,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
    NodePoolStatus,
)
from karpy.controllers.static.capacity import WAITING_RECHECK, StaticCapacityController
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.testing.fake_cloudprovider import FakeCloudProvider
from tests.cluster.nodeclaim.conftest import KWOK_REF
from tests.support.clusterview import LiveView

pytestmark = pytest.mark.usefixtures("karpy_crds")

HOLD = "example.com/hold"
NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def _static(name: str, replicas: int, *, nodes: str | None = None) -> NodePool:
    return NodePool(
        metadata=ObjectMeta(name=name),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(
                    requirements=(
                        NodeSelectorRequirementWithMinValues(
                            key=wk.LABEL_CAPACITY_TYPE,
                            operator=RequirementOperator.IN,
                            values=("on-demand",),
                        ),
                    ),
                    node_class_ref=KWOK_REF,
                )
            ),
            disruption=Disruption(budgets=(Budget(nodes="1"),)),
            limits={} if nodes is None else {"nodes": Quantity(nodes)},
            replicas=replicas,
        ),
    )


def _claims(live: LiveView, pool: str) -> list[NodeClaim]:
    return [c for c in live.view.nodeclaims() if c.metadata.labels.get(wk.LABEL_NODEPOOL) == pool]


async def test_a_static_pool_launches_up_to_its_node_limit_then_scales_down_within_budget(
    kube: KubeClient, live: LiveView, telemetry: Telemetry
) -> None:
    provider = FakeCloudProvider()
    controller = StaticCapacityController(
        kube, live.view, cloudprovider=provider, clock=FakeClock(), telemetry=telemetry
    )
    name = f"static-{secrets.token_hex(3)}"
    await kube.create(NODEPOOLS, _static(name, 3, nodes="2"))
    reconcile = live.settled(controller.reconcile)
    assert (await reconcile(name)).requeue_after is None
    await live.caught_up()
    assert _claims(live, name) == [], "nothing launches before the pool is Ready"
    ready = Condition(
        type="Ready", status=ConditionStatus.TRUE, last_transition_time=NOW, reason="Ready"
    )
    await kube.patch_status(NODEPOOLS, name, NodePoolStatus(conditions=(ready,)))

    held = await reconcile(name)
    assert held.requeue_after == WAITING_RECHECK, "limits.nodes holds the third"
    # Created NodeClaims count at once: a second pass before the informer shows them makes none.
    assert (await controller.reconcile(name)).requeue_after == WAITING_RECHECK
    await live.caught_up()
    claims = _claims(live, name)
    assert len(claims) == 2
    cheapest = min(
        (o.price, t.name)
        for t in provider.instance_types
        for o in t.offerings
        if o.available and o.capacity_type == "on-demand"
    )[1]
    for claim in claims:
        (listed,) = [r for r in claim.spec.requirements if r.key == wk.LABEL_INSTANCE_TYPE]
        assert listed.values[0] == cheapest
        assert claim.metadata.owner_references[0].name == name
        assert wk.ANNOTATION_NODEPOOL_HASH in claim.metadata.annotations

    await kube.merge_patch(NODEPOOLS, name, {"spec": {"limits": {"nodes": "5"}}})
    assert (await reconcile(name)).requeue_after is None
    await live.caught_up()
    claims = _claims(live, name)
    assert len(claims) == 3
    for claim in claims:
        # Launched, and held by a finalizer of the test's so a deleted one stays deleting.
        held_claim = await kube.merge_patch(
            NODECLAIMS, claim.metadata.name or "", {"metadata": {"finalizers": [HOLD]}}
        )
        await kube.patch_status(
            NODECLAIMS,
            claim.metadata.name or "",
            attrs.evolve(held_claim.status, provider_id=f"fake://{claim.metadata.name}"),
        )

    await kube.merge_patch(NODEPOOLS, name, {"spec": {"replicas": 0}})
    assert (await reconcile(name)).requeue_after == WAITING_RECHECK
    await live.caught_up()
    deleting = [c for c in _claims(live, name) if c.metadata.deletion_timestamp is not None]
    assert len(deleting) == 1, "a budget of one node: one at a time"
    assert (await reconcile(name)).requeue_after == WAITING_RECHECK
    await live.caught_up()
    still = [c for c in _claims(live, name) if c.metadata.deletion_timestamp is not None]
    assert [c.metadata.name for c in still] == [c.metadata.name for c in deleting]
    assert 'reason="overprovisioned"' in telemetry.prometheus_text()

    for claim in _claims(live, name):  # let them go: the rest one a pass, as the budget allows
        await kube.merge_patch(
            NODECLAIMS, claim.metadata.name or "", {"metadata": {"finalizers": []}}
        )
    await live.caught_up()
    for _ in range(2):
        await reconcile(name)
        await live.caught_up()
    assert _claims(live, name) == []
    assert (await reconcile(name)).requeue_after is None


async def test_a_dynamic_pool_is_left_alone(
    kube: KubeClient, live: LiveView, telemetry: Telemetry
) -> None:
    controller = StaticCapacityController(
        kube, live.view, cloudprovider=FakeCloudProvider(), clock=FakeClock(), telemetry=telemetry
    )
    name = f"dynamic-{secrets.token_hex(3)}"
    dynamic = _static(name, 1)
    await kube.create(
        NODEPOOLS, attrs.evolve(dynamic, spec=attrs.evolve(dynamic.spec, replicas=None))
    )
    assert (await live.settled(controller.reconcile)(name)).requeue_after is None
    await live.caught_up()
    assert _claims(live, name) == []
