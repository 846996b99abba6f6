"""SIGKILL karpy while a drift replacement is launching, start it again: the command it left on
the API server is finished — the old node deleted only after its replacement is Initialized —
with no orphaned taint and no orphaned replacement. karpy runs as a real `karpy run` process
(kwok provider) so the kill is a real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    claim_annotations,
    create_deployment,
    deployment,
    drift_slowly,
    fresh_nodepool,
    launching_replacements,
    nodeclaims,
    running,
)
from tests.support.marks import CHAIN_B
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), CHAIN_B]


@contextlib.asynccontextmanager
async def _karpy(cluster_info: ClusterInfo, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m karpy run` (kwok, no leader election) until the block ends; killed then."""
    with log.open("ab") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "karpy",
            "run",
            "--kubeconfig",
            str(cluster_info.kubeconfig),
            "--disable-leader-election",
            "--metrics-port",
            "0",
            "--health-probe-port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--batch-idle-duration",
            "200ms",
            "--batch-max-duration",
            "2s",
            stdout=sink,
            stderr=sink,
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_a_command_interrupted_by_sigkill_is_finished_after_restart(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    pool, labels = await fresh_nodepool(api_client, "kill")
    await create_deployment(
        api_client,
        namespace,
        deployment("victim", node_selector=labels, replicas=1, cpu="500m", memory="256Mi"),
    )
    log = tmp_path / "karpy.log"
    async with _karpy(cluster_info, log) as first:
        (pod,) = await eventually(running(api_client, namespace, "victim", 1), within=120)
        (original,) = await nodeclaims(api_client, pool)
        old = original["metadata"]["name"]
        # Replacements now take a while to register, leaving time to kill mid-launch.
        await drift_slowly(api_client, pool, labels)
        (replacement,) = await eventually(
            launching_replacements(api_client, pool), within=120, what="a replacement launching"
        )
        first.kill()
        await first.wait()

    claims = {c["metadata"]["name"]: c for c in await nodeclaims(api_client, pool)}
    assert claims[old]["metadata"].get("deletionTimestamp") is None, (
        "deleted before its replacement"
    )
    assert wk.ANNOTATION_DISRUPTION_COMMAND in claim_annotations(claims[old])

    async with _karpy(cluster_info, log):

        async def finished() -> bool:
            # The command the first process left is finished or rolled back; either way the
            # node is still drifted, so drift goes on until the old node is gone.
            current = await nodeclaims(api_client, pool)
            names = {c["metadata"]["name"] for c in current}
            return old not in names and all(
                not (
                    {wk.ANNOTATION_REPLACEMENT_FOR, wk.ANNOTATION_DISRUPTION_COMMAND}
                    & claim_annotations(c).keys()
                )
                for c in current
            )

        await eventually(finished, within=180, interval=1.0, what="the command finished")
        (moved,) = await eventually(running(api_client, namespace, "victim", 1), within=60)
        assert moved.metadata.uid != pod.metadata.uid

        async def one_claim() -> list[dict[str, Any]]:
            current = await nodeclaims(api_client, pool)
            live = [c for c in current if not c["metadata"].get("deletionTimestamp")]
            return live if len(current) == 1 else []

        # No orphaned replacement: the pool ends with the one NodeClaim its pod runs on (the
        # replacement seen at the kill, or the one a rolled-back command's successor made).
        (claim,) = await eventually(one_claim, within=60, what="one NodeClaim left")
        assert claim["status"].get("nodeName") == moved.spec.node_name
        _ = replacement
        nodes = await core.list_node(label_selector=f"{wk.LABEL_NODEPOOL}={pool}")
        alive = [n for n in nodes.items if n.metadata.deletion_timestamp is None]
        tainted = [
            n.metadata.name
            for n in alive
            if any(t.key == wk.TAINT_DISRUPTED_KEY for t in n.spec.taints or [])
        ]
        assert tainted == [], "orphaned disrupted taint"
