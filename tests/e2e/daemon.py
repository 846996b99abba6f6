"""The whole daemon on the session's local cluster, and the manifests and probes e2e tests share.

`running_daemon` builds karpy exactly as `karpy run` does (`karpy.operator.wiring.build` plus the
Supervisor, kwok provider, short batch windows) and stops it in order when the test body ends.
The rest are plain manifests (a KWOKNodeClass with its NodePool, a pause-image Deployment) and
read-only probes for `tests.support.waiting.eventually`, so each test reads as its scenario.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from opentelemetry.sdk.trace.export import SpanExporter

from karpy.apis.v1 import labels as wk
from karpy.core.resources import CPU, parse_resource
from karpy.localcluster import ClusterInfo
from karpy.operator.components import Components
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime.options import load
from karpy_kwok.apis import labels as kwoklabels
from tests.support.waiting import eventually

PAUSE_IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.2"
STOP_TIMEOUT = 60.0
"""Seconds the daemon gets to shut down once a test is done with it."""


@asynccontextmanager
async def running_daemon(
    cluster_info: ClusterInfo,
    *,
    kubeconfig: Path | None = None,
    lease_namespace: str | None = None,
    flags: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    span_exporter: SpanExporter | None = None,
) -> AsyncIterator[Components]:
    """karpy running against the local cluster with the kwok provider, until the block ends.

    It runs as the admin identity unless `kubeconfig` names another, and without leader
    election unless `lease_namespace` says where its Lease goes; `flags` are further `karpy run`
    flags (another provider and its settings, say) and `environ` its environment variables
    (OTEL_EXPORTER_OTLP_ENDPOINT, say); `span_exporter` receives every span. Batches close after
    200 ms idle
    (2 s at most) so scenarios move quickly. A failure of the daemon cancels the test body and
    surfaces from here.
    """
    election = (
        ["--disable-leader-election"]
        if lease_namespace is None
        else ["--leader-election-namespace", lease_namespace]
    )
    options = load(
        [
            "--kubeconfig",
            str(kubeconfig or cluster_info.kubeconfig),
            *election,
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
            *flags,
        ],
        dict(environ or {}),
    )
    components = await build(options, span_exporter=span_exporter)
    stop = asyncio.Event()
    try:
        async with asyncio.TaskGroup() as group:
            supervised = group.create_task(Supervisor(components, stop=stop).run())
            try:
                yield components
            finally:
                stop.set()
            async with asyncio.timeout(STOP_TIMEOUT):
                await supervised
    finally:
        await components.close()


async def create_nodepool(
    api: client.ApiClient,
    name: str,
    *,
    labels: Mapping[str, str],
    consolidate_after: str = "Never",
    weight: int | None = None,
    limits: Mapping[str, str] | None = None,
    termination_grace_period: str | None = None,
) -> None:
    """A KWOKNodeClass and a WhenEmpty NodePool (100% budget), both called `name`, whose nodes
    carry `labels` (and whose NodeClaims have `termination_grace_period`, when given)."""
    custom = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object(
        kwoklabels.KWOK_GROUP,
        "v1alpha1",
        "kwoknodeclasses",
        {
            "apiVersion": f"{kwoklabels.KWOK_GROUP}/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": name},
        },
    )
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "requirements": [
                    {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                ],
                "nodeClassRef": {
                    "group": kwoklabels.KWOK_GROUP,
                    "kind": "KWOKNodeClass",
                    "name": name,
                },
            },
        },
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": consolidate_after,
            "budgets": [{"nodes": "100%"}],
        },
    }
    if weight is not None:
        spec["weight"] = weight
    if termination_grace_period is not None:
        spec["template"]["spec"]["terminationGracePeriod"] = termination_grace_period
    if limits is not None:
        spec["limits"] = dict(limits)
    await custom.create_cluster_custom_object(
        wk.GROUP,
        "v1",
        "nodepools",
        {
            "apiVersion": f"{wk.GROUP}/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


async def fresh_nodepool(
    api: client.ApiClient, prefix: str, **options: Any
) -> tuple[str, dict[str, str]]:
    """`create_nodepool` under a new name, `<prefix>-<hex>`, whose nodes carry a new `intent`
    label, so that no other test's pods select them; returns the name and those labels."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    labels = {"intent": f"apps-{secrets.token_hex(3)}"}
    await create_nodepool(api, name, labels=labels, **options)
    return name, labels


def deployment(
    name: str,
    *,
    node_selector: Mapping[str, str],
    replicas: int = 0,
    cpu: str = "1",
    memory: str = "1.5Gi",
    affinity: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Seed 000's `inflate`: pause containers labelled app=`name` that request `cpu`/`memory`."""
    pod: dict[str, Any] = {
        "nodeSelector": dict(node_selector),
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if affinity is not None:
        pod["affinity"] = dict(affinity)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


async def create_deployment(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    # The SDK accepts plain manifests; its annotations only name the model classes.
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body)  # type: ignore[arg-type]


async def create_pdb(
    api: client.ApiClient,
    namespace: str,
    app: str,
    *,
    min_available: int | None = None,
    max_unavailable: int | None = None,
) -> None:
    """A PodDisruptionBudget named `app` over the pods labelled app=`app`, with whichever of
    `min_available` and `max_unavailable` is given."""
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": app}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app},
            "spec": spec,
        },  # type: ignore[arg-type]
    )


async def scale(api: client.ApiClient, namespace: str, name: str, replicas: int) -> None:
    await client.AppsV1Api(api).patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": replicas}}
    )


async def live_pods(api: client.ApiClient, namespace: str, app: str) -> list[Any]:
    """Pods labelled app=`app` that are not being deleted."""
    pods = await client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"app={app}")
    return [p for p in pods.items if p.metadata.deletion_timestamp is None]


async def no_pods(api: client.ApiClient, namespace: str, app: str) -> bool:
    """Whether no pod labelled app=`app` is left, terminating ones included."""
    pods = await client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"app={app}")
    return not pods.items


def running(
    api: client.ApiClient, namespace: str, app: str, count: int
) -> Callable[[], Awaitable[list[Any]]]:
    """A probe: the live pods of `app` when exactly `count` of them run, else an empty list."""

    async def probe() -> list[Any]:
        live = await live_pods(api, namespace, app)
        ok = len(live) == count and all(p.status.phase == "Running" for p in live)
        return live if ok else []

    return probe


async def nodeclaims(api: client.ApiClient, pool: str) -> list[dict[str, Any]]:
    """The NodeClaims labelled as belonging to NodePool `pool`."""
    listed = await client.CustomObjectsApi(api).list_cluster_custom_object(
        wk.GROUP, "v1", "nodeclaims"
    )
    return [c for c in listed["items"] if c["metadata"]["labels"].get(wk.LABEL_NODEPOOL) == pool]


async def claim_recording(api: client.ApiClient, pool: str, node_name: str) -> dict[str, Any]:
    """The one NodeClaim of NodePool `pool`, once its status records Node `node_name`.

    The lifecycle lifts the unregistered taint before it writes the NodeClaim's status (one
    status patch at the end of its pass, as Karpenter's), so on kwok a pod can run on the node
    before its NodeClaim has any status at all: a test that acts on the node (deletes it,
    attaches a volume) waits for the record first.
    """

    async def recorded() -> list[dict[str, Any]]:
        claims = await nodeclaims(api, pool)
        names = [c.get("status", {}).get("nodeName") for c in claims]
        return claims if names == [node_name] else []

    (claim,) = await eventually(recorded, within=30, what="the NodeClaim to record its node")
    return claim


def claim_annotations(claim: Mapping[str, Any]) -> dict[str, str]:
    """A NodeClaim's annotations (none: empty)."""
    found: dict[str, str] = claim["metadata"].get("annotations") or {}
    return found


def is_initialized(claim: Mapping[str, Any]) -> bool:
    return any(
        c["type"] == "Initialized" and c["status"] == "True"
        for c in claim.get("status", {}).get("conditions", [])
    )


async def drift_slowly(api: client.ApiClient, pool: str, labels: Mapping[str, str]) -> None:
    """Drift every node of kwok NodePool `pool` (a new template label) with replacements that
    take 20 s to register, leaving time to kill or freeze karpy mid-launch."""
    custom = client.CustomObjectsApi(api)
    await custom.patch_cluster_custom_object(
        kwoklabels.KWOK_GROUP,
        "v1alpha1",
        "kwoknodeclasses",
        pool,
        {"spec": {"nodeRegistrationDelay": "20s"}},
        _content_type="application/merge-patch+json",
    )
    await custom.patch_cluster_custom_object(
        wk.GROUP,
        "v1",
        "nodepools",
        pool,
        {"spec": {"template": {"metadata": {"labels": {**labels, "revision": "2"}}}}},
        _content_type="application/merge-patch+json",
    )


def launching_replacements(
    api: client.ApiClient, pool: str
) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
    """A probe: `pool`'s replacement NodeClaims not yet initialized."""

    async def probe() -> list[dict[str, Any]]:
        return [
            c
            for c in await nodeclaims(api, pool)
            if wk.ANNOTATION_REPLACEMENT_FOR in claim_annotations(c) and not is_initialized(c)
        ]

    return probe


async def no_nodeclaims(api: client.ApiClient, pool: str) -> bool:
    return not await nodeclaims(api, pool)


def is_ready(claim: Mapping[str, Any]) -> bool:
    return any(
        k["type"] == "Ready" and k["status"] == "True"
        for k in claim.get("status", {}).get("conditions", [])
    )


def cpu_capacity(claims: Sequence[Mapping[str, Any]]) -> int:
    """The summed cpu capacity (millicores) of launched NodeClaims."""
    return sum(
        parse_resource(CPU, c.get("status", {}).get("capacity", {}).get(CPU, "0")) for c in claims
    )


async def node_names(api: client.ApiClient) -> set[str]:
    listed = await client.CoreV1Api(api).list_node()
    return {n.metadata.name for n in listed.items}


async def nodes_gone(api: client.ApiClient, names: Iterable[str]) -> bool:
    """Whether none of the Nodes called `names` is left."""
    return not set(names) & await node_names(api)


async def steadily(probe: Callable[[], Awaitable[object]], *, during: float) -> None:
    """Fail as soon as `probe()` returns something falsy within the next `during` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + during
    while loop.time() < deadline:
        value = await probe()
        assert value, f"condition stopped holding: {value!r}"
        await asyncio.sleep(0.2)
