"""Leader failover in the middle of a disruption command, proven from the apiserver's audit log.

Two `karpy run` replicas (kwok) share a Lease, each signed in as a ServiceAccount of its own so
the audit log tells their requests apart. A drift replacement is launching (kwok holds its Node
20 s) when the leader is frozen (SIGSTOP): it cannot renew, so after the lease runs out the
follower takes over and finishes the command — the old node deleted only after its replacement
is Initialized, no disruption annotation or taint left behind. Then the old leader is thawed
(SIGCONT), as a paused VM or a process back from a long GC pause would be: it must find it lost
the lease and stop without touching anything. The apiserver's audit log is the proof: no write
the old leader decided after it woke reaches the apiserver (it fences its writes once its lease
may have lapsed); the only writes of the old leader received after the new leader's first are
requests it had already sent on their way before the stop (held up in the HTTP client, opening
a connection), which arrive the moment it wakes, few and nothing after.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
import signal
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo, audit
from karpy.localcluster.credentials import Identity, write_kubeconfig
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import LeaderElectionOptions
from tests.cluster.runtime.support import Replica, lease_holder, spawn_replica, stop_replica
from tests.e2e.daemon import (
    claim_annotations,
    create_deployment,
    deployment,
    drift_slowly,
    fresh_nodepool,
    launching_replacements,
    nodeclaims,
    running,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.marks import CHAIN_B
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), CHAIN_B]

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
IN_FLIGHT = 2.0
"""Seconds after the thaw in which requests sent before the stop may still arrive."""
MAX_IN_FLIGHT = 10
"""How many such requests may arrive: the command's writes in flight at one moment."""
LEASE_DURATION = LeaderElectionOptions().lease_duration


def _account_kubeconfig(
    kube_http: KubeHTTP, cluster_info: ClusterInfo, namespace: str, name: str, path: Path
) -> str:
    """A ServiceAccount with cluster-admin and a kubeconfig with its token; returns the user
    name the apiserver audits it as."""
    kube_http.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}}
    )
    kube_http.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": f"{namespace}-{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    token = kube_http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )["status"]["token"]
    write_kubeconfig(
        path,
        cluster="local",
        server=cluster_info.server,
        ca_file=cluster_info.ca_file,
        identity=Identity(user=name, token=token, groups=()),
    )
    return f"system:serviceaccount:{namespace}:{name}"


async def test_the_follower_finishes_the_command_and_the_old_leader_never_writes_again(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    kube_http: KubeHTTP,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api_client)
    users = {
        identity: _account_kubeconfig(
            kube_http, cluster_info, namespace, identity, tmp_path / f"{identity}.kubeconfig"
        )
        for identity in ("replica-a", "replica-b")
    }
    pool, labels = await fresh_nodepool(api_client, "failover")
    await create_deployment(
        api_client,
        namespace,
        deployment("victim", node_selector=labels, replicas=1, cpu="500m", memory="256Mi"),
    )
    lease = f"karpy-failover-{secrets.token_hex(3)}"
    mark = audit.lines(cluster_info.audit_log)
    replicas: list[Replica] = [
        await spawn_replica(
            identity,
            kubeconfig=tmp_path / f"{identity}.kubeconfig",
            namespace=namespace,
            lease=lease,
            workdir=tmp_path,
        )
        for identity in users
    ]
    try:
        (pod,) = await eventually(running(api_client, namespace, "victim", 1), within=120)
        (original,) = await nodeclaims(api_client, pool)
        old = original["metadata"]["name"]
        await drift_slowly(api_client, pool, labels)
        await eventually(
            launching_replacements(api_client, pool), within=120, what="a replacement launching"
        )
        holder = await lease_holder(api_client, namespace, lease)
        leader = next(r for r in replicas if r.identity == holder)
        follower = next(r for r in replicas if r is not leader)
        loop = asyncio.get_running_loop()
        leader.process.send_signal(signal.SIGSTOP)
        frozen_at = loop.time()

        async def follower_holds() -> bool:
            return await lease_holder(api_client, namespace, lease) == follower.identity

        await eventually(follower_holds, within=LEASE_DURATION + 60, interval=0.2)
        took_over = loop.time() - frozen_at
        thawed = SystemClock().now()
        leader.process.send_signal(signal.SIGCONT)
        # It finds its lease lost and exits, as Karpenter does.
        async with asyncio.timeout(60):
            code = await leader.process.wait()
        assert code != 0

        async def finished() -> bool:
            current = await nodeclaims(api_client, pool)
            return old not in {c["metadata"]["name"] for c in current} and all(
                not (
                    {wk.ANNOTATION_REPLACEMENT_FOR, wk.ANNOTATION_DISRUPTION_COMMAND}
                    & claim_annotations(c).keys()
                )
                for c in current
            )

        await eventually(finished, within=180, interval=1.0, what="the command finished")
        (moved,) = await eventually(running(api_client, namespace, "victim", 1), within=60)
        assert moved.metadata.uid != pod.metadata.uid
        nodes = await core.list_node(label_selector=f"{wk.LABEL_NODEPOOL}={pool}")
        tainted = [
            n.metadata.name
            for n in nodes.items
            if n.metadata.deletion_timestamp is None
            and any(t.key == wk.TAINT_DISRUPTED_KEY for t in n.spec.taints or [])
        ]
        assert tainted == [], "orphaned disrupted taint"
    finally:
        for replica in replicas:
            await stop_replica(replica)
        for identity in users:
            kube_http.delete(
                f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{namespace}-{identity}"
            )

    # The Lease is the fence itself, not a write the fence guards: both replicas race to create
    # it at start (the loser's create is refused, 409) and the old leader must still read and try
    # it after the thaw to learn it lost. So the writes compared are everything but the Lease, and
    # the new leader's first is the first that took effect.
    writes = [
        r
        for r in audit.read(cluster_info.audit_log, skip=mark)
        if r.verb in WRITES and r.code and r.resource != "leases"
    ]
    old_user, new_user = users[leader.identity], users[follower.identity]
    by_old = sorted(r.received for r in writes if r.user == old_user)
    by_new = sorted(r.received for r in writes if r.user == new_user and r.code < 400)
    assert by_old, "the old leader's writes are in the audit log"
    assert by_new, "the new leader's writes are in the audit log"
    late = [r for r in writes if r.user == old_user and r.received >= by_new[0]]
    print(  # noqa: T201 - the figures docs/reliability.md quotes
        f"failover: follower held the lease {took_over:.1f} s after the freeze; old leader's "
        f"last write {by_old[-1].isoformat()}, new leader's first {by_new[0].isoformat()}; "
        f"writes: old {len(by_old)}, new {len(by_new)}; old after new's first: {len(late)}"
    )
    # Every write the old leader decided after it woke was refused (the fence). What can still
    # arrive late is a request it had sent on its way before the stop and that was held up in
    # the HTTP client (a connection being opened): those arrive as soon as it wakes, and
    # nothing after them.
    in_flight = datetime.timedelta(seconds=IN_FLIGHT)
    decided_late = [
        f"{r.verb} {r.resource}/{r.name} at {r.received.isoformat()}"
        for r in late
        if r.received > thawed + in_flight
    ]
    assert decided_late == [], decided_late
    assert len(late) <= MAX_IN_FLIGHT, late
