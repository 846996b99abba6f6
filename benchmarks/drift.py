"""Drift roll on the real local control plane: N nodes, one pod each behind a PDB, all replaced.

Brings up a local cluster, installs the CRDs, a KWOKNodeClass and a NodePool (drift budget
`--budget`, default Karpenter's 10 %), and a Deployment of N pause pods with hostname
anti-affinity (one per node) behind a PodDisruptionBudget of `maxUnavailable: 1`. Starts
`karpy run` (kwok provider) as its own process, waits until every pod runs, then changes the
NodePool's template labels so that every node drifts, and polls every half second until every
pod runs on a new node and no old node is left. Reports the wall time of the roll, the fewest
Ready pods seen (the PDB allows N-1), the NodeClaims created during the roll, and whether any old
node started deleting before a replacement was Initialized.

    .venv/bin/python benchmarks/drift.py               # 20 nodes
    .venv/bin/python benchmarks/drift.py --nodes 10 --budget 50%
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from scaleout import NAMESPACE, _connect, _start_karpy
from scaleout import _manifests as scaleout_manifests

from karpy.apis.crds import all_crds, render_crd
from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.install import apply, install_crds, scale
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.localcluster import LocalCluster

APP = "drift"


def _manifests(budget: str) -> tuple[dict[str, Any], ...]:
    """scaleout.py's KWOKNodeClass and NodePool (with the drift budget), its Deployment made one
    pod per node, and a PDB of maxUnavailable 1 over it."""
    nodeclass, nodepool, deployment = scaleout_manifests("500m", "256Mi")
    nodepool["spec"]["disruption"]["budgets"] = [{"nodes": budget}]
    deployment["metadata"]["name"] = APP
    spec = deployment["spec"]
    spec["selector"] = {"matchLabels": {"app": APP}}
    spec["template"]["metadata"]["labels"] = {"app": APP}
    spec["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": APP}}, "topologyKey": wk.LABEL_HOSTNAME}
            ]
        }
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}},
    }
    return nodeclass, nodepool, deployment, pdb


def _ready_pods(client_pods: list[Any]) -> list[Any]:
    return [
        p
        for p in client_pods
        if p.metadata.labels.get("app") == APP
        and p.metadata.deletion_timestamp is None
        and p.status.phase == "Running"
        and any(c.type == "Ready" and c.status.value == "True" for c in p.status.conditions)
    ]


async def _pods(client: KubeClient) -> list[Any]:
    return [i.obj for i in (await client.list(PODS, namespace=NAMESPACE)).items]


async def _roll(kubeconfig: Path, *, nodes: int, budget: str, limit: float) -> int:
    client = await _connect(kubeconfig)
    try:
        nodeclass, nodepool, deployment, pdb = _manifests(budget)
        async with asyncio.timeout(60):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
            for manifest in (nodeclass, nodepool, deployment, pdb):
                await apply(client, manifest)
        await scale(client, deployment, nodes)
        started = time.monotonic()
        while len(_ready_pods(await _pods(client))) < nodes:
            if time.monotonic() - started > limit:
                print("scale-out did not finish")
                return 1
            await asyncio.sleep(0.5)
        old = {i.obj.metadata.name for i in (await client.list(NODES)).items}
        before = {i.obj.metadata.name for i in (await client.list(NODECLAIMS)).items}
        print(f"{nodes} pods on {len(old)} nodes after {time.monotonic() - started:.1f} s")
        await client.merge_patch(
            NODEPOOLS,
            "bench",
            {"spec": {"template": {"metadata": {"labels": {"intent": "bench", "rev": "2"}}}}},
        )
        rolled = time.monotonic()
        fewest = nodes
        early: set[str] = set()
        initialized: dict[str, datetime] = {}
        while True:
            pods = await _pods(client)
            ready = _ready_pods(pods)
            fewest = min(fewest, len(ready))
            claims = [i.obj for i in (await client.list(NODECLAIMS)).items]
            for claim in claims:
                for condition in claim.status.conditions:
                    if condition.type == "Initialized" and condition.status.value == "True":
                        initialized[claim.metadata.name or ""] = condition.last_transition_time
            for claim in claims:
                name = claim.metadata.name or ""
                deleted = claim.metadata.deletion_timestamp
                command = claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_COMMAND)
                if name not in before or deleted is None or not command:
                    continue
                made = [
                    c.metadata.name or ""
                    for c in claims
                    if c.metadata.annotations.get(wk.ANNOTATION_REPLACEMENT_FOR) == command
                ]
                # Server-side times: each replacement Initialized no later than the deletion.
                if any(m not in initialized or initialized[m] > deleted for m in made):
                    early.add(name)
            current = {i.obj.metadata.name for i in (await client.list(NODES)).items}
            moved = not {p.spec.node_name for p in ready} & old
            if len(ready) == nodes and moved and not current & old:
                break
            if time.monotonic() - rolled > limit:
                print("drift roll did not finish")
                return 1
            await asyncio.sleep(0.5)
        after = {i.obj.metadata.name for i in (await client.list(NODECLAIMS)).items}
        print(f"drift roll of {len(old)} nodes    {time.monotonic() - rolled:.1f} s")
        print(f"fewest ready pods       {fewest} of {nodes} (PDB allows {nodes - 1})")
        print(f"nodeclaims created      {len(after - before)}")
        print(f"deleted before replaced {len(early)}")
        return 0
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--budget", default="10%", help="the NodePool's disruption budget")
    parser.add_argument("--limit", type=float, default=900.0, help="give up after this many s")
    args = parser.parse_args()
    cluster = LocalCluster("bench-drift", detach=False)
    info = cluster.up()
    log = Path(tempfile.gettempdir()) / "karpy-bench-drift.log"
    karpy = _start_karpy(info.kubeconfig, log)
    try:
        return asyncio.run(
            _roll(info.kubeconfig, nodes=args.nodes, budget=args.budget, limit=args.limit)
        )
    finally:
        karpy.terminate()
        karpy.wait(timeout=60)
        print(f"karpy log               {log}")
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
