"""Leaked-instance garbage collection on moto: only this cluster's instances with no NodeClaim,
only after 30 seconds, and never another cluster's."""

from __future__ import annotations

import datetime
import logging

import attrs
import pytest

from karpy.apis.v1 import labels as wk
from karpy.cloudprovider import NodeClaimNotFoundError
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.kube.resources import Item, ObjectRef
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView
from karpy_aws.controllers.garbagecollection import collect_leaked_instances
from karpy_aws.controllers.upkeep import LeakedInstanceController
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


async def test_collection_waits_while_a_nodeclaim_older_than_the_grace_is_still_launching(
    kit: ProviderKit, session: AWSSession, telemetry: Telemetry, kube: KubeClient
) -> None:
    """After a restart mid-launch the retried CreateFleet (same client token) is about to claim
    the instance already made: terminating it first would hand the NodeClaim a dead one."""
    claim = make_nodeclaim(name="relaunching")
    claim = attrs.evolve(claim, metadata=attrs.evolve(claim.metadata, uid="uid-relaunching"))
    made = await kit.provider.create(claim)
    instances = Instances(await session.client("ec2"), cluster_name=kit.cluster.name)
    (instance,) = await instances.list()
    created = instance.launch_time - datetime.timedelta(seconds=1)
    state = ClusterState(metrics=telemetry.metrics)
    store = state.register(NODECLAIMS)
    state.register(NODES).replace([])
    launching = attrs.evolve(
        claim, metadata=attrs.evolve(claim.metadata, creation_timestamp=created)
    )
    ref = ObjectRef(
        kind="NodeClaim",
        namespace="",
        name="relaunching",
        uid="uid-relaunching",
        resource_version="1",
    )
    store.replace([Item(ref=ref, obj=launching)])
    state.mark_listed()
    controller = LeakedInstanceController(kube, ClusterView(state), instances, clock=kit.clock)
    kit.clock.set(instance.launch_time + datetime.timedelta(minutes=5))
    await controller.reconcile_once()
    assert [i.provider_id for i in await instances.list()] == [made.status.provider_id]
    # The launch resolves (the retry got the same instance): nothing is leaked.
    resolved = attrs.evolve(launching, status=made.status)
    store.replace([Item(ref=attrs.evolve(ref, resource_version="2"), obj=resolved)])
    await controller.reconcile_once()
    assert [i.provider_id for i in await instances.list()] == [made.status.provider_id]
    # Once its NodeClaim is gone, the instance is a leak like any other.
    store.replace([])
    await controller.reconcile_once()
    assert await instances.list() == ()


async def test_a_retried_launch_whose_parameters_moved_on_adopts_the_first_instance(
    kit: ProviderKit, session: AWSSession
) -> None:
    """A process launched the NodeClaim and died before recording it; the next process's
    CreateFleet carries the same client token but other parameters (here: fewer instance
    types), which EC2 refuses with IdempotentParameterMismatch. The instance the first call
    made is the NodeClaim's: adopted, not doubled, not left for collection."""
    claim = make_nodeclaim(name="retried")
    claim = attrs.evolve(claim, metadata=attrs.evolve(claim.metadata, uid="uid-retried"))
    first = await kit.provider.create(claim)
    narrowed = make_nodeclaim(
        (wk.LABEL_INSTANCE_TYPE, "In", (first.metadata.labels[wk.LABEL_INSTANCE_TYPE],)),
        name="retried",
    )
    narrowed = attrs.evolve(narrowed, metadata=attrs.evolve(narrowed.metadata, uid="uid-retried"))
    second = await kit.provider.create(narrowed)
    assert second.status.provider_id == first.status.provider_id
    instances = Instances(await session.client("ec2"), cluster_name=kit.cluster.name)
    (only,) = await instances.list()
    assert only.provider_id == first.status.provider_id
    assert only.tags["karpenter.sh/nodeclaim"] == "retried"


async def test_a_nodeclaim_deleted_before_its_launch_was_recorded_takes_its_instance(
    kit: ProviderKit, session: AWSSession
) -> None:
    """A process launched the NodeClaim and died before writing its providerID; the NodeClaim
    is then deleted (its launch timed out, or its command was rolled back). Its instance,
    tagged with its name at launch, is terminated with it, not left for collection."""
    launched = await kit.provider.create(make_nodeclaim(name="unrecorded"))
    other = await kit.provider.create(make_nodeclaim(name="recorded"))
    instances = Instances(await session.client("ec2"), cluster_name=kit.cluster.name)
    assert len(await instances.list()) == 2
    unrecorded = make_nodeclaim(name="unrecorded")
    assert unrecorded.status.provider_id is None
    await kit.provider.delete(unrecorded)
    assert [i.provider_id for i in await instances.list()] == [other.status.provider_id]
    assert launched.status.provider_id != other.status.provider_id
    # Gone now: the termination controller's next call finds nothing and lets the finalizer go.
    with pytest.raises(NodeClaimNotFoundError):
        await kit.provider.delete(unrecorded)
    terminations = kit.faults.sent.count("TerminateInstances")
    with pytest.raises(NodeClaimNotFoundError):
        await kit.provider.delete(make_nodeclaim(name="never-launched"))
    assert kit.faults.sent.count("TerminateInstances") == terminations
