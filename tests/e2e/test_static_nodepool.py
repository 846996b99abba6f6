"""Static NodePools (`spec.replicas`, FEATURE_GATES=StaticCapacity=true) with the whole daemon on
the local cluster (kwok provider): the pool launches its replicas with no pod asking, scales
3 → 1 → 0 through the scale subresource (`kubectl scale nodepool`), its empty nodes outlive
consolidation, and a template change replaces each drifted node one for one, replacement first.
Without the gate a static NodePool is not Ready, and says which gate it needs.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy_kwok.apis import labels as kwoklabels
from tests.e2e.daemon import is_ready, nodeclaims, running_daemon, steadily
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

GATE = {"FEATURE_GATES": "StaticCapacity=true"}


async def _static_pool(api: client.ApiClient, replicas: int) -> tuple[str, dict[str, str]]:
    """A KWOKNodeClass and a static NodePool of `replicas`, both called `static-<hex>`, that
    would consolidate an empty dynamic node at once (WhenEmptyOrUnderutilized, 0s, 100%)."""
    name = f"static-{secrets.token_hex(3)}"
    labels = {"intent": f"static-{secrets.token_hex(3)}"}
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
        "replicas": replicas,
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "requirements": [
                    {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                    {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                ],
                "nodeClassRef": {
                    "group": kwoklabels.KWOK_GROUP,
                    "kind": "KWOKNodeClass",
                    "name": name,
                },
            },
        },
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "0s",
            "budgets": [{"nodes": "100%"}],
        },
    }
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
    return name, labels


async def _scale(api: client.ApiClient, pool: str, replicas: int) -> None:
    """What `kubectl scale nodepool <pool> --replicas=N` sends."""
    await client.CustomObjectsApi(api).patch_cluster_custom_object_scale(
        wk.GROUP,
        "v1",
        "nodepools",
        pool,
        {"spec": {"replicas": replicas}},
        _content_type="application/merge-patch+json",
    )


async def _pool(api: client.ApiClient, pool: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(api).get_cluster_custom_object(
        wk.GROUP, "v1", "nodepools", pool
    )
    return got


def _held(api: client.ApiClient, pool: str, count: int) -> Any:
    """A probe: the pool's NodeClaims when exactly `count` exist, all Ready and none deleting,
    and the NodePool's status.nodes (the scale subresource's statusReplicasPath) says so."""

    async def probe() -> list[dict[str, Any]]:
        claims = await nodeclaims(api, pool)
        settled = len(claims) == count and all(
            is_ready(c) and not c["metadata"].get("deletionTimestamp") for c in claims
        )
        if not settled or (await _pool(api, pool)).get("status", {}).get("nodes") != count:
            return []
        return claims or [{"count": 0}]

    return probe


HOLD = "example.com/hold"


async def _replaced_while_deleting(api: client.ApiClient, pool: str, name: str) -> None:
    """Delete NodeClaim `name` as expiry does (a finalizer of the test's keeps it from going),
    and expect its replacement Ready while it is still there."""
    custom = client.CustomObjectsApi(api)
    merge: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
    finalizers = [wk.FINALIZER_TERMINATION, HOLD]
    await custom.patch_cluster_custom_object(
        wk.GROUP, "v1", "nodeclaims", name, {"metadata": {"finalizers": finalizers}}, **merge
    )
    await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodeclaims", name)

    async def replaced() -> bool:
        claims = {c["metadata"]["name"]: c for c in await nodeclaims(api, pool)}
        old = claims.get(name)
        fresh = [c for n, c in claims.items() if n != name and is_ready(c)]
        return (
            old is not None and bool(old["metadata"].get("deletionTimestamp")) and len(fresh) == 3
        )

    try:
        await eventually(replaced, within=120, what="a replacement Ready beside the deleting one")
    finally:

        async def released() -> bool:
            claim = await custom.get_cluster_custom_object(wk.GROUP, "v1", "nodeclaims", name)
            metadata = claim["metadata"]
            kept = [f for f in metadata.get("finalizers", []) if f != HOLD]
            patch = {
                "metadata": {"finalizers": kept, "resourceVersion": metadata["resourceVersion"]}
            }
            try:
                await custom.patch_cluster_custom_object(
                    wk.GROUP, "v1", "nodeclaims", name, patch, **merge
                )
            except ApiException as error:
                if error.status == 409:  # karpy wrote in between: read again
                    return False
                raise
            return True

        await eventually(released, within=30, what="the test's finalizer removed")


async def test_a_static_pool_holds_its_replicas_and_scales_3_1_0(
    cluster_info: ClusterInfo, api_client: client.ApiClient
) -> None:
    pool, _ = await _static_pool(api_client, 3)
    async with running_daemon(cluster_info, environ=GATE):
        claims = await eventually(
            _held(api_client, pool, 3), within=120, what="3 static NodeClaims Ready"
        )
        types = {c["metadata"]["labels"][wk.LABEL_INSTANCE_TYPE] for c in claims}
        assert len(types) == 1, "every replica is the cheapest compatible type"
        scale = await client.CustomObjectsApi(api_client).get_cluster_custom_object_scale(
            wk.GROUP, "v1", "nodepools", pool
        )
        assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (3, 3)
        # Empty, consolidateAfter 0s, a 100% budget: a dynamic pool's nodes would go within a
        # disruption pass (10 s); a static pool's stay.
        await steadily(_held(api_client, pool, 3), during=12.0)
        await _replaced_while_deleting(api_client, pool, claims[0]["metadata"]["name"])
        await eventually(_held(api_client, pool, 3), within=120, what="3 again")
        await _scale(api_client, pool, 1)
        await eventually(_held(api_client, pool, 1), within=120, what="scaled to 1")
        await _scale(api_client, pool, 0)
        await eventually(_held(api_client, pool, 0), within=120, what="scaled to 0")


async def test_a_template_change_replaces_static_nodes_one_for_one(
    cluster_info: ClusterInfo, api_client: client.ApiClient
) -> None:
    pool, labels = await _static_pool(api_client, 2)
    custom = client.CustomObjectsApi(api_client)
    async with running_daemon(cluster_info, environ=GATE):
        old = {
            c["metadata"]["name"]
            for c in await eventually(_held(api_client, pool, 2), within=120, what="2 Ready")
        }
        seen: dict[str, dict[str, Any]] = {}
        fewest_serving = 2
        listed = False
        ever: set[str] = set()
        history: list[list[tuple[str, bool]]] = []
        stream = watch.Watch()
        async with stream:
            await custom.patch_cluster_custom_object(
                wk.GROUP,
                "v1",
                "nodepools",
                pool,
                {"spec": {"template": {"metadata": {"labels": {**labels, "revision": "2"}}}}},
                _content_type="application/merge-patch+json",
            )
            async for event in stream.stream(
                custom.list_cluster_custom_object,
                wk.GROUP,
                "v1",
                "nodeclaims",
                label_selector=f"{wk.LABEL_NODEPOOL}={pool}",
                timeout_seconds=300,
            ):
                claim = event["object"]
                name = claim["metadata"]["name"]
                ever.add(name)
                if event["type"] == "DELETED":
                    seen.pop(name, None)
                else:
                    seen[name] = claim
                # Ready and not deleting: what can run the pool's pods. A drifted node goes only
                # once its replacement is Ready, so this never drops below the replicas.
                serving = [
                    c
                    for c in seen.values()
                    if is_ready(c) and not c["metadata"].get("deletionTimestamp")
                ]
                listed = listed or old <= set(seen)  # the watch's first events list them
                if listed:
                    fewest_serving = min(fewest_serving, len(serving))
                    history.append(sorted((n, is_ready(c)) for n, c in seen.items()))
                if len(serving) == len(seen) == 2 and not old & set(seen):
                    break
        assert not old & set(seen), "every drifted node was replaced"
        assert len(ever) == 4, f"one replacement each, nothing else launched: {sorted(ever)}"
        assert fewest_serving == 2, history
        await eventually(_held(api_client, pool, 2), within=60, what="2 Ready after drift")
        # Leave no nodes behind for the worker's later tests.
        await _scale(api_client, pool, 0)
        await eventually(_held(api_client, pool, 0), within=120, what="scaled to 0")


async def test_without_the_gate_a_static_pool_is_not_ready_and_names_the_gate(
    cluster_info: ClusterInfo, api_client: client.ApiClient
) -> None:
    pool, _ = await _static_pool(api_client, 2)
    async with running_daemon(cluster_info):

        async def refused() -> dict[str, Any] | None:
            status = (await _pool(api_client, pool)).get("status", {})
            found = {c["type"]: c for c in status.get("conditions", [])}
            validation = found.get("ValidationSucceeded", {})
            ready = found.get("Ready", {})
            if validation.get("status") == "False" and ready.get("status") == "False":
                return validation
            return None

        validation = await eventually(refused, within=60, what="ValidationSucceeded False")
        assert "StaticCapacity" in validation["message"]
        assert await nodeclaims(api_client, pool) == []
