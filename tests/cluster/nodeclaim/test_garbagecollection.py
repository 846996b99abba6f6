"""NodeClaim garbage collection on the real local cluster, with the in-memory FakeCloudProvider
standing in for the cloud: an instance deleted behind karpy's back loses its NodeClaim; a
NodeClaim whose instance is still listed, or that launched within the grace period, is kept."""

from __future__ import annotations

import datetime
import logging
import secrets

import attrs
import pytest

from karpy.apis.meta import Condition, ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim, NodeClaimStatus
from karpy.controllers.nodeclaim.garbagecollection import GarbageCollectionController
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.testing.fake_cloudprovider import FakeCloudProvider
from tests.cluster.nodeclaim.conftest import make_nodeclaim
from tests.support.clusterview import LiveView
from tests.support.kubehttp import KubeHTTP

pytestmark = pytest.mark.usefixtures("karpy_crds")

GRACE = 30.0


async def _launched(
    kube: KubeClient, name: str, provider_id: str, *, at: datetime.datetime
) -> NodeClaim:
    """Create a spot NodeClaim and give it a providerID and a Launched condition stamped `at`."""
    claim = make_nodeclaim(name)
    labels = {**claim.metadata.labels, wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT}
    await kube.create(
        NODECLAIMS, attrs.evolve(claim, metadata=attrs.evolve(claim.metadata, labels=labels))
    )
    launched = Condition(
        type=ConditionType.LAUNCHED,
        status=ConditionStatus.TRUE,
        last_transition_time=at,
        reason="Launched",
        message="",
    )
    return await kube.patch_status(
        NODECLAIMS, name, NodeClaimStatus(provider_id=provider_id, conditions=(launched,))
    )


async def test_a_nodeclaim_whose_instance_is_gone_is_deleted_and_the_others_are_kept(
    kube: KubeClient,
    live: LiveView,
    kube_http: KubeHTTP,
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.controllers.nodeclaim.garbagecollection")
    suffix = secrets.token_hex(3)
    provider = FakeCloudProvider()
    # The clock stands a minute after two of the NodeClaims launched, so they are past the
    # grace period; the third launched at the clock's now.
    clock = FakeClock(datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC))
    a_minute_ago = clock.now() - datetime.timedelta(minutes=1)
    healthy = await _launched(
        kube, f"gc-healthy-{suffix}", f"fake:///zone-a/healthy-{suffix}", at=a_minute_ago
    )
    provider.created[healthy.status.provider_id or ""] = healthy
    gone = await _launched(
        kube, f"gc-gone-{suffix}", f"fake:///zone-a/gone-{suffix}", at=a_minute_ago
    )
    recent = await _launched(
        kube, f"gc-recent-{suffix}", f"fake:///zone-a/recent-{suffix}", at=clock.now()
    )
    controller = GarbageCollectionController(
        kube,
        live.view,
        provider,
        clock=clock,
        telemetry=telemetry,
        grace_period=GRACE,
    )

    await live.caught_up()
    result = await controller.reconcile_once()

    assert result.requeue_after == 120.0
    assert not kube_http.exists(NODECLAIMS.object_path(gone.metadata.name or ""))
    assert kube_http.exists(NODECLAIMS.object_path(healthy.metadata.name or ""))
    assert kube_http.exists(NODECLAIMS.object_path(recent.metadata.name or ""))
    (record,) = [
        r
        for r in caplog.records
        if r.getMessage() == "garbage collecting nodeclaim with no cloudprovider representation"
    ]
    assert record.__dict__["nodeclaim"] == gone.metadata.name
    assert record.__dict__["provider-id"] == gone.status.provider_id
    assert record.__dict__["nodepool"] == "default"
    assert (
        'karpenter_nodeclaims_disrupted_total{capacity_type="spot",nodepool="default",'
        'reason="garbage_collected"} 1' in (telemetry.prometheus_text())
    )

    # Past the grace period the recent one goes as well; the healthy one stays.
    clock.step(datetime.timedelta(seconds=GRACE + 1))
    await live.caught_up()
    await controller.reconcile_once()
    assert not kube_http.exists(NODECLAIMS.object_path(recent.metadata.name or ""))
    assert kube_http.exists(NODECLAIMS.object_path(healthy.metadata.name or ""))
