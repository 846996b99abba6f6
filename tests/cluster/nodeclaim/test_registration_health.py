"""NodeRegistrationHealthy on a NodePool, on the real local cluster: the NodePool status controller
resets it to Unknown for a new spec or NodeClass, the NodeClaim lifecycle sets it False once half
of the recent NodeClaims failed to launch or register (with the reason of the failure) and True
once one registers. Time is a FakeClock; every reconcile is driven by hand."""

from __future__ import annotations

import datetime
import secrets

import attrs
import pytest

from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, OwnerReference
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.cloudprovider import CloudProvider, CreateError
from karpy.controllers.nodeclaim.lifecycle import REGISTRATION_TIMEOUT, LifecycleController
from karpy.controllers.nodepool.status import NodePoolStatusController
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.registrationhealth import RegistrationHealth
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider
from karpy_kwok import KwokCloudProvider, KwokOptions
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.catalog import load_entries
from tests.cluster.nodeclaim.conftest import KWOK_REF, make_nodeclaim, reconcile_until
from tests.support.clusterview import LiveView

pytestmark = pytest.mark.usefixtures("karpy_crds")

FAKE_REF = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="x")
HEALTHY = "NodeRegistrationHealthy"
NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def _nodepool(name: str) -> NodePool:
    template = NodeClaimTemplate(
        metadata=NodeClaimTemplateMetadata(labels={"example.com/team": "blue"}),
        spec=NodeClaimTemplateSpec(requirements=(), node_class_ref=KWOK_REF),
    )
    return NodePool(metadata=ObjectMeta(name=name), spec=NodePoolSpec(template=template))


def _owned(claim: NodeClaim, pool: NodePool) -> NodeClaim:
    """`claim` as the provisioner makes it for `pool`: labelled with and owned by it."""
    owner = OwnerReference(
        api_version=pool.api_version,
        kind=NodePool.KIND,
        name=pool.metadata.name or "",
        uid=pool.metadata.uid or "",
    )
    metadata = attrs.evolve(
        claim.metadata,
        labels={**claim.metadata.labels, wk.LABEL_NODEPOOL: pool.metadata.name or ""},
        owner_references=(owner,),
    )
    return attrs.evolve(claim, metadata=metadata)


async def _health(live: LiveView, pool: str) -> Condition:
    await live.caught_up()
    got = live.view.nodepool(pool)
    assert got is not None
    return next(c for c in got.status.conditions if c.type == HEALTHY)


async def _gone(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(NODECLAIMS, name)
    except NotFoundError:
        return True
    return False


def _lifecycle(
    live: LiveView, provider: CloudProvider, clock: FakeClock, health: RegistrationHealth
) -> LifecycleController:
    kube = live.kube
    return LifecycleController(
        kube,
        live.view,
        provider,
        clock=clock,
        recorder=Recorder(kube, clock),
        registration_health=health,
    )


async def test_registration_health_follows_failures_successes_and_spec_changes(
    kube: KubeClient, pool_live: LiveView, telemetry: Telemetry
) -> None:
    live = pool_live
    suffix = secrets.token_hex(3)
    pool = await kube.create(NODEPOOLS, _nodepool(f"rh-{suffix}"))
    name = pool.metadata.name or ""
    health = RegistrationHealth()
    status = live.settled(
        NodePoolStatusController(
            kube,
            live.view,
            clock=FakeClock(pool.metadata.creation_timestamp or NOW),
            telemetry=telemetry,
            nodeclass_kinds={(KWOK_NODECLASSES.group, KWOK_NODECLASSES.kind): KWOK_NODECLASSES},
            registration_health=health,
        ).reconcile
    )

    # A new pool: Unknown until a node registers; Ready does not wait for it.
    await status(name)
    condition = await _health(live, name)
    assert (condition.status, condition.reason) == (
        ConditionStatus.UNKNOWN,
        "AwaitingReconciliation",
    )
    assert condition.observed_generation == pool.metadata.generation
    read = live.view.nodepool(name)
    assert read is not None
    nodeclass = await kube.get(KWOK_NODECLASSES, KWOK_REF.name)
    assert read.status.node_class_observed_generation == nodeclass.metadata.generation
    assert any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE for c in read.status.conditions
    )

    # Two of the pool's NodeClaims fail: one launches but its Node never joins, one cannot be
    # created at all. One failure in the window of four is not yet a verdict; two are.
    provider = FakeCloudProvider()
    unjoined = await kube.create(
        NODECLAIMS, _owned(make_nodeclaim(f"rh-{suffix}-a", ref=FAKE_REF), read)
    )
    refused = await kube.create(
        NODECLAIMS, _owned(make_nodeclaim(f"rh-{suffix}-b", ref=FAKE_REF), read)
    )
    assert refused.metadata.creation_timestamp is not None
    clock = FakeClock(refused.metadata.creation_timestamp)
    failing = live.settled(_lifecycle(live, provider, clock, health).reconcile)
    for _ in range(2):  # finalizer, launch
        await failing(unjoined.metadata.name or "")
    provider.next_create_error = CreateError(
        "quota", condition_reason="QuotaExceeded", condition_message="vCPU quota exceeded"
    )
    for _ in range(2):  # finalizer, the failed create
        await failing(refused.metadata.name or "")
    provider.allowed_create_calls = 0
    clock.step(REGISTRATION_TIMEOUT)
    a, b = unjoined.metadata.name or "", refused.metadata.name or ""
    await reconcile_until(failing, a, lambda: _gone(kube, a))
    assert (await _health(live, name)).status is ConditionStatus.UNKNOWN
    await reconcile_until(failing, b, lambda: _gone(kube, b))
    condition = await _health(live, name)
    # The failure that tipped the window was a launch: its reason and message are the pool's.
    assert (condition.status, condition.reason, condition.message) == (
        ConditionStatus.FALSE,
        "QuotaExceeded",
        "vCPU quota exceeded",
    )
    # Unhealthy is not unready: the pool still launches.
    await status(name)
    read = live.view.nodepool(name)
    assert read is not None
    assert any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE for c in read.status.conditions
    )
    assert (await _health(live, name)).status is ConditionStatus.FALSE

    # A new spec is a new chance: Unknown again, the failures forgotten.
    await kube.merge_patch(
        NODEPOOLS,
        name,
        {"spec": {"template": {"metadata": {"labels": {"example.com/team": "green"}}}}},
    )
    await status(name)
    assert (await _health(live, name)).status is ConditionStatus.UNKNOWN
    assert health.outcomes(read.metadata.uid or "") == ()

    # A NodeClaim of the pool registers: True.
    kwok = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    joined = await kube.create(NODECLAIMS, _owned(make_nodeclaim(f"rh-{suffix}-c"), read))
    c = joined.metadata.name or ""
    assert joined.metadata.creation_timestamp is not None
    fresh = FakeClock(joined.metadata.creation_timestamp)
    working = live.settled(_lifecycle(live, kwok, fresh, health).reconcile)

    async def healthy() -> bool:
        return (await _health(live, name)).status is ConditionStatus.TRUE

    await reconcile_until(working, c, healthy)
    condition = await _health(live, name)
    assert condition.reason == HEALTHY
    updated = await kube.get(NODEPOOLS, name)
    assert condition.observed_generation == updated.metadata.generation

    # Its NodeClass changes: Unknown again.
    await kube.merge_patch(
        KWOK_NODECLASSES, KWOK_REF.name, {"spec": {"nodeRegistrationDelay": "1s"}}
    )
    await status(name)
    condition = await _health(live, name)
    assert condition.status is ConditionStatus.UNKNOWN
    nodeclass = await kube.get(KWOK_NODECLASSES, KWOK_REF.name)
    read = live.view.nodepool(name)
    assert read is not None
    assert read.status.node_class_observed_generation == nodeclass.metadata.generation


async def test_a_registration_is_recorded_on_the_nodeclaim_before_the_pool_hears_of_it(
    kube: KubeClient, pool_live: LiveView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass that lifts a Node's unregistered taint records the registration on the
    NodeClaim even when the NodePool write conflicts (here the view's copy of the pool stays a
    version behind), and the pool still hears of it: the conflict is retried against a fresh
    read, since a Registered NodeClaim is never reported again. Before, the pool was written
    first and its conflict ended every pass with the Node usable and the NodeClaim not saying
    so."""
    live = pool_live
    suffix = secrets.token_hex(3)
    pool = await kube.create(NODEPOOLS, _nodepool(f"rh-order-{suffix}"))
    name = pool.metadata.name or ""
    await live.caught_up()
    stale = live.view.nodepool(name)
    assert stale is not None
    await kube.merge_patch(NODEPOOLS, name, {"metadata": {"labels": {"touched": "yes"}}})
    await live.caught_up()
    view_nodepool = live.view.nodepool
    monkeypatch.setattr(live.view, "nodepool", lambda n: stale if n == name else view_nodepool(n))
    kwok = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    joined = await kube.create(NODECLAIMS, _owned(make_nodeclaim(f"rh-order-{suffix}-a"), stale))
    claim = joined.metadata.name or ""
    assert joined.metadata.creation_timestamp is not None
    clock = FakeClock(joined.metadata.creation_timestamp)
    reconcile = live.settled(_lifecycle(live, kwok, clock, RegistrationHealth()).reconcile)

    async def registered() -> bool:
        got = await kube.get(NODECLAIMS, claim)
        return any(
            c.type == "Registered" and c.status is ConditionStatus.TRUE
            for c in got.status.conditions
        )

    await reconcile_until(reconcile, claim, registered)
    current = await kube.get(NODEPOOLS, name)
    assert current.metadata.resource_version != stale.metadata.resource_version
    assert any(
        c.type == HEALTHY and c.status is ConditionStatus.TRUE for c in current.status.conditions
    )
