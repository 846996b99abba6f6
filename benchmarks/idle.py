"""karpy at rest: CPU and memory on a settled fleet of kwok nodes, compared across checkouts.

A controller that does nothing should cost nothing, whatever the fleet's size: Karpenter's users
size it for large clusters (kubernetes-sigs/karpenter#3152 reports ~6 CPUs needed) and the issue
asks < 0.05 cores once a fleet has settled. This brings up a local cluster, makes `--nodes` kwok
nodes (one pod per node: a Deployment whose pods are anti-affine by hostname, spread over
`--pools` NodePools), waits until every pod is Running and nothing has changed for `--quiet`
seconds, then measures each karpy checkout named by `--roots` in turn on that same fleet: start
it, wait until it is ready and has been up `--settle` seconds, read its CPU seconds over
`--window` seconds of rest, and stop it. Several roots in one run compare a change against the
code before it on one fleet and one machine load (each root is measured `--rounds` times,
alternating, so a change in the machine's load falls on both). With `--profile DIR` each
measurement's window is also sampled by py-spy (when it is on the PATH) into a flame graph.

    .venv/bin/python benchmarks/idle.py --nodes 100 --roots /tmp/before,.
    .venv/bin/python benchmarks/idle.py --nodes 500 --pools 50 --roots . --profile /tmp/idle
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import attrs
from perf_suite import (  # benchmarks/ is the script's folder
    CLOCK,
    NAMESPACE,
    SMALL,
    App,
    _connect,
    _status,
    cpu_seconds,
    deployment,
    nodeclass,
    nodepool,
    rss_bytes,
    snapshot,
    spawn_karpy,
)

from karpy.apis.crds import all_crds, render_crd
from karpy.kube.client import KubeClient
from karpy.kube.install import apply, install_crds, scale
from karpy.localcluster import ClusterInfo, LocalCluster, audit


@attrs.frozen
class Rest:
    """One checkout measured at rest."""

    root: str
    cores: float
    rss_mb: float
    requests_per_s: float
    load: float


def start(root: Path, kubeconfig: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`karpy run` (kwok provider) from the checkout at `root`; the process and its health port."""
    return spawn_karpy(root, kubeconfig, log)


async def ready(process: subprocess.Popen[bytes], port: int, within: float = 300.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            msg = f"karpy exited with {process.returncode} before it was ready"
            raise RuntimeError(msg)
        with contextlib.suppress(OSError):
            if await asyncio.to_thread(_status, f"http://127.0.0.1:{port}/readyz") == 200:
                return
        await asyncio.sleep(1.0)
    msg = f"karpy was not ready within {within:.0f} s"
    raise TimeoutError(msg)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


async def settle(client: KubeClient, pods: int, quiet: float, within: float) -> int:
    """Wait until `pods` suite pods are Running (Ready or not: under load kwok's leases lapse
    and pods flap unready, which is no change karpy acts on) and the NodeClaims and disrupting
    nodes have not changed for `quiet` seconds; the number of karpy's nodes."""
    deadline = time.monotonic() + within
    last: tuple[frozenset[str], frozenset[str]] | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        seen = await snapshot(client, NAMESPACE)
        running = sum(1 for p in seen.pods if (p.get("status") or {}).get("phase") == "Running")
        key = (seen.claims, seen.disrupting)
        if key != last or running < pods:
            last, since = key, time.monotonic()
        elif time.monotonic() - since >= quiet:
            print(f"settled: {running} pods Running on {len(seen.nodes)} nodes", flush=True)
            return len(seen.nodes)
        print(f"  {running}/{pods} Running, {len(seen.claims)} claims", flush=True)
        await asyncio.sleep(10.0)
    msg = f"fleet not settled within {within:.0f} s"
    raise TimeoutError(msg)


async def build(info: ClusterInfo, args: argparse.Namespace, root: Path) -> None:
    """The fleet: CRDs, NodePools, the Deployment scaled out by the first root's karpy."""
    client = await _connect(info.kubeconfig)
    try:
        async with asyncio.timeout(120):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
        await apply(client, nodeclass())
        for index in range(args.pools):
            await apply(client, nodepool(f"idle-{index:03d}", consolidate_after="30s"))
        per_pool = -(-args.nodes // args.pools)
        apps = [
            App(name=f"idle-{index:03d}", cpu=SMALL[0], memory=SMALL[1], anti_affinity=True)
            for index in range(args.pools)
        ]
        for app in apps:
            await apply(client, deployment(app, NAMESPACE))
        process, port = start(root, info.kubeconfig, Path(tempfile.gettempdir()) / "idle-b.log")
        try:
            await ready(process, port)
            for app in apps:
                await scale(client, deployment(app, NAMESPACE), per_pool)
            await settle(client, per_pool * args.pools, args.quiet, args.within)
        finally:
            stop(process)
    finally:
        await client.close()


async def measure(info: ClusterInfo, root: Path, args: argparse.Namespace, tag: str) -> Rest:
    log = Path(tempfile.gettempdir()) / f"idle-{tag}.log"
    process, port = start(root, info.kubeconfig, log)
    try:
        await ready(process, port)
        await asyncio.sleep(args.settle)
        mark = audit.lines(info.audit_log)
        began, cpu = time.monotonic(), cpu_seconds(process.pid)
        opened = CLOCK.now()
        spy = None
        if args.profile and shutil.which("py-spy"):
            args.profile.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen(  # noqa: ASYNC220 (started, not awaited; waited on below)
                [
                    "py-spy",
                    "record",
                    "--pid",
                    str(process.pid),
                    "--duration",
                    str(int(args.window)),
                    "--format",
                    "raw",
                    "-o",
                    str(args.profile / f"{tag}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        await asyncio.sleep(args.window)
        used, seconds = cpu_seconds(process.pid) - cpu, time.monotonic() - began
        closed = CLOCK.now()
        rss = rss_bytes(process.pid)
        if spy is not None:
            await asyncio.to_thread(spy.wait, 60)
    finally:
        stop(process)
    requests = [r for r in audit.karpy_requests(info.audit_log, skip=mark) if r.verb != "watch"]
    within = [r for r in requests if opened <= r.received < closed]
    return Rest(
        root=str(root),
        cores=used / seconds,
        rss_mb=rss / 1e6,
        requests_per_s=len(within) / seconds,
        load=os.getloadavg()[0],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pools", type=int, default=1)
    parser.add_argument("--roots", default=".", help="comma-separated karpy checkouts")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--window", type=float, default=120.0, help="seconds of rest measured")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds after ready")
    parser.add_argument("--quiet", type=float, default=60.0)
    parser.add_argument("--within", type=float, default=1800.0)
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    roots = [Path(r).resolve() for r in args.roots.split(",")]
    cluster = LocalCluster(f"bench-idle-{os.getpid()}", detach=False)
    info = cluster.up()
    results: list[Rest] = []
    try:
        asyncio.run(build(info, args, roots[-1]))
        for round_ in range(args.rounds):
            for index, root in enumerate(roots):
                rest = asyncio.run(measure(info, root, args, f"{index}-{round_}"))
                print(
                    f"{rest.root}: {rest.cores:.4f} cores, {rest.rss_mb:.0f} MB, "
                    f"{rest.requests_per_s:.2f} req/s, load {rest.load:.1f}",
                    flush=True,
                )
                results.append(rest)
    finally:
        cluster.down()
    print(f"\n{args.nodes} nodes, {args.pools} NodePools, {args.window:.0f} s windows")
    print("| checkout | cores | RSS MB | karpy req/s | load |")
    print("|---|---:|---:|---:|---:|")
    for rest in results:
        print(
            f"| {rest.root} | {rest.cores:.4f} | {rest.rss_mb:.0f} | "
            f"{rest.requests_per_s:.2f} | {rest.load:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
