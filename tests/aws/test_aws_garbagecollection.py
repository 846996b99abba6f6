"""Leaked-instance garbage collection on moto: only this cluster's instances with no NodeClaim,
only after 30 seconds, and never another cluster's."""

from __future__ import annotations

import datetime
import logging

import pytest

from karpy_aws.controllers.garbagecollection import collect_leaked_instances
from karpy_aws.providers.instance import Instances
from karpy_aws.session import AWSSession

from .conftest import ProviderKit, make_nodeclaim

pytestmark = pytest.mark.aws


async def test_only_old_instances_without_a_nodeclaim_are_terminated(
    kit: ProviderKit, session: AWSSession, caplog: pytest.LogCaptureFixture
) -> None:
    kept = await kit.provider.create(make_nodeclaim(name="kept"))
    leaked = await kit.provider.create(make_nodeclaim(name="leaked"))
    kept_id, leaked_id = kept.status.provider_id, leaked.status.provider_id
    assert kept_id is not None
    assert leaked_id is not None
    instances = Instances(await session.client("ec2"), cluster_name=kit.cluster.name)
    launched_at = min(i.launch_time for i in await instances.list())
    # Another cluster's untracked instance in the same account must never be touched.
    neighbour = Instances(await session.client("ec2"), cluster_name="someone-else")
    kit.clock.set(launched_at + datetime.timedelta(seconds=29))
    assert await collect_leaked_instances(instances, [kept_id], clock=kit.clock) == ()
    kit.clock.set(launched_at + datetime.timedelta(minutes=5))
    with caplog.at_level(logging.INFO, logger="karpy_aws.controllers.garbagecollection"):
        collected = await collect_leaked_instances(instances, [kept_id], clock=kit.clock)
    assert collected == (leaked_id,)
    records = [r for r in caplog.records if r.name == "karpy_aws.controllers.garbagecollection"]
    assert [r.__dict__["provider_id"] for r in records] == [leaked_id]
    assert [i.provider_id for i in await instances.list()] == [kept_id]
    assert await neighbour.list() == ()
    # Terminated instances are not listed again, so a second pass has nothing to do.
    assert await collect_leaked_instances(instances, [kept_id], clock=kit.clock) == ()


async def test_other_clusters_instances_are_never_collected(
    kit: ProviderKit, session: AWSSession
) -> None:
    theirs = await kit.provider.create(make_nodeclaim(name="theirs"))
    ours = Instances(await session.client("ec2"), cluster_name=f"{kit.cluster.name}-other")
    launched_at = (await kit.provider.get(theirs.status.provider_id or "")).metadata
    assert launched_at.creation_timestamp is not None
    kit.clock.set(launched_at.creation_timestamp + datetime.timedelta(hours=1))
    assert await collect_leaked_instances(ours, [], clock=kit.clock) == ()
    assert theirs.status.provider_id in {n.status.provider_id for n in await kit.provider.list()}
