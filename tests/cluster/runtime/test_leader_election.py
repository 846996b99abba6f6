"""Two real `karpy run` processes share one Lease: exactly one leads, and leadership moves.

Each test uses its own Lease in its own namespace. The default timings are used on purpose
(leaseDurationSeconds 15, renew deadline 10 s, retry period 2 s), so the failover measured here is
the one a deployment gets. Run with `-o log_cli=true --log-cli-level=INFO` to see the measured
times.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from karpy.runtime.options import LeaderElectionOptions
from tests.cluster.runtime.support import (
    Replica,
    lease_holder,
    spawn_replica,
    stop_replica,
)
from tests.support.marks import CHAIN_B
from tests.support.probes import http_get
from tests.support.waiting import eventually

# karpy run watches NodeClaims and NodePools: /readyz waits for their CRDs.
pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    CHAIN_B,  # two karpy processes each, and a failover measured against the lease
]

log = logging.getLogger(__name__)

LEASE_DURATION = LeaderElectionOptions().lease_duration
RETRY_PERIOD = LeaderElectionOptions().retry_period
# A follower acts on its next poll after the lease has looked unchanged for a full duration; the
# margin is the deadline a failover must meet to count as one at all.
MAX_FAILOVER_AFTER_KILL = LEASE_DURATION + 1.2 * RETRY_PERIOD + 1.0


async def two_replicas(
    cluster_info: ClusterInfo, namespace: str, workdir: Path
) -> tuple[str, list[Replica]]:
    lease = f"karpy-test-{secrets.token_hex(4)}"
    replicas = [
        await spawn_replica(
            identity,
            kubeconfig=cluster_info.kubeconfig,
            namespace=namespace,
            lease=lease,
            workdir=workdir,
        )
        for identity in ("replica-a", "replica-b")
    ]
    return lease, replicas


async def leaders(replicas: list[Replica], lease: str) -> list[str] | None:
    views = [await replica.is_leader(lease) for replica in replicas]
    if any(view is None for view in views):
        return None
    return [replica.identity for replica, view in zip(replicas, views, strict=True) if view]


async def wait_one_leader(
    api: client.ApiClient, namespace: str, lease: str, replicas: list[Replica]
) -> Replica:
    async def settled() -> str | None:
        views = await leaders(replicas, lease)
        holder = await lease_holder(api, namespace, lease)
        if views is not None and len(views) == 1 and views[0] == holder:
            return holder
        return None

    holder = await eventually(settled, within=60, interval=0.2)
    return next(replica for replica in replicas if replica.identity == holder)


async def test_exactly_one_leader_and_failover_after_kill(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    lease, replicas = await two_replicas(cluster_info, namespace, tmp_path)
    try:
        leader = await wait_one_leader(api_client, namespace, lease, replicas)
        follower = next(replica for replica in replicas if replica is not leader)
        # Both replicas serve probes; both become ready once their informers have listed.
        for replica in replicas:
            ports = replica.ports()
            assert ports is not None
            assert await eventually(functools.partial(_ok, ports[0], "/readyz"), within=60)
            assert (await http_get(ports[0], "/healthz"))[0] == 200
        # Only the leader runs controllers: NodeClaim garbage collection reconciles once at start,
        # so its reconcile counter shows on the leader's /metrics and never on the follower's.
        gc_series = 'controller="nodeclaim.garbagecollection"'
        assert await eventually(functools.partial(_serves, leader, gc_series), within=30)
        assert not await _serves(follower, gc_series)
        # Leadership is stable: over several retry periods there is always exactly one leader.
        for _ in range(5):
            assert await leaders(replicas, lease) == [leader.identity]
            assert await lease_holder(api_client, namespace, lease) == leader.identity
            await asyncio.sleep(RETRY_PERIOD / 2)

        loop = asyncio.get_running_loop()
        leader.process.send_signal(signal.SIGKILL)
        killed_at = loop.time()
        await leader.process.wait()

        async def follower_holds() -> bool:
            return await lease_holder(api_client, namespace, lease) == follower.identity

        await eventually(follower_holds, within=MAX_FAILOVER_AFTER_KILL + 10, interval=0.1)
        failover = loop.time() - killed_at
        log.info("leader failover after SIGKILL took %.2f s", failover)
        # The follower waited the dead leader's lease out, and no longer, in its own time.
        taken = acquisition(follower)
        assert taken["previous_holder"] == leader.identity, taken
        assert taken["unchanged_for_seconds"] >= LEASE_DURATION, taken
        # ... and says so on its /metrics once it has written the lease (a state, not a time).
        assert await eventually(lambda: follower.is_leader(lease), what="the follower to lead")
        # ... and the new leader starts its controllers.
        assert await eventually(functools.partial(_serves, follower, gc_series), within=30)
    finally:
        for replica in replicas:
            await stop_replica(replica)


async def test_sigterm_releases_the_lease_for_an_immediate_handover(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    lease, replicas = await two_replicas(cluster_info, namespace, tmp_path)
    try:
        leader = await wait_one_leader(api_client, namespace, lease, replicas)
        follower = next(replica for replica in replicas if replica is not leader)
        loop = asyncio.get_running_loop()
        leader.process.send_signal(signal.SIGTERM)
        stopped_at = loop.time()
        async with asyncio.timeout(30):
            assert await leader.process.wait() == 0
        messages = [entry["message"] for entry in leader.log_entries()]
        assert "shutting down" in messages
        assert "released lease" in messages
        assert messages.index("released lease") < messages.index("shut down")

        async def follower_holds() -> bool:
            return await lease_holder(api_client, namespace, lease) == follower.identity

        await eventually(follower_holds, within=LEASE_DURATION, interval=0.1)
        handover = loop.time() - stopped_at
        log.info("leader handover after SIGTERM took %.2f s", handover)
        # Released, so the follower need not wait out the lease: it took the released lease at
        # its next retry, not the leader's once it looked unchanged for a lease duration.
        taken = acquisition(follower)
        assert taken["previous_holder"] == "", taken
    finally:
        for replica in replicas:
            await stop_replica(replica)


def acquisition(replica: Replica) -> dict[str, Any]:
    """The replica's one "successfully acquired lease" log entry."""
    (entry,) = [e for e in replica.log_entries() if e["message"] == "successfully acquired lease"]
    return entry


async def _serves(replica: Replica, series: str) -> bool:
    """Whether the replica's /metrics has a reconcile counter line containing `series`."""
    ports = replica.ports()
    if ports is None:
        return False
    status, body = await http_get(ports[1], "/metrics")
    return status == 200 and any(
        line.startswith("controller_runtime_reconcile_total{") and series in line
        for line in body.splitlines()
    )


async def _ok(port: int, path: str) -> bool:
    return (await http_get(port, path))[0] == 200
