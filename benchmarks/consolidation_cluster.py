"""Karpenter's consolidation performance scenario on the real local control plane (kwok provider).

Karpenter's perf suite scales a Deployment to 1,000 pods, then down to 700, and waits (up to 20
minutes) until consolidation settles. This benchmark does the same against karpy: it brings up a
local cluster, installs the CRDs, scaleout.py's KWOKNodeClass, NodePool (made
`WhenEmptyOrUnderutilized` with `consolidateAfter: 0s` and Karpenter's default budget of 10 %)
and Deployment, starts `karpy run` (kwok provider, default options: 15 s validation delay) as
its own process, scales out to `--pods` and waits until every pod runs, then scales to
`--down`. It polls NodeClaims every second; consolidation has settled once no NodeClaim was
created or started deleting for `--quiet` seconds (60) while every pod runs. Reported: the time
from the scale-down until the last change, the NodeClaims created and removed, the nodes and
their $/h (the kwok catalog's prices) after the scale-out and at the end, and the LP lower bound
on any packing of the remaining pods over the kwok catalog (the scheduling benchmark's bound).

    .venv/bin/python benchmarks/consolidation_cluster.py                # 1,000 -> 700 pods
    .venv/bin/python benchmarks/consolidation_cluster.py --pods 200 --down 140 --quiet 30
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scaleout import NAMESPACE, _connect, _start_karpy
from scaleout import _manifests as scaleout_manifests
from scheduling import _plain, lower_bound

from karpy.apis.crds import all_crds, render_crd
from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.install import apply, install_crds, scale
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.localcluster import LocalCluster
from karpy_kwok.catalog import shipped_instance_types

APP = "scale"


async def _running(client: KubeClient) -> int:
    listed = await client.list(PODS, namespace=NAMESPACE)
    return sum(
        1
        for item in listed.items
        if item.obj.metadata.labels.get("app") == APP
        and item.obj.metadata.deletion_timestamp is None
        and item.obj.status is not None
        and item.obj.status.phase == "Running"
    )


async def _claims(client: KubeClient) -> tuple[frozenset[str], frozenset[str]]:
    """NodeClaim names, and those deleting."""
    listed = await client.list(NODECLAIMS)
    names = frozenset(i.obj.metadata.name or "" for i in listed.items)
    deleting = frozenset(
        i.obj.metadata.name or "" for i in listed.items if i.obj.metadata.deletion_timestamp
    )
    return names, deleting


async def _fleet(client: KubeClient) -> tuple[int, float]:
    """karpy's nodes and their price per hour (kwok catalog)."""
    prices = {
        (it.name, o.zone, o.capacity_type): o.price
        for it in shipped_instance_types()
        for o in it.offerings
    }
    listed = await client.list(NODES)
    count, total = 0, 0.0
    for item in listed.items:
        labels = item.obj.metadata.labels
        if wk.LABEL_NODEPOOL not in labels or item.obj.metadata.deletion_timestamp:
            continue
        count += 1
        total += prices.get(
            (
                labels.get(wk.LABEL_INSTANCE_TYPE, ""),
                labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
                labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            ),
            0.0,
        )
    return count, total


async def _why(client: KubeClient) -> list[str]:
    """Each remaining node's type and pods, and the last Unconsolidatable reason karpy gave."""
    reasons: dict[str, str] = {}
    events = await client.request(
        "GET", "/api/v1/events", query=[("fieldSelector", "reason=Unconsolidatable")]
    )
    for event in sorted(events.get("items", []), key=lambda e: e.get("lastTimestamp") or ""):
        involved = event.get("involvedObject", {})
        if involved.get("kind") == "Node":
            reasons[involved.get("name", "")] = event.get("message", "")
    pods: dict[str, int] = {}
    for item in (await client.list(PODS, namespace=NAMESPACE)).items:
        if item.obj.spec.node_name and item.obj.metadata.deletion_timestamp is None:
            pods[item.obj.spec.node_name] = pods.get(item.obj.spec.node_name, 0) + 1
    lines = []
    for item in (await client.list(NODES)).items:
        name = item.obj.metadata.name or ""
        labels = item.obj.metadata.labels
        if wk.LABEL_NODEPOOL not in labels:
            continue
        lines.append(
            f"  {name} {labels.get(wk.LABEL_INSTANCE_TYPE)} {pods.get(name, 0)} pods:"
            f" {reasons.get(name, '(no Unconsolidatable event)')}"
        )
    return sorted(lines)


async def _run(kubeconfig: Path, args: argparse.Namespace) -> int:
    nodeclass, nodepool, deployment = scaleout_manifests(args.cpu, args.memory)
    nodepool["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }
    client = await _connect(kubeconfig)
    log = Path(tempfile.gettempdir()) / "karpy-bench-consolidation.log"
    karpy = None
    try:
        async with asyncio.timeout(60):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
            for manifest in (nodeclass, nodepool, deployment):
                await apply(client, manifest)
        karpy = _start_karpy(kubeconfig, log)
        began = time.monotonic()
        await scale(client, deployment, args.pods)
        while await _running(client) < args.pods:
            if time.monotonic() - began > args.limit:
                print("scale-out did not finish within the limit")
                return 1
            await asyncio.sleep(1.0)
        print(f"scale-out: {args.pods} pods running after {time.monotonic() - began:.0f} s")
        nodes, price = await _fleet(client)
        print(f"after scale-out: {nodes} nodes, {price:.4f} $/h")
        first, _ = await _claims(client)
        seen = set(first)
        await scale(client, deployment, args.down)
        start = time.monotonic()
        last_change = start
        state = await _claims(client)
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            current = await _claims(client)
            seen |= current[0]
            if current != state:
                state, last_change = current, now
            settled = now - last_change >= args.quiet and not state[1]
            if settled and await _running(client) == args.down:
                break
            if now - start > args.limit:
                print(f"consolidation did not settle within {args.limit:.0f} s")
                break
        nodes_after, price_after = await _fleet(client)
        pods = [_plain(i, args.cpu, args.memory) for i in range(args.down)]
        bound = lower_bound(pods, shipped_instance_types()).value
        print(f"settled {last_change - start:.0f} s after the scale to {args.down}")
        print(f"nodeclaims created during consolidation: {len(seen - first)}")
        print(f"nodeclaims removed: {len(first - state[0])}")
        print(f"at the end: {nodes_after} nodes, {price_after:.4f} $/h")
        print(f"LP bound for {args.down} pods: {bound:.4f} $/h ({price_after / bound - 1:+.1%})")
        for line in await _why(client):
            print(line)
        print(f"karpy log: {log}")
        return 0
    finally:
        if karpy is not None:
            karpy.terminate()
            karpy.wait(timeout=60)
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--down", type=int, default=700)
    parser.add_argument("--cpu", default="250m", help="CPU request per pod")
    parser.add_argument("--memory", default="256Mi", help="memory request per pod")
    parser.add_argument("--quiet", type=float, default=60.0, help="settled after this many s")
    parser.add_argument("--limit", type=float, default=1200.0, help="give up after this many s")
    args = parser.parse_args()
    cluster = LocalCluster("bench-consolidation", detach=False)
    info = cluster.up()
    try:
        return asyncio.run(_run(info.kubeconfig, args))
    finally:
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
