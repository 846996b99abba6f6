"""karpy runs on the privileges deploy/manifests/rbac.yaml grants, and on nothing more.

The local cluster has a `karpy` user with no rights of its own. The shipped ClusterRole and Role
are bound to it (the manifests bind them to the ServiceAccount a Deployment runs as), and the
daemon runs with that user's kubeconfig, leader election on: it must provision, register and
initialize nodes, drain a deleted Node through the Eviction API and remove empty nodes. A verb
missing from the manifests shows up as a 403 that stalls one of these steps.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    no_nodeclaims,
    no_pods,
    node_names,
    nodes_gone,
    running,
    running_daemon,
    scale,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "manifests" / "rbac.yaml"
USER = "karpy"
"""The local cluster's unprivileged identity (karpy.localcluster.credentials)."""


def _grant(kube_http: KubeHTTP, namespace: str, suffix: str) -> None:
    """Apply the shipped roles (the Role into `namespace`) and bind them to USER."""
    documents = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    roles = {d["kind"]: d for d in documents if d["kind"] in ("ClusterRole", "Role")}
    assert set(roles) == {"ClusterRole", "Role"}
    cluster_role = {**roles["ClusterRole"], "metadata": {"name": f"karpy-{suffix}"}}
    role = {**roles["Role"], "metadata": {"name": "karpy", "namespace": namespace}}
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    subject = [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
    kube_http.request("POST", f"{rbac}/clusterroles", cluster_role)
    kube_http.request(
        "POST",
        f"{rbac}/clusterrolebindings",
        {
            "metadata": {"name": f"karpy-{suffix}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"karpy-{suffix}"},
            "subjects": subject,
        },
    )  # fmt: skip
    kube_http.request("POST", f"{rbac}/namespaces/{namespace}/roles", role)
    kube_http.request(
        "POST",
        f"{rbac}/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": "karpy"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "karpy"},
            "subjects": subject,
        },
    )


async def test_karpy_does_its_job_with_the_shipped_rbac_alone(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    kube_http: KubeHTTP,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="karpy")
    pool, labels = await fresh_nodepool(api_client, "rbac", consolidate_after="1s")
    _grant(kube_http, namespace, pool)
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=labels))
    core = client.CoreV1Api(api_client)
    before = await node_names(api_client)

    async with running_daemon(
        cluster_info, kubeconfig=cluster_info.karpy_kubeconfig, lease_namespace=namespace
    ):
        await scale(api_client, namespace, "inflate", 2)
        pods = await eventually(running(api_client, namespace, "inflate", 2), within=90)
        nodes = {p.spec.node_name for p in pods}
        assert nodes.isdisjoint(before)
        leases = await client.CoordinationV1Api(api_client).list_namespaced_lease(namespace)
        assert [lease.spec.holder_identity for lease in leases.items if lease.spec.holder_identity]

        # A deleted Node is drained through the Eviction API: its pod is replaced and runs.
        victim = pods[0]
        await core.delete_node(victim.spec.node_name)

        async def replaced() -> list[Any]:
            live = await running(api_client, namespace, "inflate", 2)()
            return (
                live if live and victim.metadata.uid not in {p.metadata.uid for p in live} else []
            )

        await eventually(replaced, within=90)
        await eventually(lambda: nodes_gone(api_client, {victim.spec.node_name}), within=60)

        # Empty nodes are removed: NodeClaims, then Nodes.
        await scale(api_client, namespace, "inflate", 0)
        await eventually(lambda: no_pods(api_client, namespace, "inflate"), within=30)
        await eventually(lambda: no_nodeclaims(api_client, pool), within=60)

    forbidden = [r.getMessage() for r in caplog.records if "403" in str(r.__dict__)]
    assert not forbidden, forbidden
