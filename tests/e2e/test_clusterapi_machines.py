"""The Cluster API provider's bookkeeping against Cluster API's real controllers: a create cut short
(a crash, or its NodeClaim deleted) leaves no extra Machine; a template change is drift, and the
replacement comes from the new template while exactly the old Machine goes; garbage collection
removes a claimed Machine no NodeClaim owns.

Each test drives ClusterAPICloudProvider directly, as the lifecycle would, over its own fleet
(tests/support/clusterapi.py): two "processes" are two provider instances sharing nothing but
the cluster.
"""

from __future__ import annotations

import datetime
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.cloudprovider import CreateError, NodeClaimNotFoundError
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.localcluster import ClusterInfo, audit
from karpy.runtime.clock import FakeClock, SystemClock
from karpy.state.informed import InformedKinds
from karpy_clusterapi import ClusterAPICloudProvider, ClusterAPIOptions
from karpy_clusterapi.controllers.garbagecollection import GarbageCollector
from karpy_clusterapi.controllers.nodeclass import NodeClassController
from tests.support import clusterapi as capi
from tests.support.marks import TOOLS
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.usefixtures("karpy_crds", "clusterapi"),
    *TOOLS,
    pytest.mark.xdist_group("clusterapi"),
]

CLAIMED = "karpenter.cluster.x-k8s.io/nodeclaim"


@attrs.frozen
class Fleet:
    name: str
    ref: NodeClassReference
    env: capi.ClusterAPIEnv = attrs.field(eq=False)
    kube: KubeClient = attrs.field(eq=False)
    built: list[ClusterAPICloudProvider] = attrs.field(eq=False, factory=list)

    def provider(self, *, wait: float = 120.0, clock: Any = None) -> ClusterAPICloudProvider:
        """A provider as a fresh process would build it (its informers stop with the fleet)."""
        provider = ClusterAPICloudProvider(
            self.kube,
            self.kube,
            options=ClusterAPIOptions(namespace=self.name, create_wait=wait),
            clock=clock,
        )
        self.built.append(provider)
        return provider

    def nodeclaim(self, name: str) -> NodeClaim:
        return NodeClaim(
            metadata=ObjectMeta(name=f"{self.name}-{name}", uid=str(uuid.uuid4())),
            spec=NodeClaimSpec(requirements=(), node_class_ref=self.ref),
        )

    def machines(self) -> list[dict[str, Any]]:
        return capi.machines(self.env.kube, self.name)

    def replicas(self, md: str) -> int:
        found = self.env.kube.get(f"{capi.CAPI}/namespaces/{self.name}/machinedeployments/{md}")
        return int(found["spec"]["replicas"])

    def patch_md(self, md: str, body: dict[str, Any]) -> None:
        self.env.kube.merge_patch(
            f"{capi.CAPI}/namespaces/{self.name}/machinedeployments/{md}", body
        )


@pytest.fixture
async def fleet(clusterapi: capi.ClusterAPIEnv, cluster_info: ClusterInfo) -> AsyncIterator[Fleet]:
    name = f"capm-{uuid.uuid4().hex[:6]}"
    capi.fleet(clusterapi.kube, name)
    ref = capi.nodeclass(clusterapi.kube, name)
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    built = Fleet(name=name, ref=ref, env=clusterapi, kube=kube)
    provider = built.provider()
    await NodeClassController(
        kube, provider.fleet, provider.nodeclasses, clock=SystemClock()
    ).reconcile(name)
    try:
        yield built
    finally:
        for each in built.built:
            await each.aclose()
        capi.remove_fleet(clusterapi.kube, name)
        await kube.close()


async def _gone(provider: ClusterAPICloudProvider, claim: NodeClaim) -> bool:
    try:
        await provider.delete(claim)
    except NodeClaimNotFoundError:
        return True
    return False


async def test_a_create_retried_after_a_crash_claims_the_machine_the_first_one_grew(
    fleet: Fleet,
) -> None:
    claim = fleet.nodeclaim("crash")
    with pytest.raises(CreateError, match="small"):
        # The first process grows small, then stops waiting at once (as if killed).
        await fleet.provider(wait=0.0).create(claim)
    launched = await fleet.provider().create(claim)
    (machine,) = fleet.machines()
    assert machine["metadata"]["labels"][CLAIMED] == claim.metadata.name
    assert machine["spec"]["providerID"] == launched.status.provider_id
    assert fleet.replicas("small") == 1
    again = await fleet.provider().create(claim)
    assert again.status.provider_id == launched.status.provider_id
    assert len(fleet.machines()) == 1


async def test_creates_read_the_management_cluster_from_the_informers_not_the_apiserver(
    fleet: Fleet, cluster_info: ClusterInfo
) -> None:
    """After the informers' first list and watch, creates, gets, lists and drift checks ask the
    apiserver for no MachineDeployment or Machine: the audit log holds only their writes (and a
    read again after a write's conflict, one per 409). The testbed's own requests share karpy's
    User-Agent; its reads list every namespace at once, so those of the fleet's are karpy's."""
    provider = fleet.provider()
    await provider.get_instance_types(_pool(fleet))  # the informers have listed and watch
    mark = audit.lines(cluster_info.audit_log)
    launched = [await provider.create(fleet.nodeclaim(f"cached-{n}")) for n in range(2)]
    for claim in launched:
        assert (await provider.get(claim.status.provider_id or "")).status.provider_id
        assert await provider.is_drifted(claim) is None
    assert len(await provider.list()) == 2
    requests = [
        r
        for r in audit.karpy_requests(cluster_info.audit_log, skip=mark)
        if r.group == "cluster.x-k8s.io" and r.namespace == fleet.name
    ]
    reads = Counter((r.verb, r.resource) for r in requests if r.verb in {"get", "list"})
    conflicts = Counter(r.resource for r in requests if r.verb == "patch" and r.code == 409)
    assert reads == Counter({("get", "machinedeployments"): conflicts["machinedeployments"]}), (
        f"reads {dict(reads)} beyond one per conflict {dict(conflicts)}"
    )
    grows_and_settles = [
        r for r in requests if (r.verb, r.resource, r.code) == ("patch", "machinedeployments", 200)
    ]
    assert len(grows_and_settles) == 4  # each create grows small and drops its scale-up record


async def test_a_nodeclaim_deleted_mid_create_gives_its_replica_back(fleet: Fleet) -> None:
    claim = fleet.nodeclaim("cut-short")
    with pytest.raises(CreateError):
        await fleet.provider(wait=0.0).create(claim)
    assert fleet.replicas("small") == 1
    later = fleet.provider()
    await eventually(lambda: _gone(later, claim), within=60, what="the delete to end")
    assert fleet.replicas("small") == 0

    async def no_machines() -> bool:
        return not fleet.machines()

    await eventually(no_machines, within=60, what="the Machine grown for it to go")


async def test_a_template_change_is_drift_and_the_replacement_takes_only_the_old_machine(
    fleet: Fleet,
) -> None:
    # karpy drives replacement: Cluster API must not roll the Machines itself.
    fleet.patch_md("small", {"spec": {"rollout": {"strategy": {"type": "OnDelete"}}}})
    provider = fleet.provider()
    old_claim = fleet.nodeclaim("old")
    old = await provider.create(old_claim)
    assert await provider.is_drifted(old) is None
    fleet.patch_md("small", {"spec": {"template": {"spec": {"version": "v1.34.0"}}}})
    await eventually(lambda: _drifted(provider, old, "MachineTemplateDrift"), within=30)

    new = await provider.create(fleet.nodeclaim("new"))
    assert new.status.provider_id != old.status.provider_id
    assert await provider.is_drifted(new) is None
    await eventually(lambda: _gone(provider, old), within=90, what="the drifted Machine to go")

    async def only_the_new() -> list[dict[str, Any]]:
        left = fleet.machines()
        return (
            left if [m["spec"].get("providerID") for m in left] == [new.status.provider_id] else []
        )

    (machine,) = await eventually(only_the_new, within=90, what="only the new Machine")
    assert machine["spec"]["version"] == "v1.34.0"
    assert fleet.replicas("small") == 1

    fleet.patch_md("small", {"metadata": {"labels": {"karpy.sh/fleet": "elsewhere"}}})
    await eventually(lambda: _drifted(provider, new, "MachineDeploymentNotSelected"), within=30)


async def _drifted(provider: ClusterAPICloudProvider, claim: NodeClaim, reason: str) -> bool:
    """Whether the provider, reading its informers, finds `claim` drifted for `reason`."""
    return await provider.is_drifted(claim) == reason


async def test_garbage_collection_removes_a_claimed_machine_no_nodeclaim_owns(
    fleet: Fleet,
) -> None:
    provider = fleet.provider()
    orphan = await provider.create(fleet.nodeclaim("orphan"))  # no NodeClaim object exists
    clock = FakeClock(SystemClock().now() + datetime.timedelta(minutes=5))
    nodeclaims = InformedKinds(fleet.kube, (NODECLAIMS,))
    try:
        await nodeclaims.wait_synced(30)
        await GarbageCollector(nodeclaims.view, provider.fleet, clock=clock).reconcile_once()
    finally:
        await nodeclaims.aclose()

    async def gone() -> bool:
        return not fleet.machines()

    await eventually(gone, within=90, what="the orphaned Machine to go")
    assert fleet.replicas("small") == 0
    assert orphan.status.provider_id not in {n.status.provider_id for n in await provider.list()}


async def test_a_machinedeployment_without_annotations_is_shaped_by_its_template_status(
    fleet: Fleet,
) -> None:
    capi.machine_deployment(
        fleet.env.kube,
        fleet.name,
        "templated",
        cluster="work",
        cpu="6",
        memory="24Gi",
        labels={"karpy.sh/fleet": fleet.name},
        announce_shape=False,
    )
    provider = fleet.provider()

    async def all_three() -> dict[str, Any]:
        found = {it.name: it for it in await provider.get_instance_types(_pool(fleet))}
        return found if set(found) == {"small", "large", "templated"} else {}

    types = await eventually(all_three, within=30, what="the new MachineDeployment informed")
    assert types["templated"].capacity.get_amount("cpu") == 6000
    assert types["templated"].capacity.get_amount("memory") == 24 * 2**30 * 1000


def _pool(fleet: Fleet) -> Any:
    from tests.contract.conftest import nodepool

    return nodepool(fleet.name, fleet.ref)


def _health_check(fleet: Fleet, name: str, selector: dict[str, Any]) -> None:
    """A MachineHealthCheck of the fleet's Cluster (timeouts long enough that it never acts
    within the test)."""
    fleet.env.kube.apply(
        f"{capi.CAPI}/namespaces/{fleet.name}/machinehealthchecks/{name}",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachineHealthCheck",
            "metadata": {"name": name, "namespace": fleet.name},
            "spec": {
                "clusterName": "work",
                "selector": selector,
                "checks": {
                    "nodeStartupTimeoutSeconds": 3600,
                    "unhealthyNodeConditions": [
                        {"type": "Ready", "status": "Unknown", "timeoutSeconds": 3600}
                    ],
                },
            },
        },
    )


async def test_a_machine_a_machinehealthcheck_selects_is_repaired_by_it_not_by_karpy(
    fleet: Fleet,
) -> None:
    provider = fleet.provider()
    launched = await provider.create(fleet.nodeclaim("covered"))  # a Machine of small
    assert await provider.repaired_elsewhere(launched) is None
    _health_check(fleet, "large-workers", {"matchLabels": {"testbed.karpy.dev/pool": "large"}})
    assert await provider.repaired_elsewhere(launched) is None
    _health_check(
        fleet,
        "small-workers",
        {
            "matchExpressions": [
                {"key": "testbed.karpy.dev/pool", "operator": "In", "values": ["small"]}
            ]
        },
    )
    found = await provider.repaired_elsewhere(launched)
    assert found == f"MachineHealthCheck {fleet.name}/small-workers"
    # Node repair hands the extension's question to node.health (karpy never imports this).
    assert provider.extension().repaired_elsewhere is not None
