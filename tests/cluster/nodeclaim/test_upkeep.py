"""The NodePool hash and status, the NodeClaim Drifted and Consolidatable conditions and expiry,
on the real local cluster, each reconcile driven by hand against informer-fed cluster state.

A NodePool template label change moves the NodePool's hash, which drifts the NodeClaim stamped
with the old one (NodePoolDrifted); a provider reason comes through the same controller; a
NodeClaim past its expireAfter is deleted; the NodePool's status counts its NodeClaims.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any

import attrs
import pytest

from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeSelectorRequirementWithMinValues, RequirementOperator
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim, NodeClaimStatus
from karpy.apis.v1.nodepool import (
    Disruption,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.cloudprovider.protocol import DriftReason
from karpy.controllers.nodeclaim.disruption import NodeClaimDisruptionController
from karpy.controllers.nodeclaim.expiration import ExpirationController
from karpy.controllers.nodepool.hash import NodePoolHashController
from karpy.controllers.nodepool.status import NodePoolStatusController
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.nodepools import hash_annotations
from karpy.testing.fake_cloudprovider import FakeCloudProvider
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from tests.cluster.nodeclaim.conftest import KWOK_REF, make_nodeclaim
from tests.support.clusterview import LiveView

pytestmark = pytest.mark.usefixtures("karpy_crds")

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def _nodepool(name: str, *, team: str = "blue", consolidate_after: str = "30s") -> NodePool:
    template = NodeClaimTemplate(
        metadata=NodeClaimTemplateMetadata(labels={"example.com/team": team}),
        spec=NodeClaimTemplateSpec(
            requirements=(
                NodeSelectorRequirementWithMinValues(
                    key="example.com/team", operator=RequirementOperator.IN, values=(team,)
                ),
            ),
            node_class_ref=KWOK_REF,
        ),
    )
    return NodePool(
        metadata=ObjectMeta(name=name),
        spec=NodePoolSpec(
            template=template, disruption=Disruption(consolidate_after=consolidate_after)
        ),
    )


def _condition(kind: ConditionType, at: datetime.datetime) -> Condition:
    return Condition(
        type=kind, status=ConditionStatus.TRUE, last_transition_time=at, reason=str(kind)
    )


async def _claim(kube: KubeClient, name: str, pool: NodePool, **meta: Any) -> NodeClaim:
    """A launched, initialized NodeClaim of `pool`, stamped with `pool`'s current hash."""
    claim = make_nodeclaim(name)
    labels = {**claim.metadata.labels, wk.LABEL_NODEPOOL: pool.metadata.name or ""}
    metadata = attrs.evolve(
        claim.metadata, labels=labels, annotations=hash_annotations(pool), **meta
    )
    await kube.create(NODECLAIMS, attrs.evolve(claim, metadata=metadata))
    status = NodeClaimStatus(
        provider_id=f"fake://{name}",
        capacity={"cpu": Quantity("2"), "memory": Quantity("4Gi")},
        conditions=(
            _condition(ConditionType.LAUNCHED, NOW - datetime.timedelta(minutes=5)),
            _condition(ConditionType.INITIALIZED, NOW - datetime.timedelta(minutes=5)),
        ),
    )
    return await kube.patch_status(NODECLAIMS, name, status)


def _conditions(claim: NodeClaim | None) -> dict[str, Condition]:
    assert claim is not None
    return {c.type: c for c in claim.status.conditions}


async def test_a_template_label_change_drifts_the_nodeclaims_made_from_the_old_template(
    kube: KubeClient, pool_live: LiveView, telemetry: Telemetry
) -> None:
    live = pool_live
    suffix = secrets.token_hex(3)
    pool = await kube.create(NODEPOOLS, _nodepool(f"drift-{suffix}"))
    pool_name = pool.metadata.name or ""
    provider = FakeCloudProvider()
    clock = FakeClock(NOW)
    hashing = live.settled(NodePoolHashController(kube, live.view).reconcile)
    conditions = live.settled(
        NodeClaimDisruptionController(
            kube, live.view, provider, clock=clock, telemetry=telemetry
        ).reconcile
    )
    await hashing(pool_name)
    await live.caught_up()
    stamped = live.view.nodepool(pool_name)
    assert stamped is not None
    assert stamped.metadata.annotations[wk.ANNOTATION_NODEPOOL_HASH_VERSION] == "karpy-v1"
    kept, provider_drifted = f"kept-{suffix}", f"ami-{suffix}"
    await _claim(kube, kept, stamped)
    await _claim(kube, provider_drifted, stamped)
    provider.drifted[f"fake://{provider_drifted}"] = DriftReason("AMIDrift")

    await conditions(kept)
    await conditions(provider_drifted)
    await live.caught_up()
    fresh = _conditions(live.view.nodeclaim(kept))
    assert ConditionType.DRIFTED not in fresh
    # consolidateAfter 30s has passed since Initialized (5 minutes before the clock).
    assert fresh[ConditionType.CONSOLIDATABLE].status is ConditionStatus.TRUE
    drifted = _conditions(live.view.nodeclaim(provider_drifted))[ConditionType.DRIFTED]
    assert (drifted.status, drifted.reason) == (ConditionStatus.TRUE, "AMIDrift")

    # The template label changes: the NodePool's hash moves, and the old NodeClaim drifts.
    template = attrs.evolve(
        stamped.spec.template, metadata=NodeClaimTemplateMetadata(labels={"example.com/team": "x"})
    )
    await kube.merge_patch(
        NODEPOOLS,
        pool_name,
        {"spec": {"template": {"metadata": {"labels": dict(template.metadata.labels)}}}},
    )
    await hashing(pool_name)
    await conditions(kept)
    await live.caught_up()
    changed = live.view.nodepool(pool_name)
    assert changed is not None
    assert (
        changed.metadata.annotations[wk.ANNOTATION_NODEPOOL_HASH]
        != stamped.metadata.annotations[wk.ANNOTATION_NODEPOOL_HASH]
    )
    now_drifted = _conditions(live.view.nodeclaim(kept))[ConditionType.DRIFTED]
    assert (now_drifted.status, now_drifted.reason) == (ConditionStatus.TRUE, "NodePoolDrifted")
    assert 'karpenter_nodeclaims_drifted_total{nodepool="' in telemetry.prometheus_text()

    # Undone: the hash matches again and the condition goes.
    await kube.merge_patch(
        NODEPOOLS,
        pool_name,
        {"spec": {"template": {"metadata": {"labels": {"example.com/team": "blue"}}}}},
    )
    await hashing(pool_name)
    await conditions(kept)
    await live.caught_up()
    assert ConditionType.DRIFTED not in _conditions(live.view.nodeclaim(kept))

    # A template change read before the nodepool.hash controller has written the new hash is
    # already NodePoolDrifted (the label it adds is not taken for a requirement first).
    await kube.merge_patch(
        NODEPOOLS,
        pool_name,
        {"spec": {"template": {"metadata": {"labels": {"example.com/team": "red"}}}}},
    )
    await live.caught_up()
    await conditions(kept)
    await live.caught_up()
    early = _conditions(live.view.nodeclaim(kept))[ConditionType.DRIFTED]
    assert (early.status, early.reason) == (ConditionStatus.TRUE, "NodePoolDrifted")


async def test_a_nodeclaim_whose_labels_leave_the_pool_requirements_is_requirements_drifted(
    kube: KubeClient, pool_live: LiveView, telemetry: Telemetry
) -> None:
    live = pool_live
    suffix = secrets.token_hex(3)
    pool = await kube.create(NODEPOOLS, _nodepool(f"reqs-{suffix}"))
    name = f"reqs-{suffix}"
    await _claim(kube, name, pool)
    controller = NodeClaimDisruptionController(
        kube, live.view, FakeCloudProvider(), clock=FakeClock(NOW), telemetry=telemetry
    )
    await kube.merge_patch(
        NODEPOOLS,
        pool.metadata.name or "",
        {
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [
                            {"key": "example.com/team", "operator": "In", "values": ["red"]}
                        ]
                    }
                }
            }
        },
    )
    await live.settled(controller.reconcile)(name)
    await live.caught_up()
    drifted = _conditions(live.view.nodeclaim(name))[ConditionType.DRIFTED]
    assert drifted.reason == "RequirementsDrifted"


async def test_a_nodeclaim_past_its_expire_after_is_deleted_and_a_young_one_waits(
    kube: KubeClient, pool_live: LiveView, telemetry: Telemetry
) -> None:
    live = pool_live
    suffix = secrets.token_hex(3)
    pool = await kube.create(NODEPOOLS, _nodepool(f"exp-{suffix}"))
    name = f"exp-{suffix}"
    created = await _claim(kube, name, pool)
    assert created.metadata.creation_timestamp is not None
    born = created.metadata.creation_timestamp
    clock = FakeClock(born + datetime.timedelta(hours=700))
    expiration = ExpirationController(
        kube, live.view, clock=clock, recorder=Recorder(kube, clock), telemetry=telemetry
    )
    reconcile = live.settled(expiration.reconcile)
    waiting = await reconcile(name)
    assert waiting.requeue_after == pytest.approx(20 * 3600, abs=1)
    clock.set(born + datetime.timedelta(hours=720, seconds=1))
    assert (await reconcile(name)).requeue_after is None
    await live.caught_up()
    gone = live.view.nodeclaim(name)
    assert gone is None or gone.metadata.deletion_timestamp is not None
    assert 'reason="expired"' in telemetry.prometheus_text()


async def test_nodepool_status_counts_its_nodeclaims_and_says_it_is_ready(
    kube: KubeClient, pool_live: LiveView, telemetry: Telemetry
) -> None:
    live = pool_live
    suffix = secrets.token_hex(3)
    pool = await kube.create(NODEPOOLS, _nodepool(f"status-{suffix}"))
    pool_name = pool.metadata.name or ""
    for i in range(2):
        await _claim(kube, f"status-{suffix}-{i}", pool)
    status = NodePoolStatusController(
        kube,
        live.view,
        clock=FakeClock(NOW),
        telemetry=telemetry,
        nodeclass_kinds={(KWOK_NODECLASSES.group, KWOK_NODECLASSES.kind): KWOK_NODECLASSES},
    )
    await live.settled(status.reconcile)(pool_name)
    await live.caught_up()
    counted = live.view.nodepool(pool_name)
    assert counted is not None
    assert counted.status.nodes == 2
    assert counted.status.resources == {"cpu": "4", "memory": "8Gi"}
    conditions = {c.type: c.status for c in counted.status.conditions}
    assert conditions == {
        "NodeClassReady": ConditionStatus.TRUE,
        "ValidationSucceeded": ConditionStatus.TRUE,
        "Ready": ConditionStatus.TRUE,
        # Unknown until one of its nodes registers (test_registration_health.py).
        "NodeRegistrationHealthy": ConditionStatus.UNKNOWN,
    }
    assert f'karpy_nodepools_nodes{{nodepool="{pool_name}"}} 2' in telemetry.prometheus_text()

    # A NodeClass that does not exist makes the pool not Ready, naming it.
    await kube.merge_patch(
        NODEPOOLS,
        pool_name,
        {"spec": {"template": {"spec": {"nodeClassRef": {"name": "missing"}}}}},
    )
    await live.settled(status.reconcile)(pool_name)
    await live.caught_up()
    broken = live.view.nodepool(pool_name)
    assert broken is not None
    by_type = {c.type: c for c in broken.status.conditions}
    assert by_type["NodeClassReady"].reason == "NodeClassNotFound"
    assert "'missing'" in by_type["NodeClassReady"].message
    assert by_type["Ready"].status is ConditionStatus.FALSE
