"""The kwok provider on the real local cluster: the Node it creates is the one Karpenter's kwok
provider would create, and the real kwok makes it Ready; the registration delay, the
insufficient-capacity knobs and NodeClass readiness behave as documented."""

from __future__ import annotations

import asyncio
import datetime
import functools
from pathlib import Path

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClaimRequirement,
    NodeClassReference,
    RequirementOperator,
)
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy.cloudprovider import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.registry import (
    ENTRY_POINT_GROUP,
    ProviderConfigError,
    ProviderContext,
    build_provider,
)
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.clock import FakeClock, SystemClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView
from karpy_aws.apis import labels as awslabels
from karpy_kwok import KwokCloudProvider, KwokOptions, build
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import (
    ANNOTATION_NODECLASS_HASH,
    ANNOTATION_NODECLASS_HASH_VERSION,
    KWOKNodeClass,
    KWOKNodeClassSpec,
    static_hash,
)
from karpy_kwok.catalog import OfferingSelector, load_entries
from karpy_kwok.controllers.garbagecollection import (
    LEAK_GRACE,
    LEAK_PERIOD,
    LeakedNodeController,
)
from karpy_kwok.providers.nodes import ANNOTATION_NODECLAIM_UID
from tests.contract.conftest import nodepool
from tests.support.clusterview import live_view
from tests.support.providers import run_extension
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

REF = NodeClassReference(group=kwoklabels.KWOK_GROUP, kind=KWOKNodeClass.KIND, name="kwok-test")
POOL = nodepool("default", REF)


@pytest.fixture
async def kube(kube: KubeClient) -> KubeClient:
    """The cluster's client (tests/cluster/conftest.py), with the KWOKNodeClass these tests'
    NodeClaims name."""
    await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=REF.name)))
    return kube


def _nodeclaim(
    name: str, *reqs: NodeClaimRequirement, cpu: str | None = None, uid: str | None = None
) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(name=name, uid=uid, labels={wk.LABEL_NODEPOOL: "default"}),
        spec=NodeClaimSpec(
            requirements=reqs,
            node_class_ref=REF,
            resources=ResourceRequests(requests={"cpu": Quantity(cpu)} if cpu else {}),
        ),
    )


def _in(key: str, *values: str) -> NodeClaimRequirement:
    return NodeClaimRequirement(key=key, operator=RequirementOperator.IN, values=values)


def _provider(
    kube: KubeClient,
    *,
    registration_delay: float = 0.0,
    unavailable: tuple[OfferingSelector, ...] = (),
) -> KwokCloudProvider:
    options = KwokOptions(registration_delay=registration_delay, unavailable=unavailable)
    return KwokCloudProvider(kube, load_entries(), options=options)


async def test_the_launched_node_carries_karpenters_shape_and_kwok_makes_it_ready(
    kube: KubeClient,
) -> None:
    provider = _provider(kube)
    launched = await provider.create(
        _nodeclaim("kwok-a", _in(wk.LABEL_ARCH, wk.ARCH_ARM64), cpu="3")
    )
    assert launched.status.provider_id == "kwok://kwok-a"
    node = await kube.get(NODES, "kwok-a")
    labels = node.metadata.labels
    # The cheapest arm64 type holding 3 cpu is a c6g.xlarge, spot in test-zone-a.
    assert labels[wk.LABEL_INSTANCE_TYPE] == "c6g.xlarge"
    assert labels[wk.LABEL_CAPACITY_TYPE] == wk.CAPACITY_TYPE_SPOT
    assert labels[wk.LABEL_TOPOLOGY_ZONE] == "test-zone-a"
    assert labels[wk.LABEL_ARCH] == wk.ARCH_ARM64
    assert labels[wk.LABEL_OS] == wk.OS_LINUX
    assert labels[wk.LABEL_NODEPOOL] == "default"
    assert labels[wk.LABEL_HOSTNAME] == "kwok-a"
    assert labels[kwoklabels.LABEL_KWOK_NODECLASS] == REF.name
    assert node.metadata.annotations[wk.ANNOTATION_KWOK_NODE] == wk.KWOK_NODE_VALUE
    assert node.spec.provider_id == "kwok://kwok-a"
    # The controller-manager may add node.kubernetes.io/not-ready until kwok reports Ready.
    assert (wk.TAINT_UNREGISTERED_KEY, "NoExecute") in {(t.key, t.effect) for t in node.spec.taints}
    assert node.status.capacity["cpu"] == "4"
    assert node.status.capacity["memory"] == "8Gi"

    async def ready() -> bool:
        current = await kube.get(NODES, "kwok-a")
        return any(
            c.type == "Ready" and c.status is ConditionStatus.TRUE
            for c in current.status.conditions
        )

    assert await eventually(ready, within=30)
    assert (await kube.get(NODES, "kwok-a")).status.allocatable[
        "cpu"
    ] == launched.status.allocatable["cpu"]
    await provider.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete(launched)


async def test_a_registration_delay_creates_the_node_later(
    kube: KubeClient, telemetry: Telemetry
) -> None:
    # A delay long enough that a loaded machine still sees the gap; the create returns first.
    provider = _provider(kube, registration_delay=3.0)
    loop = asyncio.get_running_loop()
    async with asyncio.TaskGroup() as tasks:
        runner = tasks.create_task(run_extension(provider.extension(), telemetry=telemetry))
        started = loop.time()
        launched = await provider.create(_nodeclaim("kwok-delayed"))
        with pytest.raises(NotFoundError):
            await kube.get(NODES, "kwok-delayed")
        # Pending launches are instances: get and list see them.
        assert (
            await provider.get("kwok://kwok-delayed")
        ).status.provider_id == "kwok://kwok-delayed"
        assert "kwok-delayed" in {nc.metadata.name for nc in await provider.list()}

        async def node_exists(name: str) -> bool:
            try:
                await kube.get(NODES, name)
            except NotFoundError:
                return False
            return True

        assert await eventually(
            functools.partial(node_exists, "kwok-delayed"), within=15, interval=0.1
        )
        assert loop.time() - started >= 3.0
        # A deleted pending launch never becomes a Node. A launch held after it falls due after
        # it, and the pass creates due Nodes earliest first: once the later one's Node exists,
        # the cancelled one's would too, had the delete not dropped it.
        pending = await provider.create(_nodeclaim("kwok-cancelled"))
        await provider.delete(pending)
        with pytest.raises(NodeClaimNotFoundError):
            await provider.get("kwok://kwok-cancelled")
        later = await provider.create(_nodeclaim("kwok-later"))
        assert await eventually(
            functools.partial(node_exists, "kwok-later"), within=15, interval=0.1
        )
        with pytest.raises(NotFoundError):
            await kube.get(NODES, "kwok-cancelled")
        runner.cancel()
    await provider.delete(launched)
    await provider.delete(later)


async def _recorded(
    kube: KubeClient, provider: KwokCloudProvider, name: str, **conditions: str
) -> str:
    """A NodeClaim `name` on the apiserver, launched by `provider` and recorded as the lifecycle
    controller records a launch (labels, annotations, providerID, capacity, the `conditions`
    given True at their stamp); returns its UID."""
    stored = await kube.create(NODECLAIMS, _nodeclaim(name))
    launched = await provider.create(stored)
    stamped = tuple(
        Condition(
            type=kind,
            status=ConditionStatus.TRUE,
            last_transition_time=datetime.datetime.fromisoformat(stamp),
            reason=kind,
        )
        for kind, stamp in conditions.items()
    )
    metadata = launched.metadata
    await kube.merge_patch(
        NODECLAIMS,
        name,
        {"metadata": {"labels": metadata.labels, "annotations": metadata.annotations}},
    )
    status = attrs.evolve(launched.status, conditions=stamped)
    await kube.patch_status(NODECLAIMS, name, status)
    return stored.metadata.uid or ""


async def test_a_restarted_provider_resumes_the_launches_a_crash_left_waiting(
    kube: KubeClient, telemetry: Telemetry
) -> None:
    """Pending launches live in memory; the NodeClaims record them. A provider started after a
    crash holds them again, due when the first one would have created their Nodes, so garbage
    collection never finds them missing."""
    clock = FakeClock(SystemClock().now().replace(microsecond=0))
    launched_at = clock.now()
    crashed = _provider(kube, registration_delay=30.0)  # its launches pass never runs
    waiting_uid = await _recorded(kube, crashed, "kwok-resumed", Launched=launched_at.isoformat())
    await _recorded(
        kube,
        crashed,
        "kwok-was-registered",
        Launched=launched_at.isoformat(),
        Registered=launched_at.isoformat(),
    )
    clock.step(datetime.timedelta(seconds=20))
    await _recorded(kube, crashed, "kwok-just-launched", Launched=clock.now().isoformat())
    clock.step(datetime.timedelta(seconds=11))  # the first is due, the last is not
    async with live_view(kube, (NODES, NODECLAIMS)) as live:
        await live.caught_up()
        restarted = KwokCloudProvider(
            kube,
            load_entries(),
            options=KwokOptions(registration_delay=30.0),
            view=live.view,
            clock=clock,
        )
        resumed = await restarted.get("kwok://kwok-resumed")
        assert resumed.status.provider_id == "kwok://kwok-resumed"
        # A NodeClaim that registered had a Node: one missing now is gone, for GC to see.
        with pytest.raises(NodeClaimNotFoundError):
            await restarted.get("kwok://kwok-was-registered")
        listed = {nc.metadata.name for nc in await restarted.list()}
        assert {"kwok-resumed", "kwok-just-launched"} <= listed
        assert "kwok-was-registered" not in listed
        # Due when the crashed process would have created them: the first now, the last after
        # the rest of its 30 s (less the 11 s it has waited).
        now = asyncio.get_running_loop().time()
        assert [name for name, _ in restarted.instances.due(now)] == ["kwok-resumed"]
        assert [name for name, _ in restarted.instances.due(now + 18)] == ["kwok-resumed"]
        assert {name for name, _ in restarted.instances.due(now + 20)} == {
            "kwok-resumed",
            "kwok-just-launched",
        }
        async with asyncio.TaskGroup() as tasks:
            runner = tasks.create_task(run_extension(restarted.extension(), telemetry=telemetry))

            async def node_exists() -> bool:
                try:
                    await kube.get(NODES, "kwok-resumed")
                except NotFoundError:
                    return False
                return True

            assert await eventually(node_exists, within=15, interval=0.1)
            runner.cancel()
        node = await kube.get(NODES, "kwok-resumed")
        assert node.metadata.annotations[ANNOTATION_NODECLAIM_UID] == waiting_uid
        assert node.spec.provider_id == "kwok://kwok-resumed"
        assert (
            node.metadata.labels[wk.LABEL_INSTANCE_TYPE]
            == resumed.metadata.labels[wk.LABEL_INSTANCE_TYPE]
        )
        for name in ("kwok-resumed", "kwok-was-registered", "kwok-just-launched"):
            await kube.delete(NODECLAIMS, name)
        await kube.delete(NODES, "kwok-resumed")


async def test_unavailable_offerings_are_skipped_then_insufficient_capacity(
    kube: KubeClient,
) -> None:
    provider = _provider(kube, unavailable=(OfferingSelector("*", "*", wk.CAPACITY_TYPE_SPOT),))
    types = await provider.get_instance_types(POOL)
    assert all(
        o.available == (o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND)
        for it in types
        for o in it.offerings
    )
    launched = await provider.create(_nodeclaim("kwok-ice"))
    assert launched.metadata.labels[wk.LABEL_CAPACITY_TYPE] == wk.CAPACITY_TYPE_ON_DEMAND
    provider.set_unavailable([OfferingSelector("*")])
    with pytest.raises(InsufficientCapacityError):
        await provider.create(_nodeclaim("kwok-ice-2"))
    with pytest.raises(NotFoundError):
        await kube.get(NODES, "kwok-ice-2")
    provider.set_unavailable([])
    assert (await provider.create(_nodeclaim("kwok-ice-3"))).status.provider_id


async def test_a_nodepool_without_a_ready_nodeclass_offers_no_instance_types(
    kube: KubeClient,
) -> None:
    """So the provisioner plans nothing on it, rather than NodeClaims that cannot launch."""
    provider = _provider(kube)
    missing = NodeClassReference(group=REF.group, kind=REF.kind, name="no-such-class")
    with pytest.raises(NodeClassNotReadyError, match="nodepool 'orphan': KWOKNodeClass 'no-such"):
        await provider.get_instance_types(nodepool("orphan", missing))
    foreign = NodeClassReference(group=awslabels.AWS_GROUP, kind="EC2NodeClass", name="default")
    with pytest.raises(NodeClassNotReadyError, match="nodepool 'aws': nodeClassRef"):
        await provider.get_instance_types(nodepool("aws", foreign))
    assert await provider.get_instance_types(POOL)


async def test_a_missing_or_foreign_nodeclass_is_not_ready(kube: KubeClient) -> None:
    provider = _provider(kube)
    missing = NodeClassReference(group=REF.group, kind=REF.kind, name="no-such-class")
    claim = _nodeclaim("kwok-nc")
    with pytest.raises(NodeClassNotReadyError, match="'no-such-class' not found"):
        await provider.create(
            NodeClaim(
                metadata=claim.metadata, spec=NodeClaimSpec(requirements=(), node_class_ref=missing)
            )
        )
    foreign = NodeClassReference(group=awslabels.AWS_GROUP, kind="EC2NodeClass", name="default")
    with pytest.raises(NodeClassNotReadyError, match="not a KWOKNodeClass"):
        await provider.create(
            NodeClaim(
                metadata=claim.metadata, spec=NodeClaimSpec(requirements=(), node_class_ref=foreign)
            )
        )


async def test_list_ignores_nodes_that_are_not_kwok_instances(kube: KubeClient) -> None:
    await kube.create(
        NODES,
        Node(
            metadata=ObjectMeta(name="kwok-foreign"),
            spec=NodeSpec(provider_id="kwok://kwok-foreign"),
        ),
    )
    provider = _provider(kube)
    assert "kwok-foreign" not in {nc.metadata.name for nc in await provider.list()}
    with pytest.raises(NodeClaimNotFoundError):
        await provider.get("kwok://kwok-foreign")
    with pytest.raises(NodeClaimNotFoundError):
        await provider.get("aws:///us-west-2a/i-0123")


async def test_build_reads_the_settings(kube: KubeClient) -> None:
    context: ProviderContext[KubeClient, ClusterView] = ProviderContext(
        kube=kube,
        clock=FakeClock(),
        cluster_name="test",
        settings={"registration-delay": "1m30s", "unavailable-offerings": "m5.*:test-zone-a:spot"},
    )
    provider = build(context)
    assert provider.name == "kwok"
    types = {it.name: it for it in await provider.get_instance_types(POOL)}
    spot_a = [
        o
        for o in types["m5.large"].offerings
        if (o.zone, o.capacity_type) == ("test-zone-a", "spot")
    ]
    assert [o.available for o in spot_a] == [False]
    for bad, message in [
        ({"colour": "red"}, "unknown setting 'colour'"),
        ({"registration-delay": "soon"}, "registration-delay"),
        ({"unavailable-offerings": "a:b:c:d"}, "unavailable-offerings"),
        ({"catalog": "/nonexistent/catalog.json"}, "setting 'catalog'"),
    ]:
        with pytest.raises(ProviderConfigError, match=message):
            build(ProviderContext(kube=kube, clock=FakeClock(), cluster_name="t", settings=bad))


async def test_a_retried_create_reports_the_first_launch(kube: KubeClient) -> None:
    provider = _provider(kube)
    first = await provider.create(_nodeclaim("kwok-retry"))
    assert first.metadata.labels[wk.LABEL_CAPACITY_TYPE] == wk.CAPACITY_TYPE_SPOT
    provider.set_unavailable([OfferingSelector("*", "*", wk.CAPACITY_TYPE_SPOT)])
    again = await provider.create(_nodeclaim("kwok-retry"))
    assert again.status.provider_id == first.status.provider_id
    for key in (wk.LABEL_INSTANCE_TYPE, wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE):
        assert again.metadata.labels[key] == first.metadata.labels[key]
    assert again.status.capacity == first.status.capacity
    assert len([nc for nc in await provider.list() if nc.metadata.name == "kwok-retry"]) == 1


async def test_a_node_name_taken_by_another_node_is_a_create_error(kube: KubeClient) -> None:
    await kube.create(NODES, Node(metadata=ObjectMeta(name="kwok-taken")))
    with pytest.raises(CreateError) as caught:
        await _provider(kube).create(_nodeclaim("kwok-taken"))
    assert caught.value.condition_reason == "NodeNameTaken"


async def test_the_entry_point_line_builds_the_kwok_provider(
    kube: KubeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The line the project's pyproject declares, in a throwaway distribution on sys.path.
    info = tmp_path / "karpy_kwok_entry-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: karpy-kwok-entry\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nkwok = karpy_kwok:build\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    context: ProviderContext[KubeClient, ClusterView] = ProviderContext(
        kube=kube, clock=FakeClock(), cluster_name="test"
    )
    provider = await build_provider("kwok", context)
    assert isinstance(provider, KwokCloudProvider)
    assert (
        await provider.create(_nodeclaim("kwok-entry"))
    ).status.provider_id == "kwok://kwok-entry"


async def test_the_nodeclass_registration_delay_overrides_the_provider_setting(
    kube: KubeClient, telemetry: Telemetry
) -> None:
    slow = NodeClassReference(
        group=kwoklabels.KWOK_GROUP, kind=KWOKNodeClass.KIND, name="kwok-slow"
    )
    await kube.create(
        KWOK_NODECLASSES,
        KWOKNodeClass(
            metadata=ObjectMeta(name=slow.name),
            spec=KWOKNodeClassSpec(node_registration_delay="1s"),
        ),
    )
    provider = _provider(kube, registration_delay=0.0)
    claim = attrs.evolve(
        _nodeclaim("kwok-slow-1"),
        spec=attrs.evolve(_nodeclaim("kwok-slow-1").spec, node_class_ref=slow),
    )
    loop = asyncio.get_running_loop()
    async with asyncio.TaskGroup() as tasks:
        runner = tasks.create_task(run_extension(provider.extension(), telemetry=telemetry))
        started = loop.time()
        launched = await provider.create(claim)
        with pytest.raises(NotFoundError):
            await kube.get(NODES, "kwok-slow-1")

        async def node_exists() -> bool:
            try:
                await kube.get(NODES, "kwok-slow-1")
            except NotFoundError:
                return False
            return True

        assert await eventually(node_exists, within=10, interval=0.1)
        assert loop.time() - started >= 1.0
        runner.cancel()
    await provider.delete(launched)


async def test_a_changed_nodeclass_spec_is_nodeclass_drift(kube: KubeClient) -> None:
    provider = _provider(kube)
    launched = await provider.create(_nodeclaim("kwok-drift", cpu="1"))
    assert launched.metadata.annotations[ANNOTATION_NODECLASS_HASH] == static_hash(
        KWOKNodeClassSpec()
    )
    assert await provider.is_drifted(launched) is None
    await kube.merge_patch(KWOK_NODECLASSES, REF.name, {"spec": {"nodeRegistrationDelay": "1m"}})
    assert await provider.is_drifted(launched) == "NodeClassDrift"
    other_version = attrs.evolve(
        launched.metadata,
        annotations={
            **launched.metadata.annotations,
            ANNOTATION_NODECLASS_HASH_VERSION: "v0",
        },
    )
    assert await provider.is_drifted(attrs.evolve(launched, metadata=other_version)) is None
    assert {(p.condition_type, p.condition_status) for p in provider.repair_policies()} == {
        ("Ready", "False"),
        ("Ready", "Unknown"),
    }
    await provider.delete(launched)


async def test_a_create_retried_for_the_same_nodeclaim_uid_gets_the_first_node_and_another_uid_none(
    kube: KubeClient,
) -> None:
    """As CreateFleet's client token: the same NodeClaim (UID) retried after a crash gets the
    instance the first call made; a Node left by an earlier NodeClaim of the same name is
    never taken for another's."""
    provider = _provider(kube)
    first = await provider.create(_nodeclaim("kwok-uid", uid="uid-1"))
    node = await kube.get(NODES, "kwok-uid")
    assert node.metadata.annotations[ANNOTATION_NODECLAIM_UID] == "uid-1"
    again = await provider.create(_nodeclaim("kwok-uid", uid="uid-1"))
    assert again.status.provider_id == first.status.provider_id
    with pytest.raises(CreateError) as caught:
        await provider.create(_nodeclaim("kwok-uid", uid="uid-2"))
    assert caught.value.condition_reason == "NodeNameTaken"
    assert len([n for n in await provider.list() if n.metadata.name == "kwok-uid"]) == 1


async def test_a_nodeclaim_deleted_before_its_launch_was_recorded_has_its_node_deleted(
    kube: KubeClient,
) -> None:
    """A process launched it and died before writing the providerID: finalizing the NodeClaim
    must not leave its Node behind, and must not take another NodeClaim's."""
    provider = _provider(kube)
    await provider.create(_nodeclaim("kwok-unrecorded", uid="uid-a"))
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete(_nodeclaim("kwok-unrecorded", uid="uid-other"))
    assert (await kube.get(NODES, "kwok-unrecorded")).metadata.deletion_timestamp is None
    await provider.delete(_nodeclaim("kwok-unrecorded", uid="uid-a"))

    async def gone() -> bool:
        try:
            await kube.get(NODES, "kwok-unrecorded")
        except NotFoundError:
            return True
        return False

    assert await eventually(gone, within=10, interval=0.1)
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete(_nodeclaim("kwok-unrecorded", uid="uid-a"))
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete(_nodeclaim("kwok-never-launched", uid="uid-b"))


async def test_garbage_collection_deletes_kwok_nodes_no_nodeclaim_owns_after_the_grace(
    kube: KubeClient,
) -> None:
    """Karpenter's instance garbage collection: an instance of ours that no NodeClaim owns and
    that is older than the grace is deleted; one a NodeClaim owns, or one still in its grace,
    stays, and the pass comes back when that grace runs out."""
    clock = FakeClock()
    owned_claim = await kube.create(NODECLAIMS, _nodeclaim("kwok-gc-owned"))
    async with live_view(kube, (NODES, NODECLAIMS)) as live:
        provider = KwokCloudProvider(
            kube, load_entries(), options=KwokOptions(), view=live.view, clock=clock
        )
        collector = LeakedNodeController(kube, live.view, provider.instances, clock=clock)
        await provider.create(owned_claim)  # not recorded yet: owned by name and UID
        await provider.create(_nodeclaim("kwok-gc-leaked", uid="uid-deleted-claim"))
        foreign = await kube.create(NODES, Node(metadata=ObjectMeta(name="kwok-gc-foreign")))
        await live.caught_up()
        created = (await kube.get(NODES, "kwok-gc-leaked")).metadata.creation_timestamp
        assert created is not None
        clock.set(created + datetime.timedelta(seconds=LEAK_GRACE - 10))
        young = await collector.reconcile_once()
        assert young.requeue_after is not None
        assert young.requeue_after <= 11
        assert (await kube.get(NODES, "kwok-gc-leaked")).metadata.deletion_timestamp is None
        clock.set(created + datetime.timedelta(seconds=LEAK_GRACE + 1))
        done = await collector.reconcile_once()
        assert done.requeue_after == LEAK_PERIOD

        async def leaked_gone() -> bool:
            try:
                await kube.get(NODES, "kwok-gc-leaked")
            except NotFoundError:
                return True
            return False

        assert await eventually(leaked_gone, within=10, interval=0.1)
        assert (await kube.get(NODES, "kwok-gc-owned")).metadata.deletion_timestamp is None
        assert (await kube.get(NODES, foreign.metadata.name or "")).metadata.name
