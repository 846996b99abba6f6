"""The provisioner on the real local cluster: pending pods become NodeClaims of the right shape,
pods nothing can hold are told why (once), and capacity already in flight is used first.

kube-scheduler marks each pod Unschedulable (no Node carries the test's label), which is what
makes it provisionable; nothing launches the NodeClaims (that is the lifecycle controller's job),
so a test that needs launched capacity writes the status a launch would.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from karpy.apis.kube.common import TaintEffect
from karpy.apis.meta import Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import RequirementOperator
from karpy.apis.v1.nodeclaim import NodeClaimStatus
from karpy.controllers.provisioning.provisioner import PENDING_RECHECK
from karpy.core.resources import parse_quantity
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.localcluster import ClusterInfo
from karpy.runtime.clock import SystemClock
from karpy.state.view import ClusterView
from tests.cluster.provisioning.harness import INTENT, TEST_TAINT, pod_body, provisioning
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


async def test_pending_pods_become_one_nodeclaim_of_the_template(
    cluster_info: ClusterInfo, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="karpy")
    async with provisioning(cluster_info.kubeconfig) as h:
        uids = [await h.create_pod(namespace, f"inflate-{i}") for i in range(3)]
        await h.wait_provisionable(*uids)

        placed = await h.provisioner.reconcile_once()

        # Placed, yet still pending until kube-scheduler binds them: passes go on (renewing
        # nominations) every PENDING_RECHECK seconds while any pod waits.
        assert placed.requeue_after == PENDING_RECHECK
        claims = await h.nodeclaims()
        assert len(claims) == 1, "three 1-cpu pods pack onto one node"
        claim = claims[0]
        pool = h.pool.metadata.name or ""
        name = claim.metadata.name or ""
        assert name.startswith(f"{pool}-")
        assert len(name) == len(pool) + 6
        (owner,) = claim.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid) == ("NodePool", pool, h.pool.metadata.uid)
        assert owner.block_owner_deletion is True
        assert claim.metadata.labels[wk.LABEL_NODEPOOL] == pool
        assert claim.metadata.labels[INTENT] == h.intent
        reqs = {r.key: r for r in claim.spec.requirements}
        assert reqs[wk.LABEL_INSTANCE_TYPE].operator is RequirementOperator.IN
        assert reqs[wk.LABEL_INSTANCE_TYPE].values
        assert reqs[wk.LABEL_CAPACITY_TYPE].operator is RequirementOperator.IN
        assert set(reqs[wk.LABEL_CAPACITY_TYPE].values) <= {
            wk.CAPACITY_TYPE_ON_DEMAND,
            wk.CAPACITY_TYPE_SPOT,
        }
        assert reqs[INTENT].values == (h.intent,)
        assert parse_quantity(claim.spec.resources.requests["cpu"]) >= parse_quantity("3")
        assert parse_quantity(claim.spec.resources.requests["memory"]) >= parse_quantity("4608Mi")
        assert [(t.key, t.effect) for t in claim.spec.taints] == [
            (TEST_TAINT, TaintEffect.NO_SCHEDULE)
        ]
        assert claim.spec.node_class_ref == h.pool.spec.template.spec.node_class_ref
        assert claim.spec.expire_after == "24h"

        # Before launch the pods wait for that NodeClaim: another batch adds none.
        await h.wait_seen(name)
        await h.provisioner.reconcile_once()
        assert [c.metadata.name for c in await h.nodeclaims()] == [name]

        exposition = h.telemetry.prometheus_text()
        created_line = (
            'karpenter_nodeclaims_created_total{min_values_relaxed="false",'
            f'nodepool="{pool}",reason="provisioned"}} 1'
        )
        assert created_line in exposition
        assert (
            'karpenter_scheduler_unschedulable_pods_count{controller="provisioner"} 0' in exposition
        )
        assert "karpenter_scheduler_scheduling_duration_seconds_count" in exposition
        # The pass placed each pod: each waits, unbound, from that placement.
        for i in range(3):
            series = (
                "karpenter_pods_provisioning_unbound_time_seconds"
                f'{{name="inflate-{i}",namespace="{namespace}"}}'
            )
            assert series in exposition

    messages = [r.getMessage() for r in caplog.records]
    assert "found provisionable pod(s)" in messages
    assert "computed new nodeclaim(s) to fit pod(s)" in messages
    created = [r for r in caplog.records if r.getMessage() == "created nodeclaim"]
    assert len(created) == 1
    assert created[0].__dict__["nodeclaim"] == name
    assert created[0].__dict__["nodepool"] == pool
    assert created[0].__dict__["instance-types"]
    batch = next(
        s
        for s in h.spans.get_finished_spans()
        if s.name == "provisioning batch" and s.attributes and s.attributes.get("karpy.nodeclaims")
    )
    assert batch.attributes is not None
    assert batch.attributes["karpy.nodeclaims"] == (name,)
    pods = batch.attributes["karpy.pods"]
    assert isinstance(pods, int)
    assert pods >= 3
    pod_names = batch.attributes["karpy.pod_names"]
    assert isinstance(pod_names, tuple)
    assert len(pod_names) == pods
    assert {f"{namespace}/inflate-{i}" for i in range(3)} <= set(pod_names)
    children = {
        s.name
        for s in h.spans.get_finished_spans()
        if s.parent is not None and s.parent.span_id == batch.context.span_id
    }
    assert {"snapshot", "solve", "launch"} <= children
    computing = [
        r
        for r in caplog.records
        if r.getMessage() == "computing scheduling decision for provisionable pod(s)"
    ]
    assert computing
    assert computing[-1].__dict__["pods"] == pods


async def test_a_pod_no_nodepool_can_hold_is_told_why_once(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    async with provisioning(cluster_info.kubeconfig) as h:
        uid = await h.create_pod(namespace, "nowhere", intent="no-such-intent")
        await h.wait_provisionable(uid)

        first = await h.provisioner.reconcile_once()
        await h.provisioner.reconcile_once()

        # The pod is tried again later even if nothing it watches changes.
        assert first.requeue_after == PENDING_RECHECK
        assert await h.nodeclaims() == []
        events = await h.karpy_events(namespace)
        failed = [e for e in events if e["involvedObject"]["uid"] == uid]
        assert len(failed) == 1, "the second batch's identical event is deduplicated"
        event = failed[0]
        assert event["reason"] == "FailedScheduling"
        assert event["type"] == "Warning"
        assert event["involvedObject"]["name"] == "nowhere"
        assert event["message"].startswith("Failed to schedule pod, ")
        assert len(event["message"]) > len("Failed to schedule pod, ")
        batch = next(s for s in h.spans.get_finished_spans() if s.name == "provisioning batch")
        assert batch.attributes is not None
        unschedulable = batch.attributes["karpy.unschedulable"]
        assert isinstance(unschedulable, int)
        assert unschedulable >= 1


async def test_pods_that_fit_an_in_flight_nodeclaim_add_no_nodeclaim(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    async with provisioning(cluster_info.kubeconfig) as h:
        first = await h.create_pod(namespace, "first")
        await h.wait_provisionable(first)
        await h.provisioner.reconcile_once()
        (claim,) = await h.nodeclaims()
        name = claim.metadata.name or ""
        # What a launch writes: the instance and its capacity (room for more such pods).
        big = {"cpu": Quantity("8"), "memory": Quantity("32Gi"), "pods": Quantity("110")}
        await h.kube.patch_status(
            NODECLAIMS,
            name,
            NodeClaimStatus(provider_id=f"fake://{name}", capacity=big, allocatable=big),
        )
        await h.wait_seen(name, launched=True)

        second = await h.create_pod(namespace, "second")
        await h.wait_provisionable(second)
        await h.provisioner.reconcile_once()

        assert [c.metadata.name for c in await h.nodeclaims()] == [name]

        async def nominated() -> list[str]:
            events = await h.karpy_events(namespace)
            return [
                e["message"]
                for e in events
                if e["reason"] == "Nominated" and e["involvedObject"]["uid"] == second
            ]

        assert await eventually(nominated, within=10) == [
            f"Pod should schedule on: nodeclaim/{name}"
        ]


async def test_the_batcher_drives_the_provisioner(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    async with provisioning(cluster_info.kubeconfig) as h, asyncio.TaskGroup() as group:
        running = group.create_task(h.loop.run())
        try:
            await h.create_pod(namespace, "batched-0")
            await h.create_pod(namespace, "batched-1")
            claims = await eventually(h.nodeclaims, within=60)
            assert len(claims) == 1
        finally:
            h.loop.stop()
        async with asyncio.timeout(10):
            await running


async def test_pods_of_a_deleting_node_get_a_new_nodeclaim_before_they_are_evicted(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    async with provisioning(cluster_info.kubeconfig) as h:
        node = f"leaving-{namespace[-6:]}"
        # A finalizer keeps the Node in its deleting state, as the termination controller does.
        await h.kube.create_raw(
            NODES,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "labels": {INTENT: h.intent},
                    "finalizers": ["karpy.test/hold"],
                },
            },
        )
        body = pod_body("resident", cpu="1", intent=h.intent)
        body["spec"]["nodeName"] = node
        pod = await h.kube.create_raw(PODS, body, namespace=namespace)
        await h.kube.delete(NODES, node)

        async def node_deleting_with_its_pod() -> bool:
            seen = h.state.store(NODES).get(node)
            bound = h.state.store(PODS).get("resident", namespace=namespace)
            return (
                seen is not None
                and seen.metadata.deletion_timestamp is not None
                and bound is not None
                and bound.spec.node_name == node
            )

        await eventually(node_deleting_with_its_pod, within=30)
        await h.provisioner.reconcile_once()

        (claim,) = await h.nodeclaims()
        assert parse_quantity(claim.spec.resources.requests["cpu"]) >= parse_quantity("1")
        assert pod.metadata.uid is not None


async def test_after_a_restart_a_launching_nodeclaim_holds_provisioning_then_takes_its_pods(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    """The crash case: a NodeClaim was created, the process died before its launch resolved.
    The new provisioner has no memory of it; it waits while the launch is unresolved (cluster
    state is not synced), then places the pods on the launched NodeClaim instead of asking
    for another, and records the nomination disruption reads."""
    async with provisioning(cluster_info.kubeconfig) as h:
        pods = [await h.create_pod(namespace, f"crash-{i}") for i in range(2)]
        await h.wait_provisionable(*pods)
        await h.provisioner.reconcile_once()
        (claim,) = await h.nodeclaims()
        name = claim.metadata.name or ""
        await h.wait_seen(name)
        h.provisioner.nominations.retain(())  # the restart: nothing held in memory
        view = ClusterView(h.state)
        assert not view.synced
        result = await h.provisioner.reconcile_once()
        assert result.requeue_after is not None  # waiting on cluster sync
        assert [c.metadata.name for c in await h.nodeclaims()] == [name]

        big = {"cpu": Quantity("8"), "memory": Quantity("32Gi"), "pods": Quantity("110")}
        await h.kube.patch_status(
            NODECLAIMS,
            name,
            NodeClaimStatus(provider_id=f"fake://{name}", capacity=big, allocatable=big),
        )
        await h.wait_seen(name, launched=True)
        result = await h.provisioner.reconcile_once()
        assert [c.metadata.name for c in await h.nodeclaims()] == [name]
        assert result.requeue_after is not None  # pods still pending: the nomination renews
        assert view.synced, [c.metadata.name for c in view.launching()]
        assert result.requeue_after == PENDING_RECHECK
        assert view.nominated(name, SystemClock().now().timestamp())
