"""Consolidation with the whole daemon on the local cluster (kwok provider): two half-empty
nodes become one, the move validated after the validation delay and run replacement-first by
the orchestration queue; a `karpenter.sh/do-not-disrupt` pod holds its node, says so in an
`Unconsolidatable` event, and `karpy explain node` prints the same reason beside the events it
read back; a Deployment under a PodDisruptionBudget never has fewer ready pods than the budget
allows while its nodes are consolidated; and Karpenter's scale-out-then-down scenario, at the
suite's scale, settles on fewer nodes.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.components import Components
from tests.e2e.daemon import (
    create_deployment,
    create_pdb,
    deployment,
    fresh_nodepool,
    nodeclaims,
    running,
    running_daemon,
    scale,
    steadily,
)
from tests.support.marks import CHAIN_A
from tests.support.metrics import total
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), CHAIN_A]

FLAGS = ("--consolidation-validation-delay", "1s")


def _apart(app: str) -> dict[str, Any]:
    """Prefer one pod of `app` per node: the provisioner spreads them, consolidation may not."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": app}},
                        "topologyKey": wk.LABEL_HOSTNAME,
                    },
                }
            ]
        }
    }


async def _underutilized_pool(api: client.ApiClient, prefix: str) -> tuple[str, dict[str, str]]:
    """A NodePool of on-demand c5.xlarge (4 vCPU) nodes that consolidates underutilized nodes
    at once."""
    pool, labels = await fresh_nodepool(api, prefix)
    await client.CustomObjectsApi(api).patch_cluster_custom_object(
        wk.GROUP,
        "v1",
        "nodepools",
        pool,
        {
            "spec": {
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "0s",
                },
                "template": {
                    "spec": {
                        "requirements": [
                            {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                            {
                                "key": wk.LABEL_INSTANCE_TYPE,
                                "operator": "In",
                                "values": ["c5.xlarge"],
                            },
                            {
                                "key": wk.LABEL_CAPACITY_TYPE,
                                "operator": "In",
                                "values": [wk.CAPACITY_TYPE_ON_DEMAND],
                            },
                        ]
                    }
                },
            }
        },
        _content_type="application/merge-patch+json",
    )
    return pool, labels


async def _live_claims(api: client.ApiClient, pool: str) -> list[dict[str, Any]]:
    return [c for c in await nodeclaims(api, pool) if not c["metadata"].get("deletionTimestamp")]


def _required_apart(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": wk.LABEL_HOSTNAME}
            ]
        }
    }


async def _two_half_empty_nodes(
    api: client.ApiClient,
    namespace: str,
    labels: dict[str, str],
    app: str,
    annotations: dict[str, str] | None = None,
    replicas: int = 2,
) -> set[str]:
    """Two nodes with one small `app` pod each: spacers force two nodes, kube-scheduler spreads
    the `app` pods over them (preferred anti-affinity), then the spacers go."""
    spacer = f"{app}-spacer"
    await create_deployment(
        api,
        namespace,
        deployment(
            spacer,
            node_selector=labels,
            replicas=2,
            affinity=_required_apart(spacer),
            cpu="2500m",
            memory="1Gi",
        ),
    )
    await eventually(running(api, namespace, spacer, 2), within=120)
    body = deployment(
        app,
        node_selector=labels,
        replicas=replicas,
        affinity=_apart(app),
        cpu="500m",
        memory="256Mi",
    )
    body["spec"]["template"]["metadata"]["annotations"] = dict(annotations or {})
    await create_deployment(api, namespace, body)
    pods = await eventually(running(api, namespace, app, replicas), within=120)
    nodes = {p.spec.node_name for p in pods}
    assert len(nodes) == 2, "kube-scheduler spread the pods over both nodes"
    await client.AppsV1Api(api).delete_namespaced_deployment(spacer, namespace)
    return nodes


async def test_two_half_empty_nodes_become_one(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await _underutilized_pool(api_client, "consolidate")
    async with running_daemon(cluster_info, flags=FLAGS):
        first = await _two_half_empty_nodes(api_client, namespace, labels, "half")

        async def merged() -> list[Any]:
            live = await running(api_client, namespace, "half", 2)()
            claims = await nodeclaims(api_client, pool)
            if len(claims) != 1 or len({p.spec.node_name for p in live}) != 1:
                return []
            return live

        pods = await eventually(merged, within=180, interval=1.0, what="one node left")
        assert {p.spec.node_name for p in pods} <= first, "a delete: no new node was needed"

        async def one_node() -> bool:
            return len(await _live_claims(api_client, pool)) == 1

        await steadily(one_node, during=15)  # and nothing undoes it


async def test_a_do_not_disrupt_pod_holds_its_node_with_an_event(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await _underutilized_pool(api_client, "held")
    async with running_daemon(cluster_info, flags=FLAGS):
        held = await _two_half_empty_nodes(
            api_client, namespace, labels, "kept", {wk.ANNOTATION_DO_NOT_DISRUPT: "true"}
        )

        async def blocked_event() -> list[Any]:
            events = await client.CoreV1Api(api_client).list_event_for_all_namespaces(
                field_selector="reason=DisruptionBlocked"
            )
            return [
                e
                for e in events.items
                if e.involved_object.name in held and "do-not-disrupt" in (e.message or "")
            ]

        await eventually(blocked_event, within=60, interval=1.0, what="DisruptionBlocked event")

        async def both_nodes() -> bool:
            return len(await _live_claims(api_client, pool)) == 2

        await steadily(both_nodes, during=15)

        pods = await running(api_client, namespace, "kept", 2)()
        on = {p.spec.node_name: f"{namespace}/{p.metadata.name}" for p in pods}

        async def unconsolidatable() -> dict[str, str]:
            events = await client.CoreV1Api(api_client).list_event_for_all_namespaces(
                field_selector="reason=Unconsolidatable"
            )
            return {
                e.involved_object.name: e.message
                for e in events.items
                if e.involved_object.kind == "Node" and e.involved_object.name in held
            }

        found = await eventually(
            lambda: _all_of(unconsolidatable, held),
            within=60,
            interval=1.0,
            what="Unconsolidatable events on both nodes",
        )
        for node, message in found.items():
            assert message == f'pod "{on[node]}" has "karpenter.sh/do-not-disrupt" annotation'

        # The same reason, from the running cluster, by the command line.
        node = sorted(held)[0]
        printed = await _karpy(cluster_info, "explain", "node", node)
        assert f"node {node}" in printed
        assert f"not consolidated (PodDoNotDisrupt): {found[node]}" in printed
        # Beside it, what the running controller last reported, read back from its events.
        assert f"ago): Unconsolidatable: {found[node]}" in printed, printed
        assert "ago): DisruptionBlocked: Cannot disrupt" in printed, printed
        assert "differs" not in printed, printed


async def _all_of(probe: Any, names: set[str]) -> dict[str, str]:
    found: dict[str, str] = await probe()
    return found if set(found) == names else {}


async def _karpy(cluster_info: ClusterInfo, *args: str) -> str:
    """Run the karpy command line against the local cluster; its standard output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "karpy",
        *args,
        "--kubeconfig",
        str(cluster_info.kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(120):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode()
    return out.decode()


def _ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


async def test_a_pdb_is_never_broken_while_its_pods_are_consolidated(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    """Four pods over two half-empty nodes under minAvailable 3: merging the nodes evicts two
    pods from one of them, and the second eviction must wait until the first pod's
    replacement is Ready. Ready pods are counted every 100 ms from before the first eviction
    to the end; the PDB's own status is checked as well."""
    pool, labels = await _underutilized_pool(api_client, "guarded")
    minimum = 3
    await create_pdb(api_client, namespace, "guarded", min_available=minimum)
    async with running_daemon(cluster_info, flags=FLAGS):
        first = await _two_half_empty_nodes(api_client, namespace, labels, "guarded", replicas=4)
        before = {p.metadata.name for p in await running(api_client, namespace, "guarded", 4)()}
        lowest: list[int] = []
        low_pdb: list[tuple[int, int]] = []
        done = asyncio.Event()

        async def watch() -> None:
            core = client.CoreV1Api(api_client)
            policy = client.PolicyV1Api(api_client)
            while not done.is_set():
                pods = await core.list_namespaced_pod(namespace, label_selector="app=guarded")
                ready = [
                    p for p in pods.items if p.metadata.deletion_timestamp is None and _ready(p)
                ]
                lowest.append(len(ready))
                pdb = await policy.read_namespaced_pod_disruption_budget("guarded", namespace)
                if pdb.status is not None and pdb.status.observed_generation:
                    low_pdb.append((pdb.status.current_healthy, pdb.status.desired_healthy))
                await asyncio.sleep(0.1)

        async def merged() -> list[Any]:
            live = await running(api_client, namespace, "guarded", 4)()
            claims = await _live_claims(api_client, pool)
            if len(claims) != 1 or len({p.spec.node_name for p in live}) != 1:
                return []
            return [p for p in live if _ready(p)] if all(_ready(p) for p in live) else []

        async with asyncio.TaskGroup() as group:
            watcher = group.create_task(watch())
            try:
                pods = await eventually(merged, within=240, interval=1.0, what="one node left")
            finally:
                done.set()
            await watcher
        assert len({p.spec.node_name for p in pods}) == 1
        assert first, "the pods started on two nodes"
        # Consolidation did evict (the pods of the node it removed moved), and never below the
        # budget.
        assert len({p.metadata.name for p in pods} - before) >= 1
        assert lowest, "the watch ran"
        assert min(lowest) >= minimum, f"ready pods fell to {min(lowest)}"
        assert all(healthy >= desired for healthy, desired in low_pdb), low_pdb


async def test_a_scaled_down_deployment_settles_on_fewer_nodes(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    """Karpenter's consolidation performance scenario, scaled to the suite (the full 1,000 ->
    700 pods is benchmarks/consolidation_cluster.py): a Deployment scales out, then to two
    thirds; consolidation removes nodes until it settles — no NodeClaim created or deleted for
    20 s — with every pod running, and says why it keeps each node that is left."""
    pool, labels = await _underutilized_pool(api_client, "settle")
    app = "settle"
    async with running_daemon(cluster_info, flags=FLAGS) as components:
        await create_deployment(
            api_client,
            namespace,
            deployment(app, node_selector=labels, replicas=60, cpu="250m", memory="256Mi"),
        )
        await eventually(running(api_client, namespace, app, 60), within=240, interval=1.0)
        scaled_out = {c["metadata"]["name"] for c in await _live_claims(api_client, pool)}
        await scale(api_client, namespace, app, 40)

        changes: list[tuple[float, float]] = []
        seen: list[frozenset[str]] = []
        loop = asyncio.get_running_loop()

        async def settled() -> list[Any]:
            claims = await nodeclaims(api_client, pool)
            state = frozenset(
                f"{c['metadata']['name']}{'-' if c['metadata'].get('deletionTimestamp') else ''}"
                for c in claims
            )
            if not seen or state != seen[-1]:
                seen.append(state)
                changes.append((loop.time(), _disruption_passes(components)))
                return []
            # Quiet for 20 s, and the disruption pass ran twice since the last change (so one
            # began after it): on a loaded machine 20 s alone may pass before any pass looks.
            since, passes = changes[-1]
            quiet = (
                loop.time() - since >= 20
                and _disruption_passes(components) - passes >= 2
                and not any(s.endswith("-") for s in state)
            )
            return await running(api_client, namespace, app, 40)() if quiet else []

        pods = await eventually(settled, within=600, interval=1.0, what="consolidation settled")
        left = {c["metadata"]["name"] for c in await _live_claims(api_client, pool)}
        assert len(left) < len(scaled_out), f"{len(scaled_out)} nodes before, {len(left)} after"
        assert {p.spec.node_name for p in pods} <= {
            c["status"]["nodeName"] for c in await _live_claims(api_client, pool)
        }

        # Every node left has its reason, as `karpy explain node` would print it.
        async def reasons() -> dict[str, str]:
            events = await client.CoreV1Api(api_client).list_event_for_all_namespaces(
                field_selector="reason=Unconsolidatable,involvedObject.kind=NodeClaim"
            )
            found = {e.involved_object.name: e.message for e in events.items}
            return found if left <= set(found) else {}

        why = await eventually(reasons, within=60, interval=1.0, what="a reason per node")
        assert all(why[name] for name in left)


def _disruption_passes(components: Components) -> float:
    """How many disruption passes the daemon has finished, whatever their result."""
    return total(
        components.telemetry, "controller_runtime_reconcile_total", controller="disruption"
    )
