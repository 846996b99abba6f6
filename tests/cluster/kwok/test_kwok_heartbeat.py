"""A kwok Node stays Ready: the local cluster must not flap simulated nodes NotReady.

Without node leases kwok heartbeats a Node's status only every minute or two, past
kube-controller-manager's node-monitor grace period (50 s), so simulated nodes flapped NotReady.
The local cluster runs kwok with leases (karpy.localcluster.cluster.KWOK_NODE_LEASE_SECONDS), so
anything counting Ready pods or acting on node health sees what a real cluster would show. This
watches one kwok Node for longer than the grace period: its Lease in kube-node-lease is renewed
with every gap well inside the grace period (what keeps the node-lifecycle controller from
marking it NotReady, whatever the status heartbeat does), it stays Ready throughout, and no
NodeNotReady event is recorded. It only watches, so it runs beside other tests rather than in
a chain of heavy tests (tests/support/marks.py).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from datetime import datetime
from typing import Any

from karpy.localcluster.cluster import KWOK_NODE_SELECTOR
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

NODE_MONITOR_GRACE_SECONDS = 50.0
"""kube-controller-manager's --node-monitor-grace-period on the local cluster: a node whose
Lease is not renewed for this long is marked NotReady."""
WATCH_SECONDS = NODE_MONITOR_GRACE_SECONDS + 20.0
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def _ready(node: dict[str, Any]) -> str:
    for condition in node.get("status", {}).get("conditions", []):
        if condition["type"] == "Ready":
            return str(condition["status"])
    return "Missing"


def _renewed(lease: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))


async def test_a_kwok_node_stays_ready_past_the_grace_period(kube_http: KubeHTTP) -> None:
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

        async def leased() -> bool:
            return await asyncio.to_thread(kube_http.exists, f"{LEASES}/{name}")

        await eventually(ready, within=60, interval=0.5, what=f"node {name} Ready")
        await eventually(leased, within=60, interval=0.5, what=f"a Lease for node {name}")
        seen: list[str] = []
        renewals: set[datetime] = set()
        loop = asyncio.get_running_loop()
        end = loop.time() + WATCH_SECONDS
        while loop.time() < end:
            seen.append(_ready(await asyncio.to_thread(kube_http.get, path)))
            lease = await asyncio.to_thread(kube_http.get, f"{LEASES}/{name}")
            renewals.add(_renewed(lease))
            await asyncio.sleep(2.0)
        assert set(seen) == {"True"}, f"Ready went {sorted(set(seen))} while watched"
        ordered = sorted(renewals)
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ordered)]
        assert len(ordered) >= 3, f"the Lease was renewed only at {ordered}"
        assert max(gaps) < NODE_MONITOR_GRACE_SECONDS, f"Lease renewals {gaps} s apart"
        uid = (await asyncio.to_thread(kube_http.get, path))["metadata"]["uid"]
        reasons = {r for _, r in kube_http.events_about(uid)}
        assert "NodeNotReady" not in reasons
    finally:
        kube_http.delete(path)
