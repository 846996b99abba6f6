"""A kwok Node stays Ready: the local cluster must not flap simulated nodes NotReady.

Without node leases kwok heartbeats a Node's status only every minute or two, past
kube-controller-manager's node-monitor grace period (50 s), so simulated nodes flapped NotReady.
The local cluster runs kwok with leases (karpy.localcluster.cluster.KWOK_NODE_LEASE_SECONDS), so
anything counting Ready pods or acting on node health sees what a real cluster would show. This
watches one kwok Node for three minutes: Ready throughout, no NodeNotReady event. It only
watches, so it runs beside other tests rather than in the one-at-a-time group, whose chain of
heavy tests is the suite's longest path.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from karpy.localcluster.cluster import KWOK_NODE_SELECTOR
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

WATCH_SECONDS = 180.0


def _ready(node: dict[str, Any]) -> str:
    for condition in node.get("status", {}).get("conditions", []):
        if condition["type"] == "Ready":
            return str(condition["status"])
    return "Missing"


async def test_a_kwok_node_stays_ready_for_three_minutes(kube_http: KubeHTTP) -> None:
    name = f"heartbeat-{secrets.token_hex(3)}"
    key, value = KWOK_NODE_SELECTOR.split("=")
    path = f"/api/v1/nodes/{name}"
    kube_http.request(
        "POST",
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "annotations": {key: value}},
            "spec": {},
        },
    )
    try:

        async def ready() -> bool:
            return _ready(await asyncio.to_thread(kube_http.get, path)) == "True"

        await eventually(ready, within=60, interval=0.5, what=f"node {name} Ready")
        seen: list[str] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + WATCH_SECONDS
        while loop.time() < end:
            seen.append(_ready(await asyncio.to_thread(kube_http.get, path)))
            await asyncio.sleep(2.0)
        assert set(seen) == {"True"}, f"Ready went {sorted(set(seen))} while watched"
        uid = (await asyncio.to_thread(kube_http.get, path))["metadata"]["uid"]
        reasons = {r for _, r in kube_http.events_about(uid)}
        assert "NodeNotReady" not in reasons
    finally:
        kube_http.delete(path)
