"""Seed 000's walkthrough, scaled up: the `inflate` Deployment at 0, 1 and 6 replicas.

The whole daemon (`karpy.operator.wiring.build` + the Supervisor, as `karpy run` starts them)
runs against the real local control plane with the kwok provider: pending pods become
NodeClaims, kwok Nodes register and initialize, and kube-scheduler binds the pods, which kwok
then runs. Scaling to zero empties the nodes; Emptiness then deletes their NodeClaims once
consolidateAfter has passed since the last pod left (5 s here instead of the seed's 30 s, and a
100% budget, to keep the suite fast), and termination removes the Nodes.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime.options import load
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

CONSOLIDATE_AFTER = "5s"
"""The seed says 30s; a short wait keeps the suite fast and exercises the same path."""


def _nodepool(name: str, intent: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": intent}},
                "spec": {
                    "requirements": [
                        {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                    ],
                    "nodeClassRef": {
                        "group": wk.KWOK_GROUP,
                        "kind": "KWOKNodeClass",
                        "name": name,
                    },
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": CONSOLIDATE_AFTER,
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def _inflate(intent: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inflate"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "inflate"}},
            "template": {
                "metadata": {"labels": {"app": "inflate"}},
                "spec": {
                    "nodeSelector": {"intent": intent},
                    "containers": [
                        {
                            "name": "inflate",
                            "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
                            "resources": {"requests": {"cpu": "1", "memory": "1.5Gi"}},
                        }
                    ],
                },
            },
        },
    }


async def test_inflate_scales_out_onto_new_kwok_nodes(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    name = f"walk-{secrets.token_hex(3)}"
    intent = f"apps-{secrets.token_hex(3)}"
    await custom.create_cluster_custom_object(
        wk.KWOK_GROUP,
        "v1alpha1",
        "kwoknodeclasses",
        {
            "apiVersion": f"{wk.KWOK_GROUP}/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": name},
        },
    )
    await custom.create_cluster_custom_object(wk.GROUP, "v1", "nodepools", _nodepool(name, intent))
    # The SDK accepts plain manifests; its annotations only name the model classes.
    await apps.create_namespaced_deployment(namespace, _inflate(intent))  # type: ignore[arg-type]

    options = load(
        [
            "--kubeconfig",
            str(cluster_info.kubeconfig),
            "--disable-leader-election",
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            "0",
            "--health-probe-port",
            "0",
            "--batch-idle-duration",
            "200ms",
            "--batch-max-duration",
            "2s",
        ],
        {},
    )
    components = await build(options)
    stop = asyncio.Event()

    async def scale(replicas: int) -> None:
        await apps.patch_namespaced_deployment_scale(
            "inflate", namespace, {"spec": {"replicas": replicas}}
        )

    async def running(count: int) -> list[Any]:
        """The live inflate pods when exactly `count` run, else an empty list."""
        pods = await core.list_namespaced_pod(namespace, label_selector="app=inflate")
        live = [p for p in pods.items if p.metadata.deletion_timestamp is None]
        ok = len(live) == count and all(p.status.phase == "Running" for p in live)
        return live if ok else []

    async def ready_claims() -> list[dict[str, Any]]:
        listed = await custom.list_cluster_custom_object(wk.GROUP, "v1", "nodeclaims")
        mine = [
            c for c in listed["items"] if c["metadata"]["labels"].get(wk.LABEL_NODEPOOL) == name
        ]
        return [
            c
            for c in mine
            if any(
                k["type"] == "Ready" and k["status"] == "True"
                for k in c.get("status", {}).get("conditions", [])
            )
        ]

    try:
        async with asyncio.TaskGroup() as group:
            supervised = group.create_task(Supervisor(components, stop=stop).run())
            try:
                await scale(1)
                (pod,) = await eventually(lambda: running(1), within=120)
                (claim,) = await eventually(ready_claims, within=60)
                node = await core.read_node(pod.spec.node_name)
                labels = node.metadata.labels
                assert labels[wk.LABEL_NODEPOOL] == name
                assert labels["intent"] == intent
                assert labels[wk.LABEL_INSTANCE_TYPE]
                assert labels[wk.LABEL_TOPOLOGY_ZONE]
                assert labels[wk.LABEL_CAPACITY_TYPE] in {"spot", "on-demand"}
                assert labels[wk.LABEL_NODE_INITIALIZED] == "true"
                assert claim["status"]["nodeName"] == node.metadata.name
                assert not any(t.key == wk.TAINT_UNREGISTERED_KEY for t in node.spec.taints or [])

                await scale(6)
                pods = await eventually(lambda: running(6), within=180)
                nodes = {p.spec.node_name for p in pods}
                for node_name in nodes:
                    placed = await core.read_node(node_name)
                    assert placed.metadata.labels[wk.LABEL_NODEPOOL] == name

                await scale(0)
                await eventually(lambda: _none_left(core, namespace), within=60)
                await eventually(lambda: _no_claims(custom, name), within=120)
                await eventually(lambda: _nodes_gone(core, nodes), within=60)
            finally:
                stop.set()
            async with asyncio.timeout(60):
                await supervised
    finally:
        await components.close()


async def _none_left(core: client.CoreV1Api, namespace: str) -> bool:
    pods = await core.list_namespaced_pod(namespace, label_selector="app=inflate")
    return not pods.items


async def _no_claims(custom: client.CustomObjectsApi, pool: str) -> bool:
    listed = await custom.list_cluster_custom_object(wk.GROUP, "v1", "nodeclaims")
    return not any(c["metadata"]["labels"].get(wk.LABEL_NODEPOOL) == pool for c in listed["items"])


async def _nodes_gone(core: client.CoreV1Api, names: set[str]) -> bool:
    listed = await core.list_node()
    return not names & {n.metadata.name for n in listed.items}
