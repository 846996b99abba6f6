"""`kubectl delete node` on a karpy node drains it, within its PDBs, and its instance goes.

Deleting a Node only marks it: karpy's termination finalizer holds it while termination taints
it karpenter.sh/disrupted:NoSchedule, deletes its NodeClaim and evicts its pods through the
Eviction API. A PodDisruptionBudget that allows no disruption must hold the drain (the pod keeps
running, the Node stays); once the budget allows one, the pod is evicted, the Deployment's
replacement runs elsewhere, and the instance, the NodeClaim and the Node are all gone.
"""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.cloudprovider import NodeClaimNotFoundError
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    claim_recording,
    create_deployment,
    create_pdb,
    deployment,
    fresh_nodepool,
    live_pods,
    node_names,
    nodeclaims,
    running,
    running_daemon,
    steadily,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

BLOCKED = 5.0
"""Seconds the drain is watched while the PDB refuses every eviction."""


async def test_deleting_a_node_drains_it_within_its_pdb_and_removes_the_instance(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    policy = client.PolicyV1Api(api_client)
    pool, labels = await fresh_nodepool(api_client, "del")
    await create_deployment(
        api_client, namespace, deployment("guarded", node_selector=labels, replicas=1)
    )
    await create_pdb(api_client, namespace, "guarded", max_unavailable=0)

    async with running_daemon(cluster_info) as components:
        provider = components.cloudprovider
        assert provider is not None
        (pod,) = await eventually(running(api_client, namespace, "guarded", 1), within=60)
        node_name = pod.spec.node_name
        node = await core.read_node(node_name)
        provider_id = node.spec.provider_id

        claim = await claim_recording(api_client, pool, node_name)

        await core.delete_node(node_name)

        async def tainted() -> bool:
            taints = (await core.read_node(node_name)).spec.taints or []
            return any(t.key == wk.TAINT_DISRUPTED_KEY and t.effect == "NoSchedule" for t in taints)

        await eventually(tainted, within=30)

        async def still_guarded() -> bool:
            live = await live_pods(api_client, namespace, "guarded")
            return [p.metadata.uid for p in live] == [pod.metadata.uid] and node_name in (
                await node_names(api_client)
            )

        await steadily(still_guarded, during=BLOCKED)

        await policy.patch_namespaced_pod_disruption_budget(
            "guarded", namespace, {"spec": {"maxUnavailable": 1}}
        )

        async def evicted() -> bool:
            pods = await core.list_namespaced_pod(namespace, label_selector="app=guarded")
            return pod.metadata.uid not in {p.metadata.uid for p in pods.items}

        await eventually(evicted, within=60)
        (moved,) = await eventually(running(api_client, namespace, "guarded", 1), within=60)
        assert moved.spec.node_name != node_name

        async def released() -> bool:
            names = {c["metadata"]["name"] for c in await nodeclaims(api_client, pool)}
            return node_name not in await node_names(api_client) and (
                claim["metadata"]["name"] not in names
            )

        await eventually(released, within=60)
        assert provider_id not in {c.status.provider_id for c in await provider.list()}
        with pytest.raises(NodeClaimNotFoundError):
            await provider.get(provider_id)
