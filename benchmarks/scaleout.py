"""Scale-out on the real local control plane: 1,000 pending pods to Running with karpy + kwok.

Karpenter's performance suite ("basic") scales 1,000 pods out and allows < 2 minutes until all
run and < 260 MB of controller memory. This benchmark does the same against karpy: it brings up
a local cluster, installs the CRDs, a KWOKNodeClass and a NodePool, starts `karpy run` as its
own process (so its resident memory and CPU time can be read from /proc), scales a Deployment to
N replicas and reports the time until every pod runs, the NodeClaims created, karpy's peak RSS
and CPU seconds. It then scales back to 0 and waits until karpy has removed every node.

What karpy asked of the apiserver comes from the apiserver's own audit log, not from karpy: its
requests (User-Agent ``karpy/<version>``; the benchmark's own client names itself differently)
are counted by verb and by resource for each phase — startup (informers list and watch),
scale-out, scale-in. A watch is logged only when it ends, so karpy is stopped before the log is
read and requests are sorted into phases by when the apiserver received them.

    .venv/bin/python benchmarks/scaleout.py              # 1,000 pods, then back to 0
    .venv/bin/python benchmarks/scaleout.py --pods 2000 --cpu 500m --no-scale-in
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
from perf_suite import (  # benchmarks/ is the script's folder
    ROOT,
    cpu_seconds,
    rss_bytes,
    spawn_karpy,
)

from karpy.apis.crds import all_crds, render_crd
from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.install import apply, install_crds, scale
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.localcluster import LocalCluster, audit
from karpy.runtime.clock import SystemClock
from karpy_kwok.apis import labels as kwoklabels

NAMESPACE = "default"
BENCH_USER_AGENT = "karpy-scaleout-benchmark"
"""The benchmark's own client: its polling must not count as karpy's requests."""
VERBS = ("list", "watch", "get", "create", "patch", "update", "delete")
CLOCK = SystemClock()


@attrs.frozen
class Phase:
    """A stretch of the run, by wall clock, and karpy's CPU seconds at its ends."""

    name: str
    start: datetime
    end: datetime
    cpu_start: float
    cpu_end: float


def _manifests(pods_cpu: str, pods_memory: str) -> tuple[dict[str, Any], ...]:
    nodeclass = {
        "apiVersion": f"{kwoklabels.KWOK_GROUP}/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "bench"},
    }
    nodepool = {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": "bench"},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": "bench"}},
                "spec": {
                    "requirements": [
                        {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]}
                    ],
                    "nodeClassRef": {
                        "group": kwoklabels.KWOK_GROUP,
                        "kind": "KWOKNodeClass",
                        "name": "bench",
                    },
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "scale", "namespace": NAMESPACE},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "scale"}},
            "template": {
                "metadata": {"labels": {"app": "scale"}},
                "spec": {
                    "nodeSelector": {"intent": "bench"},
                    "containers": [
                        {
                            "name": "pause",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": pods_cpu, "memory": pods_memory}},
                        }
                    ],
                },
            },
        },
    }
    return nodeclass, nodepool, deployment


async def _running(client: KubeClient) -> int:
    listed = await client.list(PODS, namespace=NAMESPACE)
    return sum(
        1
        for item in listed.items
        if item.obj.metadata.labels.get("app") == "scale"
        and item.obj.status is not None
        and item.obj.status.phase == "Running"
    )


async def _connect(kubeconfig: Path) -> KubeClient:
    client = await KubeClient.connect(kubeconfig, request_timeout=30.0)
    client.sdk_client.user_agent = BENCH_USER_AGENT
    return client


async def _prepare(
    kubeconfig: Path, *, cpu: str, memory: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Install the CRDs, the KWOKNodeClass, the NodePool and the (empty) Deployment."""
    client = await _connect(kubeconfig)
    try:
        nodeclass, nodepool, deployment = _manifests(cpu, memory)
        async with asyncio.timeout(60):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
            for manifest in (nodeclass, nodepool, deployment):
                await apply(client, manifest)
        return nodepool, deployment
    finally:
        await client.close()


async def _karpy_nodes(client: KubeClient) -> int:
    listed = await client.list(NODES)
    return sum(1 for item in listed.items if wk.LABEL_NODEPOOL in item.obj.metadata.labels)


async def _measure(
    kubeconfig: Path,
    nodepool: dict[str, Any],
    deployment: dict[str, Any],
    *,
    karpy_pid: int,
    pods: int,
    limit: float,
    scale_in: bool,
) -> tuple[int, list[Phase]]:
    """Scale out and sample until every pod runs, then (optionally) back to 0 until the nodes
    are gone; print the figures and return the phases for the audit count."""
    client = await _connect(kubeconfig)
    phases: list[Phase] = []
    try:
        await asyncio.sleep(3)  # karpy's informers list and its leader loops start
        baseline = rss_bytes(karpy_pid)
        wall, cpu = CLOCK.now(), cpu_seconds(karpy_pid)
        started = time.monotonic()
        await scale(client, deployment, pods)
        peak = baseline
        running = 0
        while time.monotonic() - started < limit:
            peak = max(peak, rss_bytes(karpy_pid))
            running = await _running(client)
            if running >= pods:
                break
            await asyncio.sleep(1.0)
        elapsed = time.monotonic() - started
        phases.append(Phase("scale-out", wall, CLOCK.now(), cpu, cpu_seconds(karpy_pid)))
        claims = len((await client.list(NODECLAIMS)).items)
        peak = max(peak, rss_bytes(karpy_pid))
        print(f"pods running          {running}/{pods}")
        print(f"time to all running   {elapsed:.1f} s")
        print(f"nodeclaims created    {claims}")
        print(f"karpy RSS at start    {baseline / 2**20:.0f} MiB")
        print(f"karpy peak RSS        {peak / 2**20:.0f} MiB")
        print(f"karpy CPU scale-out   {phases[-1].cpu_end - phases[-1].cpu_start:.1f} s")
        if running < pods:
            return 1, phases
        if not scale_in:
            return 0, phases
        # Empty nodes go as soon as they are empty: the scale-out ran with "Never" so that no
        # node went while pods were still arriving.
        emptiness = {**nodepool["spec"]["disruption"], "consolidateAfter": "0s"}
        await apply(client, {**nodepool, "spec": {**nodepool["spec"], "disruption": emptiness}})
        wall, cpu = CLOCK.now(), cpu_seconds(karpy_pid)
        started = time.monotonic()
        await scale(client, deployment, 0)
        nodes = claims
        while time.monotonic() - started < limit:
            peak = max(peak, rss_bytes(karpy_pid))
            nodes = await _karpy_nodes(client)
            claims = len((await client.list(NODECLAIMS)).items)
            if nodes == 0 and claims == 0:
                break
            await asyncio.sleep(1.0)
        elapsed = time.monotonic() - started
        phases.append(Phase("scale-in", wall, CLOCK.now(), cpu, cpu_seconds(karpy_pid)))
        print(f"nodes left            {nodes} (nodeclaims {claims})")
        print(f"time to nodes gone    {elapsed:.1f} s")
        print(f"karpy peak RSS        {peak / 2**20:.0f} MiB (both phases)")
        print(f"karpy CPU scale-in    {phases[-1].cpu_end - phases[-1].cpu_start:.1f} s")
        return (0 if nodes == 0 and claims == 0 else 1), phases
    finally:
        await client.close()


def _report_requests(log: Path, phases: list[Phase]) -> None:
    """Karpy's requests as the apiserver audited them, by verb and by resource, per phase."""
    requests = audit.karpy_requests(log)
    print(f"karpy requests        {len(requests)} in all (audit log {log})")
    for phase in phases:
        within = [r for r in requests if phase.start <= r.received < phase.end]
        verbs = audit.count_by_verb(within)
        others = sorted(set(verbs) - set(VERBS))
        seconds = (phase.end - phase.start).total_seconds()
        print(
            f"\n{phase.name}: {len(within)} requests, {seconds:.1f} s, "
            f"karpy CPU {phase.cpu_end - phase.cpu_start:.1f} s"
        )
        print("  by verb     " + "  ".join(f"{verb} {verbs[verb]}" for verb in (*VERBS, *others)))
        by_resource = Counter((r.resource, r.verb) for r in within)
        for resource in sorted({resource for resource, _ in by_resource}):
            counts = "  ".join(
                f"{verb} {by_resource[resource, verb]}"
                for verb in (*VERBS, *others)
                if by_resource[resource, verb]
            )
            print(f"  {resource or '(none)':<28}{counts}")


def _start_karpy(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    """`karpy run` (kwok provider) from this checkout, its output in `log`."""
    process, _ = spawn_karpy(ROOT, kubeconfig, log)
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--cpu", default="250m", help="CPU request per pod")
    parser.add_argument("--memory", default="256Mi", help="memory request per pod")
    parser.add_argument("--limit", type=float, default=600.0, help="give up after this many s")
    parser.add_argument(
        "--no-scale-in", action="store_true", help="stop once every pod runs; skip the 0 scale"
    )
    args = parser.parse_args()
    cluster = LocalCluster("bench-scaleout", detach=False)
    info = cluster.up()
    log = Path(tempfile.gettempdir()) / "karpy-bench-scaleout.log"
    karpy = None
    try:
        nodepool, deployment = asyncio.run(
            _prepare(info.kubeconfig, cpu=args.cpu, memory=args.memory)
        )
        launched = CLOCK.now()
        karpy = _start_karpy(info.kubeconfig, log)
        code, phases = asyncio.run(
            _measure(
                info.kubeconfig,
                nodepool,
                deployment,
                karpy_pid=karpy.pid,
                pods=args.pods,
                limit=args.limit,
                scale_in=not args.no_scale_in,
            )
        )
        # Startup: from launch until the scale request, counted from the CPU karpy had then.
        phases.insert(0, Phase("startup", launched, phases[0].start, 0.0, phases[0].cpu_start))
        cpu_total = cpu_seconds(karpy.pid)
        # Stop karpy first: the apiserver logs a watch only when it ends.
        karpy.terminate()
        karpy.wait(timeout=60)
        karpy = None
        time.sleep(1)
        print(f"karpy CPU in all      {cpu_total:.1f} s (until stopped)")
        print(f"karpy log             {log}")
        # The cluster's state (and its audit log) goes with it; keep a copy to look into.
        kept = shutil.copy(info.audit_log, log.with_name("karpy-bench-scaleout-audit.log"))
        _report_requests(Path(kept), phases)
        return code
    finally:
        if karpy is not None:
            karpy.terminate()
            karpy.wait(timeout=60)
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
