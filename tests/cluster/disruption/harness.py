"""A disruption controller and orchestration queue on the real local cluster, with an injected
clock, informers for the kinds they read, and helpers that make managed nodes by hand (no
provider launches anything here: NodeClaims and Nodes are plain API objects)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodepool import Disruption
from karpy.controllers.disruption.controller import (
    POLLING_PERIOD,
    VALIDATION_DELAY,
    DisruptionController,
)
from karpy.controllers.disruption.queue import OrchestrationQueue
from karpy.controllers.nodeclaim.disruption import NodeClaimDisruptionController
from karpy.controllers.nodeclaim.podevents import PodEventsController
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.localcluster import ClusterInfo
from karpy.manager import Loop, Manager
from karpy.runtime.clock import FakeClock, SystemClock
from karpy.runtime.options import ReconcileOptions, WatchingOptions
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.podmoves import pod_moves
from karpy.state.view import ClusterView
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider
from tests.cluster.provisioning.harness import make_nodepool
from tests.support.waiting import eventually


@attrs.define
class Env:
    kube: KubeClient
    state: ClusterState
    clock: FakeClock
    controller: DisruptionController
    queue: OrchestrationQueue
    podevents: PodEventsController
    moved: list[str]
    disruption: Loop
    telemetry: Telemetry
    conditions: NodeClaimDisruptionController

    async def mark(self) -> None:
        """Reconcile every NodeClaim's Consolidatable condition at the clock's time, as the
        nodeclaim.disruption controller does (disruption reads the condition), and wait until
        cluster state shows what it wrote."""
        for claim in self.state.store(NODECLAIMS).objects():
            name = claim.metadata.name or ""
            await self.conditions.reconcile(name)
            try:
                stored = await self.kube.get(NODECLAIMS, name)
            except NotFoundError:
                continue

            async def shown(
                name: str = name, version: str | None = stored.metadata.resource_version
            ) -> bool:
                seen = self.state.store(NODECLAIMS).get(name)
                return seen is not None and seen.metadata.resource_version == version

            await eventually(shown, within=30, interval=0.05)

    async def node_with_claim(
        self,
        pool: str,
        *,
        annotations: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> tuple[str, str]:
        """An Initialized NodeClaim of `pool` registered as a Node; returns (claim, node)."""
        suffix = secrets.token_hex(3)
        claim, node = f"{pool}-{suffix}", f"node-{suffix}"
        await self.kube.create_raw(NODES, _node_body(node, pool, taints or []))
        await self.kube.create_raw(NODECLAIMS, _claim_body(claim, pool, annotations or {}))
        await self.initialize(claim, node)
        return claim, node

    async def claim(self, pool: str, *, annotations: dict[str, str] | None = None) -> str:
        """A NodeClaim of `pool` that has not launched (nothing launches it here)."""
        name = f"{pool}-{secrets.token_hex(3)}"
        await self.kube.create_raw(NODECLAIMS, _claim_body(name, pool, annotations or {}))

        async def seen() -> bool:
            return self.state.store(NODECLAIMS).get(name) is not None

        await eventually(seen, within=30, interval=0.05)
        return name

    async def initialize(self, claim: str, node: str) -> None:
        """Mark `claim` Initialized on `node` (as the lifecycle controller would) and wait
        until cluster state shows it."""
        stamp = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "nodeName": node,
            "providerID": f"fake://{node}",
            "conditions": [
                {
                    "type": "Initialized",
                    "status": "True",
                    "reason": "Initialized",
                    "message": "",
                    "lastTransitionTime": stamp,
                }
            ],
        }
        await self.kube.request(
            "PATCH",
            NODECLAIMS.object_path(claim) + "/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )

        async def seen() -> bool:
            stored = self.state.store(NODECLAIMS).get(claim)
            return stored is not None and stored.status.node_name == node

        await eventually(seen, within=30, interval=0.05)

    async def pool(self, disruption: Disruption) -> str:
        name = f"pool-{secrets.token_hex(3)}"
        pool = make_nodepool(name, name)
        pool = attrs.evolve(pool, spec=attrs.evolve(pool.spec, disruption=disruption))
        await self.kube.create(NODEPOOLS, pool)

        async def seen() -> bool:
            return self.state.store(NODEPOOLS).get(name) is not None

        await eventually(seen, within=30, interval=0.05)
        return name

    async def undisrupted(self, claim: str, node: str) -> bool:
        """Whether no disruption command has taken `claim` and its `node`: the claim is there and
        not being deleted, it carries no command annotation and the node no disrupted taint.

        A command's candidates carry both as soon as `reconcile_once` has submitted it, while
        the claim itself goes only later, from the queue: a claim that merely still exists
        right after a pass proves nothing.
        """
        if not await self.exists(claim):
            return False
        stored = await self.kube.get(NODECLAIMS, claim)
        if wk.ANNOTATION_DISRUPTION_COMMAND in stored.metadata.annotations:
            return False
        taints = (await self.kube.get(NODES, node)).spec.taints
        return all(t.key != wk.TAINT_DISRUPTED_KEY for t in taints)

    async def allocatable(self, node: str, **amounts: str) -> None:
        """Give `node` this allocatable (and capacity), as its kubelet reports it, and wait
        until cluster state shows it."""
        await self.kube.request(
            "PATCH",
            NODES.object_path(node) + "/status",
            body={"status": {"allocatable": amounts, "capacity": amounts}},
            content_type="application/merge-patch+json",
        )

        async def seen() -> bool:
            stored = self.state.store(NODES).get(node)
            return stored is not None and bool(stored.status.allocatable)

        await eventually(seen, within=30, interval=0.05)

    async def exists(self, claim: str) -> bool:
        try:
            stored = await self.kube.get(NODECLAIMS, claim)
        except NotFoundError:
            return False
        return stored.metadata.deletion_timestamp is None


def _node_body(name: str, pool: str, taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {wk.LABEL_NODEPOOL: pool}},
        "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _claim_body(name: str, pool: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {wk.LABEL_NODEPOOL: pool},
            "annotations": annotations,
        },
        "spec": {
            "nodeClassRef": {
                "group": TEST_NODE_CLASS.group,
                "kind": TEST_NODE_CLASS.kind,
                "name": "default",
            },
            "requirements": [
                {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
            ],
        },
    }


@contextlib.asynccontextmanager
async def environment(
    cluster_info: ClusterInfo,
    *,
    await_provisioning: bool = False,
    polling_period: float = POLLING_PERIOD,
    validation_delay: float = VALIDATION_DELAY,
    validation_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[Env]:
    telemetry = Telemetry.setup(service_name="karpy-test")
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    clock = FakeClock(SystemClock().now())
    try:
        state = ClusterState(metrics=telemetry.metrics)
        informers = {
            kind.kind: Informer(
                kube,
                state.register(kind),
                state=state,
                settings=WatchingOptions(),
                metrics=telemetry.metrics,
            )
            for kind in (NODES, PODS, NODECLAIMS, NODEPOOLS)
        }
        moved: list[str] = []
        view = ClusterView(state)
        keys = pod_moves(lambda: view.informers_synced)
        informers[PODS.kind].subscribe(lambda event: moved.extend(keys(event)))
        recorder = Recorder(kube, clock)
        queue = OrchestrationQueue(
            kube,
            view,
            clock=clock,
            recorder=recorder,
            telemetry=telemetry,
        )
        controller = DisruptionController(
            view,
            queue,
            clock=clock,
            recorder=recorder,
            telemetry=telemetry,
            await_provisioning=await_provisioning,
            polling_period=polling_period,
            validation_delay=validation_delay,
            sleep=validation_sleep,
        )
        podevents = PodEventsController(kube, view, clock=clock)
        conditions = NodeClaimDisruptionController(
            kube, view, FakeCloudProvider(), clock=clock, telemetry=telemetry
        )
        # Run as the operator runs them; the disruption loop only when a test starts it. The
        # queue is not woken by NodeClaim changes here: restart tests run a second queue over
        # the same commands, as a restarted process would, and this one must stay out of it.
        manager = Manager(
            telemetry=telemetry, backoff=ReconcileOptions().backoff, synced=state.wait_synced
        )
        queue_loop = manager.loop(queue.spec())
        (disruption,) = manager.loops((controller.spec(),), informers)
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(i.run(), name=f"informer-{k}") for k, i in informers.items()]
            queue_task = group.create_task(queue_loop.run(), name="queue")
            try:
                async with asyncio.timeout(30):
                    await state.wait_synced()
                    await queue.wait_ready()
                yield Env(
                    kube,
                    state,
                    clock,
                    controller,
                    queue,
                    podevents,
                    moved,
                    disruption,
                    telemetry,
                    conditions,
                )
            finally:
                queue_loop.stop()
                await queue_task
                for task in tasks:
                    task.cancel()
    finally:
        await kube.close()
        telemetry.shutdown()
