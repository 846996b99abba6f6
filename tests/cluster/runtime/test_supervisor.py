"""The supervisor's shutdown order with a real controller plugged in through the composition root.

SIGTERM (here: the stop event) must stop the watches, let the in-flight reconcile finish within the
grace period (cancelling it past the deadline), and only then release the lease.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

from kubernetes_asyncio import client

from karpy.kube.resources import ObjectRef
from karpy.localcluster import ClusterInfo
from karpy.operator.components import Components
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import load
from karpy.runtime.reconciler import Result, Runner, WorkQueue
from tests.cluster.runtime.support import CONFIG_MAPS, create_config_map, lease_holder


async def components_for(kubeconfig: Path, namespace: str, lease: str, *, grace: str) -> Components:
    options = load(
        [
            "--kubeconfig",
            str(kubeconfig),
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            "0",
            "--health-probe-port",
            "0",
            "--leader-election-namespace",
            namespace,
            "--leader-election-name",
            lease,
            "--leader-election-identity",
            "supervised",
            "--shutdown-grace-period",
            grace,
        ],
        {},
    )
    return await build(options, kinds=(CONFIG_MAPS,))


def plug_controller(components: Components, namespace: str, reconcile: Runner[ObjectRef]) -> None:
    components.informers[0].subscribe(
        lambda event: (
            reconcile.queue.add(event.item.ref) if event.item.ref.namespace == namespace else None
        )
    )
    components.controllers = [reconcile]


async def test_in_flight_reconcile_finishes_before_the_lease_is_released(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    lease = f"karpy-test-{secrets.token_hex(3)}"
    components = await components_for(cluster_info.kubeconfig, namespace, lease, grace="20s")
    started = asyncio.Event()
    holder_at_end: list[str | None] = []

    async def slow(ref: ObjectRef) -> Result:
        if ref.name != "slow":
            return Result()
        started.set()
        await asyncio.sleep(1.0)
        holder_at_end.append(await lease_holder(api_client, namespace, lease))
        return Result()

    queue: WorkQueue[ObjectRef] = WorkQueue("slow", telemetry=components.telemetry)
    runner = Runner(
        "slow",
        slow,
        queue=queue,
        telemetry=components.telemetry,
        backoff=Backoff(base=0.1, cap=1.0),
        describe=ObjectRef.describe,
    )
    plug_controller(components, namespace, runner)
    stop = asyncio.Event()
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(Supervisor(components, stop=stop).run())
            await create_config_map(api_client, namespace, "slow")
            async with asyncio.timeout(30):
                await started.wait()
            stop.set()
    finally:
        await components.close()
    # The reconcile ran to its end while this replica still held the lease, which was then released.
    assert holder_at_end == ["supervised"]
    assert await lease_holder(api_client, namespace, lease) == ""
    assert runner.in_flight == 0


async def test_reconciles_past_the_grace_period_are_cancelled(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    lease = f"karpy-test-{secrets.token_hex(3)}"
    components = await components_for(cluster_info.kubeconfig, namespace, lease, grace="300ms")
    started = asyncio.Event()
    cancelled: list[str] = []

    async def stuck(ref: ObjectRef) -> Result:
        if ref.name != "stuck":
            return Result()
        started.set()
        try:
            await asyncio.Event().wait()  # never ends: only the shutdown's cancel gets it out
        except asyncio.CancelledError:
            cancelled.append(ref.name)
            raise
        return Result()

    queue: WorkQueue[ObjectRef] = WorkQueue("stuck", telemetry=components.telemetry)
    runner = Runner(
        "stuck",
        stuck,
        queue=queue,
        telemetry=components.telemetry,
        backoff=Backoff(base=0.1, cap=1.0),
        describe=ObjectRef.describe,
    )
    plug_controller(components, namespace, runner)
    stop = asyncio.Event()
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(Supervisor(components, stop=stop).run())
            await create_config_map(api_client, namespace, "stuck")
            async with asyncio.timeout(30):
                await started.wait()
            stop.set()
    finally:
        await components.close()
    # The supervisor returned, so it did not wait for a reconcile that never ends: it cancelled it.
    assert cancelled == ["stuck"]
    assert await lease_holder(api_client, namespace, lease) == ""
