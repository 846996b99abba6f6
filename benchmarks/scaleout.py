"""Scale-out on the real local control plane: 1,000 pending pods to Running with karpy + kwok.

Karpenter's performance suite ("basic") scales 1,000 pods out and allows < 2 minutes until all
run and < 260 MB of controller memory. This benchmark does the same against karpy: it brings up
a local cluster, installs the CRDs, a KWOKNodeClass and a NodePool, starts `karpy run` as its
own process (so its resident memory can be read from /proc), scales a Deployment to N replicas
and reports the time until every pod runs, the NodeClaims created and karpy's peak RSS.

    .venv/bin/python benchmarks/scaleout.py              # 1,000 pods
    .venv/bin/python benchmarks/scaleout.py --pods 2000 --cpu 500m
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from karpy.apis.crds import CRDS, render_crd
from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.install import apply, install_crds, scale
from karpy.kube.kinds import NODECLAIMS, PODS
from karpy.localcluster import LocalCluster

NAMESPACE = "default"


def _manifests(pods_cpu: str, pods_memory: str) -> tuple[dict[str, Any], ...]:
    nodeclass = {
        "apiVersion": f"{wk.KWOK_GROUP}/v1alpha1",
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
                        "group": wk.KWOK_GROUP,
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


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


async def _running(client: KubeClient) -> int:
    listed = await client.list(PODS, namespace=NAMESPACE)
    return sum(
        1
        for item in listed.items
        if item.obj.metadata.labels.get("app") == "scale"
        and item.obj.status is not None
        and item.obj.status.phase == "Running"
    )


async def _prepare(kubeconfig: Path, *, cpu: str, memory: str) -> dict[str, Any]:
    """Install the CRDs, the KWOKNodeClass, the NodePool and the (empty) Deployment."""
    client = await KubeClient.connect(kubeconfig, request_timeout=30.0)
    try:
        nodeclass, nodepool, deployment = _manifests(cpu, memory)
        async with asyncio.timeout(60):
            await install_crds(client, [render_crd(crd) for crd in CRDS])
            for manifest in (nodeclass, nodepool, deployment):
                await apply(client, manifest)
        return deployment
    finally:
        await client.close()


async def _measure(
    kubeconfig: Path, deployment: dict[str, Any], *, karpy_pid: int, pods: int, limit: float
) -> int:
    """Scale out and sample until every pod runs; print the figures."""
    client = await KubeClient.connect(kubeconfig, request_timeout=30.0)
    try:
        await asyncio.sleep(3)  # karpy's informers list and its leader loops start
        baseline = _rss(karpy_pid)
        started = time.monotonic()
        await scale(client, deployment, pods)
        peak = baseline
        running = 0
        while time.monotonic() - started < limit:
            peak = max(peak, _rss(karpy_pid))
            running = await _running(client)
            if running >= pods:
                break
            await asyncio.sleep(1.0)
        elapsed = time.monotonic() - started
        claims = len((await client.list(NODECLAIMS)).items)
        peak = max(peak, _rss(karpy_pid))
        print(f"pods running          {running}/{pods}")
        print(f"time to all running   {elapsed:.1f} s")
        print(f"nodeclaims created    {claims}")
        print(f"karpy RSS at start    {baseline / 2**20:.0f} MiB")
        print(f"karpy peak RSS        {peak / 2**20:.0f} MiB")
        return 0 if running >= pods else 1
    finally:
        await client.close()


def _start_karpy(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as sink:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "karpy",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--disable-leader-election",
                "--metrics-port",
                "0",
                "--health-probe-port",
                "0",
                "--provider",
                "kwok",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "LOG_LEVEL": "warning"},
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--cpu", default="250m", help="CPU request per pod")
    parser.add_argument("--memory", default="256Mi", help="memory request per pod")
    parser.add_argument("--limit", type=float, default=600.0, help="give up after this many s")
    args = parser.parse_args()
    cluster = LocalCluster("bench-scaleout", detach=False)
    info = cluster.up()
    log = Path(tempfile.gettempdir()) / "karpy-bench-scaleout.log"
    karpy = None
    try:
        deployment = asyncio.run(_prepare(info.kubeconfig, cpu=args.cpu, memory=args.memory))
        karpy = _start_karpy(info.kubeconfig, log)
        code = asyncio.run(
            _measure(
                info.kubeconfig, deployment, karpy_pid=karpy.pid, pods=args.pods, limit=args.limit
            )
        )
        print(f"karpy log             {log}")
        return code
    finally:
        if karpy is not None:
            karpy.terminate()
            karpy.wait(timeout=60)
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
