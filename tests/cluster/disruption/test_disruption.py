"""Disruption by emptiness on the real local cluster with an injected clock: an empty,
initialized node whose NodePool says WhenEmpty / consolidateAfter 30s loses its NodeClaim after
30 s and not before; a node with a pod, a `nodes: "0"` budget and `consolidateAfter: Never` all
block it. And the lastPodEventTime stamper writes the NodeClaim's status when a pod lands on
its node. Before each pass the NodeClaims' `Consolidatable` condition is reconciled at the
injected clock's time (`Env.mark`), as the nodeclaim.disruption controller keeps it in the
operator: disruption reads the condition.
"""

from __future__ import annotations

import asyncio
import datetime
import logging

import attrs
import pytest

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodepool import Budget, ConsolidationPolicy, Disruption
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.localcluster import ClusterInfo
from karpy.runtime.telemetry import Telemetry
from karpy.state.pods import is_provisionable
from tests.cluster.disruption.harness import environment
from tests.support import metrics
from tests.support.metrics import total
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


WHEN_EMPTY_30S = Disruption(
    consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
    consolidate_after="30s",
    budgets=(Budget(nodes="100%"),),
)


async def test_empty_node_is_deleted_after_consolidate_after_and_not_before(
    cluster_info: ClusterInfo, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.controllers.disruption.queue")
    async with environment(cluster_info) as env:
        pool = await env.pool(WHEN_EMPTY_30S)
        claim, node = await env.node_with_claim(pool)
        env.clock.step(datetime.timedelta(seconds=29))
        await env.mark()
        await env.controller.reconcile_once()
        assert await env.undisrupted(claim, node)
        env.clock.step(datetime.timedelta(seconds=2))
        await env.mark()
        result = await env.controller.reconcile_once()
        assert result.requeue_after == 10.0

        # The queue counts the disruption once the delete has returned, then says so.
        async def deleted() -> bool:
            return any(
                r.getMessage() == "deleted nodeclaim" and getattr(r, "nodeclaim", None) == claim
                for r in caplog.records
            )

        await eventually(deleted, interval=0.05, what="the queue to delete the NodeClaim")
        assert not await env.exists(claim)
        disrupted = (
            'karpenter_nodeclaims_disrupted_total{capacity_type="",'
            f'nodepool="{pool}",reason="empty"}} 1'
        )
        assert disrupted in env.telemetry.prometheus_text()


@pytest.mark.parametrize(
    "disruption",
    [
        pytest.param(attrs.evolve(WHEN_EMPTY_30S, budgets=(Budget(nodes="0"),)), id="budget-0"),
        pytest.param(attrs.evolve(WHEN_EMPTY_30S, consolidate_after="Never"), id="never"),
    ],
)
async def test_budget_zero_and_never_block_emptiness(
    cluster_info: ClusterInfo, disruption: Disruption
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(disruption)
        claim, node = await env.node_with_claim(pool)
        env.clock.step(datetime.timedelta(hours=1))
        await env.mark()
        await env.controller.reconcile_once()
        assert await env.undisrupted(claim, node)


async def test_node_with_a_pod_is_never_deleted_and_gets_a_last_pod_event_time(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(WHEN_EMPTY_30S)
        claim, node = await env.node_with_claim(pool)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "busy"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
            },
        }
        await env.kube.create_raw(PODS, body, namespace=namespace)

        async def moved() -> bool:
            return node in env.moved

        await eventually(moved, within=30, interval=0.05)
        await env.podevents.reconcile(node)
        stored = await env.kube.get(NODECLAIMS, claim)
        assert stored.status.last_pod_event_time == env.clock.now().replace(microsecond=0)
        env.clock.step(datetime.timedelta(hours=1))
        await env.mark()
        await env.controller.reconcile_once()
        assert await env.undisrupted(claim, node)


async def test_the_loop_acts_on_a_pod_moving_and_stops_cleanly(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    # A polling period no test outlasts: whatever runs the pass after the first, it is not the
    # timer.
    async with environment(cluster_info, polling_period=3600.0) as env:
        pool = await env.pool(WHEN_EMPTY_30S)
        claim, node = await env.node_with_claim(pool)
        async with asyncio.TaskGroup() as group:
            group.create_task(env.disruption.run())
            try:
                # The first pass runs at once and finds nothing consolidatable yet.
                async def passed() -> bool:
                    return _passes(env.telemetry) >= 1

                await eventually(passed, within=30, interval=0.05)
                assert await env.undisrupted(claim, node)
                env.clock.step(datetime.timedelta(seconds=31))
                await env.mark()
                # A pod bound to some other node wakes the pass (its node may have emptied).
                elsewhere = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "elsewhere"},
                    "spec": {
                        "nodeName": "some-other-node",
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                    },
                }
                await env.kube.create_raw(PODS, elsewhere, namespace=namespace)

                async def deleted() -> bool:
                    return not await env.exists(claim)

                await eventually(deleted, within=30, interval=0.1)
            finally:
                env.disruption.stop()


async def test_a_node_nominated_for_a_pending_pod_is_not_empty_until_the_nomination_lapses(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    """kube-scheduler may take longer than any fixed window to bind pods (after an apiserver
    outage, say): a node the provisioner keeps nominating them onto stays."""
    async with environment(cluster_info) as env:
        pool = await env.pool(WHEN_EMPTY_30S)
        claim, node = await env.node_with_claim(pool)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waiting"},
            "spec": {
                "nodeSelector": {"karpy.test/nowhere": "true"},
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
        await env.kube.create_raw(PODS, body, namespace=namespace)

        async def has_pod() -> bool:
            return env.state.store(PODS).get("waiting", namespace=namespace) is not None

        await eventually(has_pod, within=30, interval=0.05)
        env.clock.step(datetime.timedelta(seconds=31))
        now = env.clock.now().timestamp()
        env.state.nominations.nominate(node, [(namespace, "waiting")], now=now, window=20.0)
        env.state.nominations.passed()
        await env.mark()
        await env.controller.reconcile_once()
        assert await env.undisrupted(claim, node)
        env.clock.step(datetime.timedelta(seconds=15))
        now = env.clock.now().timestamp()
        env.state.nominations.nominate(node, [(namespace, "waiting")], now=now, window=20.0)
        env.state.nominations.passed()
        env.clock.step(datetime.timedelta(seconds=15))
        await env.mark()
        await env.controller.reconcile_once()
        assert await env.undisrupted(claim, node)  # renewed by the later pass
        env.clock.step(datetime.timedelta(seconds=60))
        await env.mark()
        await env.controller.reconcile_once()
        # Past the window, but the provisioner has not passed since (waiting on cluster sync,
        # as after an apiserver outage): the nomination is held.
        assert await env.undisrupted(claim, node)
        env.state.nominations.passed()  # a pass that placed the pod nowhere near the node
        await env.mark()
        await env.controller.reconcile_once()

        async def deleted() -> bool:
            return not await env.exists(claim)

        await eventually(deleted, within=10, interval=0.05)


async def test_a_restarted_disruption_waits_for_the_first_provisioning_pass_while_pods_wait(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    """A restarted process knows no nominations until its provisioner has passed: with a pod
    pending, an empty-looking node may be the one it is headed for, so disruption waits."""
    async with environment(cluster_info, await_provisioning=True) as env:
        pool = await env.pool(WHEN_EMPTY_30S)
        claim, node = await env.node_with_claim(pool)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "unplaced"},
            "spec": {
                "nodeSelector": {"karpy.test/nowhere": "true"},
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
        await env.kube.create_raw(PODS, body, namespace=namespace)

        async def provisionable() -> bool:
            pod = env.state.store(PODS).get("unplaced", namespace=namespace)
            return pod is not None and is_provisionable(pod)

        await eventually(provisionable, within=30, interval=0.05)
        env.clock.step(datetime.timedelta(seconds=31))
        await env.mark()
        waiting = await env.controller.reconcile_once()
        assert waiting.requeue_after == 1.0
        assert await env.undisrupted(claim, node)
        env.state.nominations.passed()  # the provisioner passed and nominated nothing there
        await env.mark()
        await env.controller.reconcile_once()

        async def deleted() -> bool:
            return not await env.exists(claim)

        await eventually(deleted, within=10, interval=0.05)


def _passes(telemetry: Telemetry) -> float:
    """How many disruption passes have finished, whatever their result."""
    return total(telemetry, "controller_runtime_reconcile_total", controller="disruption")


UNDERUTILIZED_AT_ONCE = Disruption(
    consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
    consolidate_after="0s",
    budgets=(Budget(nodes="100%"),),
)


async def test_a_consolidation_the_cluster_changed_under_is_dropped_and_counted(
    cluster_info: ClusterInfo, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.controllers.disruption.controller")
    # The validation delay lasts until the test has changed the cluster and karpy has seen it:
    # a delay on the wall clock would race the informer on a loaded machine.
    changed = asyncio.Event()

    async def validation_delay(_: float) -> None:
        await changed.wait()

    async with environment(cluster_info, validation_sleep=validation_delay) as env:
        pool = await env.pool(UNDERUTILIZED_AT_ONCE)
        claims: list[str] = []
        for _ in range(2):
            claim, node = await env.node_with_claim(pool)
            await env.allocatable(node, cpu="4", memory="8Gi", pods="110")
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"small-{node}"},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            }
            await env.kube.create_raw(PODS, body, namespace=namespace)
            claims.append(claim)

        async def pods_seen() -> bool:
            return len([p for p in env.state.store(PODS).objects() if p.spec.node_name]) >= 2

        await eventually(pods_seen, within=30, interval=0.05)
        env.clock.step(datetime.timedelta(seconds=30))  # past the new nodes' nomination window
        await env.mark()

        # Each node's one small pod fits on the other: consolidation deletes one of them, once
        # the validation delay has passed and the cluster still agrees.
        passing = asyncio.create_task(env.controller.reconcile_once())

        async def validating() -> bool:
            return any(r.getMessage() == "validating consolidation command" for r in caplog.records)

        await eventually(validating, within=30, interval=0.05)
        # While it waits, a user marks both NodeClaims do-not-disrupt.
        for claim in claims:
            await env.kube.request(
                "PATCH",
                NODECLAIMS.object_path(claim),
                body={"metadata": {"annotations": {wk.ANNOTATION_DO_NOT_DISRUPT: "true"}}},
                content_type="application/merge-patch+json",
            )

        async def annotated() -> bool:
            return all(
                (c := env.state.store(NODECLAIMS).get(name)) is not None
                and wk.ANNOTATION_DO_NOT_DISRUPT in c.metadata.annotations
                for name in claims
            )

        await eventually(annotated, interval=0.05, what="the informer to see both annotations")
        changed.set()
        await passing

        # The command was dropped: both NodeClaims stay, and its candidate is counted.
        assert [await env.exists(c) for c in claims] == [True, True]
        assert any(r.getMessage() == "abandoning consolidation command" for r in caplog.records)
        failed = "karpenter_voluntary_disruption_failed_validations_total"
        counted = {
            kind: metrics.total(env.telemetry, failed, consolidation_type=kind)
            for kind in ("multi", "single")
        }
        assert sum(counted.values()) == 1, counted
        decided = "karpenter_voluntary_disruption_decisions_total"
        assert metrics.total(env.telemetry, decided) == 0
        evaluated = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count"
        assert metrics.total(env.telemetry, evaluated, reason="underutilized") >= 1


async def test_a_pass_that_found_nothing_rests_until_the_cluster_changes_or_a_window_closes(
    cluster_info: ClusterInfo, caplog: pytest.LogCaptureFixture
) -> None:
    """A settled cluster is not read again every polling period: the pass after one that found
    nothing returns at once, until a watch event changes cluster state or the clock reaches
    something due (here a fresh node's nomination window), and then it decides afresh."""
    caplog.set_level(logging.DEBUG, logger="karpy.controllers.disruption.controller")

    def rested() -> int:
        return sum(
            1 for r in caplog.records if r.getMessage().startswith("skipping disruption pass")
        )

    async with environment(cluster_info) as env:
        pool = await env.pool(WHEN_EMPTY_30S)
        claim, node = await env.node_with_claim(pool)  # nominated for 20 s as it initialized
        await env.mark()
        await env.controller.reconcile_once()
        assert rested() == 0
        again = await env.controller.reconcile_once()
        assert rested() == 1
        assert 0 < again.requeue_after <= 10.0
        env.clock.step(datetime.timedelta(seconds=21))  # the nomination window has closed
        await env.controller.reconcile_once()
        assert rested() == 1  # decided again: nothing yet (consolidateAfter is 30 s)
        await env.controller.reconcile_once()
        assert rested() == 2
        await env.kube.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"metadata": {"labels": {"karpy.test/touched": "true"}}},
            content_type="application/merge-patch+json",
        )

        async def touched() -> bool:
            seen = env.state.store(NODES).get(node)
            return seen is not None and "karpy.test/touched" in seen.metadata.labels

        await eventually(touched, within=30, interval=0.05)
        await env.controller.reconcile_once()
        assert rested() == 2  # cluster state changed: a full pass
        env.clock.step(datetime.timedelta(seconds=10))
        await env.mark()  # Consolidatable now: the condition's write wakes the pass
        await env.controller.reconcile_once()
        assert rested() == 2

        async def deleted() -> bool:
            return not await env.exists(claim)

        await eventually(deleted, within=10, interval=0.05)
