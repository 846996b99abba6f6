"""Only informers list: a whole scale-up and scale-down, counted from the apiserver's audit log.

karpy runs as `karpy run` does (kwok provider) while a hostname anti-affinity Deployment goes to
four replicas, so four NodeClaims launch, register and initialize, and back to zero, so
Emptiness deletes them and termination drains and removes their Nodes. The apiserver audits
every request (`karpy.localcluster.audit`, karpy's identified by its User-Agent); afterwards:

- every `list` karpy made is an informer's list, as karpy itself counted them
  (`karpy_watch_lists_total`: once per informed kind at start, again only after a watch
  expired or broke). None scales with the number of reconciles, of which there are many more;
  the kwok provider's `CloudProvider.get()` and `list()` read its "instances", the Nodes, from
  the same cluster view.
- no reconcile GETs a Node, a NodeClaim or a Pod.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo, audit
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    is_ready,
    no_nodeclaims,
    no_pods,
    nodeclaims,
    nodes_gone,
    running,
    running_daemon,
    scale,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

REPLICAS = 4
PLURALS = {
    "Node": "nodes",
    "Pod": "pods",
    "NodeClaim": "nodeclaims",
    "NodePool": "nodepools",
    "NodeOverlay": "nodeoverlays",
    "DaemonSet": "daemonsets",
    "PersistentVolume": "persistentvolumes",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "StorageClass": "storageclasses",
    "VolumeAttachment": "volumeattachments",
    "KWOKNodeClass": "kwoknodeclasses",
    "Provisioner": "provisioners",
    "PodDisruptionBudget": "poddisruptionbudgets",
}
"""The kinds karpy informs with the kwok provider (the provider's own KWOKNodeClass, and the
legacy controller's v1alpha5 Provisioners among them), by the resource the apiserver audits
them under."""


def _samples(text: str, metric: str) -> list[tuple[dict[str, str], float]]:
    """The samples of `metric` in Prometheus text exposition, with their labels."""
    found = []
    for match in re.finditer(rf"^{metric}\{{([^}}]*)\}} (\S+)$", text, flags=re.MULTILINE):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        found.append((labels, float(match.group(2))))
    return found


async def test_a_scale_up_and_down_lists_only_through_informers(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    log = cluster_info.audit_log
    pool, labels = await fresh_nodepool(api_client, "read", consolidate_after="2s")
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "inflate"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    body = deployment("inflate", node_selector=labels, cpu="100m", memory="64Mi", affinity=apart)
    await create_deployment(api_client, namespace, body)
    mark = audit.lines(log)

    async def ready_claims() -> list[dict[str, Any]] | None:
        claims = [c for c in await nodeclaims(api_client, pool) if is_ready(c)]
        return claims if len(claims) == REPLICAS else None

    async with running_daemon(cluster_info) as components:
        async with asyncio.timeout(30):
            await components.state.wait_synced()
        await scale(api_client, namespace, "inflate", REPLICAS)
        pods = await eventually(running(api_client, namespace, "inflate", REPLICAS), within=60)
        nodes = {p.spec.node_name for p in pods}
        assert len(nodes) == REPLICAS
        await eventually(ready_claims, within=30)
        await scale(api_client, namespace, "inflate", 0)
        await eventually(lambda: no_pods(api_client, namespace, "inflate"), within=30)
        await eventually(lambda: no_nodeclaims(api_client, pool), within=60)
        await eventually(lambda: nodes_gone(api_client, nodes), within=30)
        metrics = components.telemetry.prometheus_text()

    assert log.exists(), f"the apiserver wrote no audit log at {log}"
    requests = audit.karpy_requests(log, skip=mark)
    assert requests, "karpy's requests (User-Agent karpy/<version>) are in the audit log"

    informer_lists = {
        PLURALS[labels["kind"]]: int(value)
        for labels, value in _samples(metrics, "karpy_watch_lists_total")
    }
    assert set(informer_lists) == set(PLURALS.values())
    reconciles = Counter[str]()
    for labels, value in _samples(metrics, "controller_runtime_reconcile_total"):
        reconciles[labels["controller"]] += int(value)
    # Garbage collection asked the provider for its instances (kwok: the Nodes) at least once.
    assert reconciles["nodeclaim.garbagecollection"] >= 1, reconciles
    # Many reconciles; their number must not show in the lists below.
    keyed = reconciles["nodeclaim.lifecycle"] + reconciles["node.termination"]
    assert keyed >= 4 * REPLICAS, reconciles

    lists = Counter(r.resource for r in requests if r.verb == "list")
    for resource, count in informer_lists.items():
        # Every informer lists at start; a relist only follows an expired or broken watch.
        assert count >= 1, resource
        assert count <= 3, f"{resource} relisted {count} times in under a minute"
    assert set(lists) <= set(informer_lists), f"lists of kinds no informer watches: {lists}"
    assert lists == Counter(informer_lists), (
        f"lists by karpy {dict(lists)} != lists by its informers {informer_lists}"
    )

    gets = [r for r in requests if r.verb == "get"]
    read_by_reconcile = [r for r in gets if r.resource in {"nodes", "nodeclaims", "pods"}]
    assert read_by_reconcile == [], read_by_reconcile
