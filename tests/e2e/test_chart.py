"""The chart's RBAC is exactly what karpy needs: karpy runs as the chart's ServiceAccount and does
its whole job, and every rule the chart grants is one it used.

The chart is rendered by helm with the kwok provider and applied to the local apiserver (CRDs come
from the session fixture; the Deployment is scaled to zero, since no image can run here). karpy
then runs in this process with a token for the chart's ServiceAccount from the TokenRequest API,
leader election on, and provisions, drains a deleted Node through the Eviction API and removes
empty nodes. The apiserver's audit log tells which permission each of its requests used: a rule
that no request needed (and that no other rule covers) is refused as more than karpy needs, and a
403 fails the walkthrough, so removing any one rule, or adding one, fails this test.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo, audit
from karpy.localcluster.credentials import Identity, write_kubeconfig
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
from tests.support.helm import render
from tests.support.kubehttp import KubeHTTP
from tests.support.marks import TOOLS
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), *TOOLS]

_PATHS: Mapping[str, str] = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts/{name}",
    "Service": "/api/v1/namespaces/{ns}/services/{name}",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}",
}

Permission = tuple[str, str, str]
"""(API group, resource with any subresource after a slash, verb)."""

AHEAD_OF_USE: frozenset[Permission] = frozenset(
    {
        # A repeated event is counted up on the Event already recorded.
        ("", "events", "patch"),
        # `karpy run` lists Deployments once at start to warn of a Cluster Autoscaler beside it;
        # this walkthrough builds the daemon in-process, without that check.
        ("apps", "deployments", "list"),
        # It also reads Karpenter v0.x's karpenter-global-settings ConfigMap once at start.
        ("", "configmaps", "get"),
        # Termination deletes pods directly only under a terminationGracePeriod (exercised by
        # tests/cluster/termination; this walkthrough's NodePool sets none).
        ("", "pods", "delete"),
        # The v0.x translation creates the NodePool and NodeClass it keeps for a Provisioner
        # (exercised by tests/e2e/test_legacy_seeds.py, not by this v1 walkthrough).
        ("karpenter.sh", "nodepools", "create"),
        ("karpenter.sh", "provisioners/status", "patch"),
        ("karpenter.kwok.sh", "kwoknodeclasses", "create"),
        ("karpenter.kwok.sh", "kwoknodeclasses", "patch"),
        # The nodeoverlay controller writes an overlay's status only when one exists
        # (exercised by tests/e2e/test_nodeoverlay.py; this walkthrough creates none).
        ("karpenter.sh", "nodeoverlays/status", "patch"),
        # The NodePool registration-health write re-reads its pool only after a conflict
        # (karpy/controllers/nodeclaim/lifecycle/poolhealth.py), which a run may or may not meet.
        ("karpenter.sh", "nodepools", "get"),
        # A disruption command's NodeClaim write re-reads the claim only after a conflict
        # (karpy/controllers/disruption/queue.py), which a run may or may not meet.
        ("karpenter.sh", "nodeclaims", "get"),
        # The kwok provider reads a KWOKNodeClass its informer has not seen yet, and the Node
        # holding a name a retried launch finds taken (karpy_kwok/providers/nodeclass.py,
        # instance.py): both only on a race a run may or may not meet.
        ("karpenter.kwok.sh", "kwoknodeclasses", "get"),
        ("", "nodes", "get"),
    }
)
"""Granted for work this walkthrough does not do (Karpenter's chart grants them too); each is
still checked to be in the chart, and drops out of this set once a walkthrough exercises it."""


def _apply(kube_http: KubeHTTP, documents: Iterable[dict[str, Any]], namespace: str) -> None:
    for document in documents:
        template = _PATHS[document["kind"]]  # a kind the chart gained fails here, loudly
        path = template.format(ns=namespace, name=document["metadata"]["name"])
        kube_http.apply(path, document)


def _permissions(rule: Mapping[str, Any]) -> set[Permission]:
    return {
        (group, resource, verb)
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _needless(
    rules: list[Mapping[str, Any]], used: set[Permission]
) -> list[tuple[Mapping[str, Any], set[Permission]]]:
    """Each rule whose removal would have gone unnoticed, with the permissions nobody used."""
    findings = []
    for index, rule in enumerate(rules):
        others = set().union(*(_permissions(r) for i, r in enumerate(rules) if i != index))
        only_here = _permissions(rule) - others
        unused = only_here - used
        if not only_here & used or unused:
            findings.append((rule, unused))
    return findings


async def test_karpy_runs_on_the_charts_rbac_and_uses_every_rule(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    kube_http: KubeHTTP,
    namespace: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="karpy")
    pool, labels = await fresh_nodepool(api_client, "chart", consolidate_after="1s")
    release = f"karpy-{pool}"  # ClusterRoles are cluster-wide: one name per test
    documents = render(
        {"settings.clusterName": "local", "settings.provider": "kwok", "replicas": 0},
        release=release,
        namespace=namespace,
    )
    _apply(kube_http, documents, namespace)
    account = next(d for d in documents if d["kind"] == "ServiceAccount")["metadata"]["name"]
    token = kube_http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]  # fmt: skip
    kubeconfig = tmp_path / "serviceaccount.kubeconfig"
    write_kubeconfig(
        kubeconfig,
        cluster="local",
        server=cluster_info.server,
        ca_file=cluster_info.ca_file,
        identity=Identity(user=account, token=token, groups=()),
    )
    env = {
        e["name"]: e.get("value", "")
        for e in next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"][
            "spec"
        ]["containers"][0]["env"]
    }
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=labels))
    core = client.CoreV1Api(api_client)
    before = await node_names(api_client)
    mark = audit.lines(cluster_info.audit_log)

    async with running_daemon(
        cluster_info,
        kubeconfig=kubeconfig,
        lease_namespace=namespace,
        flags=[
            *("--leader-election-name", env["LEADER_ELECTION_NAME"]),
            # The conversion webhook as the chart runs it: its certificate in a Secret beside
            # the Service, its address and CA bundle written into the CRDs.
            *("--enable-webhook", "--webhook-port", "0"),
            *("--webhook-service", env["WEBHOOK_SERVICE"]),
        ],
    ):
        await scale(api_client, namespace, "inflate", 2)
        pods = await eventually(running(api_client, namespace, "inflate", 2), within=90)
        assert {p.spec.node_name for p in pods}.isdisjoint(before)

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

    user = f"system:serviceaccount:{namespace}:{account}"
    requests = [r for r in audit.read(cluster_info.audit_log, skip=mark) if r.user == user]
    assert requests, "the audit log holds no request by the chart's ServiceAccount"
    forbidden = sorted({(r.verb, r.group, r.resource) for r in requests if r.code == 403})
    assert not forbidden, f"the chart's RBAC refused: {forbidden}"
    used = {(r.group, r.resource, r.verb) for r in requests}
    granted = set().union(
        *(
            _permissions(r)
            for d in documents
            if d["kind"] in ("ClusterRole", "Role")
            for r in d["rules"]
        )
    )
    assert granted >= AHEAD_OF_USE, sorted(AHEAD_OF_USE - granted)
    used |= AHEAD_OF_USE
    for kind in ("ClusterRole", "Role"):
        rules = next(d for d in documents if d["kind"] == kind)["rules"]
        needless = _needless(rules, used)
        assert not needless, f"{kind} grants what karpy never used: {needless}; used: {used}"
    denied = [r.getMessage() for r in caplog.records if "403" in str(r.__dict__)]
    assert not denied, denied
