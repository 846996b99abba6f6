"""A NodePool's cost cap (spec.limits karpy.sh/cost-per-hour) on the real local cluster: the
apiserver refuses any other karpy.sh/ limit, a scale-out stops at the cap with the pods told why,
and the NodePool's status shows what its NodeClaims cost."""

from __future__ import annotations

import attrs
import pytest

from karpy.apis.meta import ConditionStatus, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaimStatus
from karpy.controllers.nodepool.status import NodePoolStatusController
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.resources import Resources
from karpy.kube.errors import KubeError
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, PODS
from karpy.localcluster import ClusterInfo
from karpy.runtime.clock import SystemClock
from karpy.state.view import ClusterView
from tests.cluster.provisioning.harness import make_nodepool, provisioning
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

COST = wk.LIMIT_COST_PER_HOUR

# One type, one offering at $0.50/h: a 3-cpu pod needs a node of its own.
ONLY = InstanceType.make(
    "fake-4x",
    Resources.of({"cpu": 4, "memory": "16Gi", "pods": 110}),
    (Offering("test-zone-1", wk.CAPACITY_TYPE_ON_DEMAND, 0.5),),
    overhead=Resources.of({"cpu": "100m", "memory": "10Mi"}),
    labels={wk.LABEL_ARCH: wk.ARCH_AMD64, wk.LABEL_OS: wk.OS_LINUX},
)


async def test_a_scale_out_stops_at_the_cost_cap_and_says_why(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    async with provisioning(cluster_info.kubeconfig) as h:
        kube = h.kube
        pool = h.pool.metadata.name or ""

        # Only karpy's own key is accepted under karpy.sh/.
        typo = make_nodepool(f"{pool}-typo", h.intent)
        typo = attrs.evolve(
            typo, spec=attrs.evolve(typo.spec, limits={"karpy.sh/cost": Quantity("1")})
        )
        with pytest.raises(KubeError) as refused:
            await kube.create(NODEPOOLS, typo)
        assert refused.value.status == 422
        assert "the only karpy.sh/ limit is karpy.sh/cost-per-hour" in refused.value.message

        h.provider.instance_types = (ONLY,)
        await kube.merge_patch(NODEPOOLS, pool, {"spec": {"limits": {COST: "1.2"}}})

        async def capped() -> bool:
            seen = h.state.store(NODEPOOLS).get(pool)
            return seen is not None and COST in seen.spec.limits

        await eventually(capped, within=30)
        uids = [await h.create_pod(namespace, f"big-{i}", cpu="3") for i in range(4)]
        await h.wait_provisionable(*uids)
        await h.provisioner.reconcile_once()

        # $0.50 + $0.50 fit under $1.20; a third node would make $1.50.
        claims = await h.nodeclaims()
        assert len(claims) == 2
        failed = [
            e
            for e in await h.karpy_events(namespace)
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["uid"] in uids
        ]
        assert len(failed) == 2
        for event in failed:
            assert (
                "nodepool limits karpy.sh/cost-per-hour=1.2 ($0.200/h left, the cheapest launch"
                " needs $0.500/h)"
            ) in event["message"]

        # The pool's status adds up what its NodeClaims cost once launched.
        for claim in claims:
            name = claim.metadata.name or ""
            labels = {
                **claim.metadata.labels,
                wk.LABEL_INSTANCE_TYPE: ONLY.name,
                wk.LABEL_TOPOLOGY_ZONE: "test-zone-1",
                wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND,
            }
            await kube.merge_patch(NODECLAIMS, name, {"metadata": {"labels": labels}})
            await kube.patch_status(
                NODECLAIMS, name, NodeClaimStatus(capacity={"cpu": Quantity("4")})
            )
        status = NodePoolStatusController(
            kube,
            ClusterView(h.state),
            clock=SystemClock(),
            telemetry=h.telemetry,
            nodeclass_kinds={},
            cloudprovider=h.provider,
        )

        async def priced() -> bool:
            await status.reconcile(pool)
            got = await kube.get(NODEPOOLS, pool)
            resources = got.status.resources
            return (resources.get(COST), resources.get("cpu")) == ("1", "8")

        await eventually(priced, within=30, interval=0.2)
        got = await kube.get(NODEPOOLS, pool)
        validation = next(c for c in got.status.conditions if c.type == "ValidationSucceeded")
        assert validation.status is ConditionStatus.TRUE

        # The pods left pending would be the next test's unschedulable pods: gone before it runs.
        for i in range(4):
            await kube.delete(PODS, f"big-{i}", namespace=namespace, grace_period_seconds=0)

        async def no_pods() -> bool:
            return not any(p.metadata.uid in uids for p in h.state.store(PODS).objects())

        await eventually(no_pods, within=30)
