"""Seed 000's walkthrough, scaled up: the `inflate` Deployment at 0, 1, 6 and 0 replicas.

The whole daemon (`karpy.operator.wiring.build` + the Supervisor, as `karpy run` starts them)
runs against the real local control plane with the kwok provider: pending pods become
NodeClaims, kwok Nodes register and initialize, and kube-scheduler binds the pods, which kwok
then runs. Scaling to zero empties the nodes; Emptiness then deletes their NodeClaims once
consolidateAfter has passed since the last pod left (5 s here instead of the seed's 30 s, and a
100% budget, to keep the suite fast), and termination removes the Nodes. Nothing the daemon
said on the way (log lines at debug, spans, Events) holds the kube credentials it used.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    is_ready,
    no_nodeclaims,
    no_pods,
    node_names,
    nodeclaims,
    nodes_gone,
    running,
    running_daemon,
    scale,
    steadily,
)
from tests.support.secrets import Witness, assert_no_secrets, karpy_events, kube_secrets
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

CONSOLIDATE_AFTER = "5s"
"""The seed says 30s; a short wait keeps the suite fast and exercises the same path."""

QUIET = 3.0
"""Seconds the 0-replica step is watched for NodeClaims: more than one whole batch window."""


async def test_inflate_scales_out_onto_new_kwok_nodes(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str, witness: Witness
) -> None:
    core = client.CoreV1Api(api_client)
    name, selector = await fresh_nodepool(api_client, "walk", consolidate_after=CONSOLIDATE_AFTER)
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=selector))

    async def ready_claims() -> list[dict[str, Any]]:
        return [c for c in await nodeclaims(api_client, name) if is_ready(c)]

    async with running_daemon(cluster_info, span_exporter=witness.spans) as components:
        # 0 replicas: nothing is pending, so nothing is launched.
        async with asyncio.timeout(30):
            await components.state.wait_synced()
        await steadily(lambda: no_nodeclaims(api_client, name), during=QUIET)

        await scale(api_client, namespace, "inflate", 1)
        (pod,) = await eventually(running(api_client, namespace, "inflate", 1), within=120)
        (claim,) = await eventually(ready_claims, within=60)
        node = await core.read_node(pod.spec.node_name)
        labels = node.metadata.labels
        assert labels[wk.LABEL_NODEPOOL] == name
        assert labels["intent"] == selector["intent"]
        assert labels[wk.LABEL_INSTANCE_TYPE]
        assert labels[wk.LABEL_TOPOLOGY_ZONE]
        assert labels[wk.LABEL_CAPACITY_TYPE] in {"spot", "on-demand"}
        assert labels[wk.LABEL_NODE_INITIALIZED] == "true"
        assert claim["status"]["nodeName"] == node.metadata.name
        assert not any(t.key == wk.TAINT_UNREGISTERED_KEY for t in node.spec.taints or [])

        await scale(api_client, namespace, "inflate", 6)
        pods = await eventually(running(api_client, namespace, "inflate", 6), within=180)
        nodes = {p.spec.node_name for p in pods}
        for node_name in nodes:
            placed = await core.read_node(node_name)
            assert placed.metadata.labels[wk.LABEL_NODEPOOL] == name
        claims = {c["metadata"]["name"] for c in await nodeclaims(api_client, name)}

        await scale(api_client, namespace, "inflate", 0)
        await eventually(lambda: no_pods(api_client, namespace, "inflate"), within=60)
        # The last pod has only just left: consolidateAfter has not passed, so every NodeClaim
        # and Node is still there and none is being deleted.
        remaining = await nodeclaims(api_client, name)
        assert {c["metadata"]["name"] for c in remaining} == claims
        assert not any(c["metadata"].get("deletionTimestamp") for c in remaining)
        assert nodes <= await node_names(api_client)

        await eventually(lambda: no_nodeclaims(api_client, name), within=120)
        await eventually(lambda: nodes_gone(api_client, nodes), within=60)
    assert_no_secrets(
        witness, kube_secrets(cluster_info.kubeconfig), await karpy_events(api_client), name
    )
