"""Drift with the whole daemon on the local cluster (kwok provider): a NodePool template change
makes every node of the pool drift, and karpy replaces them one command at a time — each
replacement Initialized before its old node starts deleting, never more pods of a Deployment
unavailable than its PodDisruptionBudget allows. A `nodes: "0"` budget holds drift (and says so
in an event) until it is lifted; a `karpenter.sh/do-not-disrupt` pod holds its node.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from kubernetes_asyncio import client, watch

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    create_pdb,
    deployment,
    fresh_nodepool,
    live_pods,
    node_names,
    running,
    running_daemon,
    steadily,
)
from tests.support.marks import CHAIN_B
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), CHAIN_B]


def _spread(app: str) -> dict[str, Any]:
    """One pod of `app` per node."""
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": wk.LABEL_HOSTNAME,
                }
            ]
        }
    }


async def _patch_pool(api: client.ApiClient, pool: str, spec: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).patch_cluster_custom_object(
        wk.GROUP,
        "v1",
        "nodepools",
        pool,
        {"spec": spec},
        _content_type="application/merge-patch+json",
    )


async def _relabel(api: client.ApiClient, pool: str, labels: dict[str, str]) -> None:
    """Change the pool's template labels: every existing node drifts (NodePoolDrifted)."""
    await _patch_pool(api, pool, {"template": {"metadata": {"labels": labels}}})


def _ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []
    )


@attrs.define
class Watch:
    """What watches of the cluster saw while drift ran: the fewest Ready pods of the app, and
    every NodeClaim's command annotations, Initialized time and deletion time. Every version of
    every object is seen (a watch, not a poll), so a NodeClaim that drains and goes within a
    moment still shows it was deleted, and a dip in Ready pods is never missed."""

    fewest_ready: int
    claims: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    pods: dict[str, Any] = attrs.field(factory=dict)

    def record(self, claim: dict[str, Any]) -> None:
        seen = self.claims.setdefault(claim["metadata"]["name"], {})
        annotations = claim["metadata"].get("annotations") or {}
        for key in (wk.ANNOTATION_DISRUPTION_COMMAND, wk.ANNOTATION_REPLACEMENT_FOR):
            if key in annotations:
                seen[key] = annotations[key]
        if claim["metadata"].get("deletionTimestamp"):
            seen.setdefault("deleted", claim["metadata"]["deletionTimestamp"])
        for condition in claim.get("status", {}).get("conditions", []):
            if condition["type"] == "Initialized" and condition["status"] == "True":
                seen["initialized"] = condition["lastTransitionTime"]

    def pod(self, kind: str, pod: Any) -> None:
        if kind == "DELETED":
            self.pods.pop(pod.metadata.name, None)
        else:
            self.pods[pod.metadata.name] = pod
        self.count()

    def count(self) -> None:
        ready = sum(_ready(p) for p in self.pods.values() if p.metadata.deletion_timestamp is None)
        self.fewest_ready = min(self.fewest_ready, ready)


@contextlib.asynccontextmanager
async def _watching(
    api: client.ApiClient, namespace: str, app: str, pool: str, replicas: int
) -> AsyncIterator[Watch]:
    seen = Watch(fewest_ready=replicas)
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    selector = f"{wk.LABEL_NODEPOOL}={pool}"

    async def claims() -> None:
        listed = await custom.list_cluster_custom_object(
            wk.GROUP, "v1", "nodeclaims", label_selector=selector
        )
        for claim in listed["items"]:
            seen.record(claim)
        stream = watch.Watch().stream(
            custom.list_cluster_custom_object,
            wk.GROUP,
            "v1",
            "nodeclaims",
            label_selector=selector,
            resource_version=listed["metadata"]["resourceVersion"],
        )
        async with stream:
            async for event in stream:
                seen.record(event["object"])

    async def pods() -> None:
        listed = await core.list_namespaced_pod(namespace, label_selector=f"app={app}")
        seen.pods = {pod.metadata.name: pod for pod in listed.items}
        seen.count()
        stream = watch.Watch().stream(
            core.list_namespaced_pod,
            namespace,
            label_selector=f"app={app}",
            resource_version=listed.metadata.resource_version,
        )
        async with stream:
            async for event in stream:
                seen.pod(event["type"], event["object"])

    tasks = [asyncio.create_task(claims()), asyncio.create_task(pods())]
    try:
        yield seen
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _stamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_a_template_change_replaces_every_node_replacement_first_within_the_pdb(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    replicas = 3
    pool, labels = await fresh_nodepool(api_client, "drift")
    await create_deployment(
        api_client,
        namespace,
        deployment(
            "web",
            node_selector=labels,
            replicas=replicas,
            affinity=_spread("web"),
            cpu="500m",
            memory="256Mi",
        ),
    )
    await create_pdb(api_client, namespace, "web", max_unavailable=1)
    async with running_daemon(cluster_info):
        pods = await eventually(running(api_client, namespace, "web", replicas), within=120)
        old = {p.spec.node_name for p in pods}
        assert len(old) == replicas
        async with _watching(api_client, namespace, "web", pool, replicas) as watch:
            await _relabel(api_client, pool, {**labels, "revision": "2"})

            async def rolled() -> list[Any]:
                live = await running(api_client, namespace, "web", replicas)()
                if not live or {p.spec.node_name for p in live} & old:
                    return []
                return live if not old & await node_names(api_client) else []

            await eventually(rolled, within=300, interval=1.0, what="every node replaced")
    assert watch.fewest_ready >= replicas - 1, "the PDB allowed one unavailable pod at most"
    candidates = {n: s for n, s in watch.claims.items() if wk.ANNOTATION_DISRUPTION_COMMAND in s}
    assert len(candidates) == replicas, watch.claims
    for name, seen in candidates.items():
        command = seen[wk.ANNOTATION_DISRUPTION_COMMAND]
        made = [s for s in watch.claims.values() if s.get(wk.ANNOTATION_REPLACEMENT_FOR) == command]
        assert made, f"{name}: no replacement was created for it"
        assert "deleted" in seen, f"{name}: never deleted"
        for replacement in made:
            assert "initialized" in replacement
            assert _stamp(replacement["initialized"]) <= _stamp(seen["deleted"])


async def test_a_zero_budget_holds_drift_with_an_event_until_it_is_lifted(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await fresh_nodepool(api_client, "held")
    await _patch_pool(
        api_client,
        pool,
        {"disruption": {"budgets": [{"nodes": "0", "reasons": ["Drifted"]}]}},
    )
    await create_deployment(
        api_client,
        namespace,
        deployment("held", node_selector=labels, replicas=1, cpu="500m", memory="256Mi"),
    )
    async with running_daemon(cluster_info):
        (pod,) = await eventually(running(api_client, namespace, "held", 1), within=120)
        node = pod.spec.node_name
        await _relabel(api_client, pool, {**labels, "revision": "2"})

        async def blocked_event() -> list[Any]:
            events = await client.CoreV1Api(api_client).list_namespaced_event(
                "default", field_selector=f"involvedObject.name={node},reason=DisruptionBlocked"
            )
            return [e for e in events.items if "Drifted" in e.message]

        (event,) = (await eventually(blocked_event, within=60))[:1]
        assert "budget" in event.message

        async def node_stays() -> bool:
            return node in await node_names(api_client)

        await steadily(node_stays, during=5)
        await _patch_pool(api_client, pool, {"disruption": {"budgets": [{"nodes": "1"}]}})

        async def replaced() -> list[Any]:
            live = await running(api_client, namespace, "held", 1)()
            return live if live and live[0].spec.node_name != node else []

        await eventually(replaced, within=180, interval=1.0)


async def test_a_do_not_disrupt_pod_holds_its_node_through_drift(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    pool, labels = await fresh_nodepool(api_client, "dnd")
    body = deployment("keep", node_selector=labels, replicas=1, cpu="500m", memory="256Mi")
    body["spec"]["template"]["metadata"]["annotations"] = {wk.ANNOTATION_DO_NOT_DISRUPT: "true"}
    await create_deployment(api_client, namespace, body)
    async with running_daemon(cluster_info):
        (pod,) = await eventually(running(api_client, namespace, "keep", 1), within=120)
        node = pod.spec.node_name
        await _relabel(api_client, pool, {**labels, "revision": "2"})

        async def blocked_event() -> list[Any]:
            events = await client.CoreV1Api(api_client).list_namespaced_event(
                "default", field_selector=f"involvedObject.name={node},reason=DisruptionBlocked"
            )
            return [e for e in events.items if "do-not-disrupt" in e.message]

        await eventually(blocked_event, within=60)

        async def pod_stays() -> bool:
            live = await live_pods(api_client, namespace, "keep")
            return [p.metadata.uid for p in live] == [pod.metadata.uid]

        await steadily(pod_stays, during=15)
