"""karpenter.sh/v1beta1 on the real apiserver, through karpy's conversion webhook.

The webhook is the one `karpy run` starts (karpy.operator.conversion), listening on loopback and
registered in the session's CRDs by URL: a v1beta1 NodePool applied as written reads back as v1
with Karpenter's translation, reads back as v1beta1 as it was written, and a v1beta1 field v1
has no place for is refused naming it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.apis.codec import from_dict
from karpy.apis.crds import all_crds
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, PODS
from karpy.localcluster import ClusterInfo
from karpy.operator.conversion import (
    ConversionWebhook,
    Endpoint,
    node_class_defaults,
)
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import load
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from tests.cluster.provisioning.harness import INTENT, TEST_TAINT, pod_body
from tests.support.conversion import restore_conversion
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

GROUP = "karpenter.sh"


@pytest.fixture
async def webhook(
    cluster_info: ClusterInfo, kube_http: KubeHTTP, karpy_crds: list[str]
) -> AsyncIterator[ConversionWebhook]:
    crds = all_crds()
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    hook = ConversionWebhook(
        kube,
        host="127.0.0.1",
        port=0,
        endpoint=Endpoint(url="https://127.0.0.1"),
        crds=crds,
        defaults=node_class_defaults(crds, group="karpenter.kwok.sh", kind="KWOKNodeClass"),
        clock=SystemClock(),
    )
    try:
        await hook.start()
        yield hook
    finally:
        await hook.close()
        await kube.close()
        restore_conversion(kube_http)


async def _create(api: client.CustomObjectsApi, group: str, plural: str, obj: Any) -> None:
    """Create `obj` at v1beta1 once the apiserver calls the webhook just registered: it picks
    up a CRD's new clientConfig a moment after the patch, and meanwhile still dials the last
    one (the previous test's, or the generated placeholder)."""
    for _ in range(100):
        try:
            await api.create_cluster_custom_object(group, "v1beta1", plural, obj)
        except ApiException as error:
            if error.status != 500 or "conversion webhook" not in (error.body or ""):
                raise
            if "/convert" not in error.body or "Forbidden" in error.body:
                raise
            await asyncio.sleep(0.1)
        else:
            return
    raise TimeoutError("the apiserver never called the registered webhook")


def _v1beta1_pool(name: str, **template_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "web"}},
                "spec": {
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["spot", "on-demand"],
                        }
                    ],
                    "nodeClassRef": {
                        "apiVersion": "karpenter.kwok.sh/v1alpha1",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    **template_spec,
                },
            },
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "168h"},
            "limits": {"cpu": "100"},
        },
    }


async def test_a_v1beta1_nodepool_reads_back_as_v1_with_the_translation(
    webhook: ConversionWebhook, api_client: client.ApiClient
) -> None:
    api = client.CustomObjectsApi(api_client)
    name = f"beta-{secrets.token_hex(3)}"
    written = _v1beta1_pool(name)
    await _create(api, GROUP, "nodepools", written)

    v1 = await api.get_cluster_custom_object(GROUP, "v1", "nodepools", name)
    assert v1["apiVersion"] == "karpenter.sh/v1"
    assert v1["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert v1["spec"]["disruption"]["consolidateAfter"] == "0s"
    assert "expireAfter" not in v1["spec"]["disruption"]
    assert v1["spec"]["template"]["spec"]["expireAfter"] == "168h"
    assert v1["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": "default",
    }
    assert v1["spec"]["limits"] == {"cpu": "100"}
    assert from_dict(NodePool, v1).spec.template.metadata.labels == {"team": "web"}

    beta = await api.get_cluster_custom_object(GROUP, "v1beta1", "nodepools", name)
    assert beta["spec"]["disruption"]["consolidationPolicy"] == "WhenUnderutilized"
    assert beta["spec"]["disruption"]["expireAfter"] == "168h"
    assert beta["spec"]["template"] == written["spec"]["template"]


async def test_a_v1beta1_kubelet_is_refused_naming_the_field(
    webhook: ConversionWebhook, api_client: client.ApiClient
) -> None:
    api = client.CustomObjectsApi(api_client)
    pool = _v1beta1_pool(f"beta-{secrets.token_hex(3)}", kubelet={"maxPods": 110})
    with pytest.raises(ApiException) as refused:
        await _create(api, GROUP, "nodepools", pool)
    assert refused.value.status in (400, 422, 500)
    assert "spec.template.spec.kubelet: Forbidden: kubelet moved to the NodeClass" in (
        refused.value.body
    ), refused.value.body


async def test_replicas_behind_a_service_share_one_certificate(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    crds = all_crds()
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        replicas = [
            ConversionWebhook(
                kube,
                host="127.0.0.1",
                port=0,
                endpoint=Endpoint(service_name="karpy", service_namespace=namespace),
                crds=crds,
                defaults=node_class_defaults(crds, group="karpenter.k8s.aws", kind="EC2NodeClass"),
                clock=SystemClock(),
            )
            for _ in range(2)
        ]
        first, second = [await replica.certificate() for replica in replicas]
        assert first == second
        secret = await kube.request(
            "GET", f"/api/v1/namespaces/{namespace}/secrets/karpy-webhook-cert"
        )
        assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    finally:
        await kube.close()


async def test_karpy_run_serves_v1beta1_and_launches_for_a_v1beta1_pool(
    cluster_info: ClusterInfo,
    kube_http: KubeHTTP,
    karpy_crds: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """`karpy run` with the webhook: a v1beta1 NodePool applies as written, and a pod that
    only it admits gets a NodeClaim from it, as from any v1 pool."""
    argv = [
        *("--kubeconfig", str(cluster_info.kubeconfig), "--disable-leader-election"),
        *("--bind-address", "127.0.0.1", "--metrics-port", "0", "--health-probe-port", "0"),
        *("--provider", "kwok", "--cluster-name", "t"),
        *("--batch-idle-duration", "200ms", "--batch-max-duration", "2s"),
        *("--enable-webhook", "--webhook-port", "0", "--webhook-url", "https://127.0.0.1"),
    ]
    components = await build(load(argv, {}))
    stop = asyncio.Event()
    suffix = secrets.token_hex(3)
    name, intent = f"beta-{suffix}", f"beta-{suffix}"
    kube = components.client
    api = client.CustomObjectsApi(api_client)
    # No kind or apiVersion in the reference: the provider's NodeClass (KWOKNodeClass).
    pool = _v1beta1_pool(name)
    template = pool["spec"]["template"]
    template["metadata"]["labels"] = {INTENT: intent}
    template["spec"]["nodeClassRef"] = {"name": f"beta-{suffix}"}
    template["spec"]["taints"] = [{"key": TEST_TAINT, "effect": "NoSchedule"}]
    try:
        await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=name)))
        async with asyncio.TaskGroup() as group:
            supervised = group.create_task(Supervisor(components, stop=stop).run())
            try:
                await _create(api, GROUP, "nodepools", pool)
                v1 = await api.get_cluster_custom_object(GROUP, "v1", "nodepools", name)
                await kube.create_raw(
                    PODS, pod_body("beta", cpu="1", intent=intent), namespace=namespace
                )
                claims = await eventually(lambda: _claims_of(kube, name), within=90)
            finally:
                # Gone now, not pending in a namespace being deleted after this test, where
                # whatever runs next would see it.
                kube_http.request(
                    "DELETE",
                    f"/api/v1/namespaces/{namespace}/pods/beta",
                    {"gracePeriodSeconds": 0},
                )
                stop.set()
            async with asyncio.timeout(30):
                await supervised
    finally:
        await components.close()
        restore_conversion(kube_http)
    assert v1["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": name,
    }
    (claim,) = claims
    assert claim.spec.expire_after == "168h"  # the v1beta1 pool's disruption.expireAfter


async def _claims_of(kube: KubeClient, pool: str) -> list[NodeClaim]:
    listed = await kube.list(NODECLAIMS)
    return [i.obj for i in listed.items if i.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == pool]


async def test_a_v1beta1_ec2nodeclass_reads_back_as_v1_with_an_alias(
    webhook: ConversionWebhook, api_client: client.ApiClient
) -> None:
    api = client.CustomObjectsApi(api_client)
    name = f"beta-{secrets.token_hex(3)}"
    terms = [{"tags": {"karpenter.sh/discovery": "my-cluster"}}]
    spec = {
        "amiFamily": "AL2023",
        "role": "KarpenterNodeRole-my-cluster",
        "subnetSelectorTerms": terms,
        "securityGroupSelectorTerms": terms,
    }
    written = {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": spec,
    }
    await _create(api, "karpenter.k8s.aws", "ec2nodeclasses", written)
    v1 = await api.get_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", name)
    assert v1["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert "amiFamily" not in v1["spec"]
    assert v1["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 2  # v1beta1's default
    beta = await api.get_cluster_custom_object(
        "karpenter.k8s.aws", "v1beta1", "ec2nodeclasses", name
    )
    assert beta["spec"]["amiFamily"] == "AL2023"
    assert "amiSelectorTerms" not in beta["spec"]

    ubuntu = {**written, "metadata": {"name": f"{name}-u"}, "spec": {**spec, "amiFamily": "Ubuntu"}}
    with pytest.raises(ApiException) as refused:
        await _create(api, "karpenter.k8s.aws", "ec2nodeclasses", ubuntu)
    assert "amiFamily" in refused.value.body
    assert "Ubuntu" in refused.value.body


async def test_a_v1_nodeclaim_reads_as_v1beta1(
    webhook: ConversionWebhook, api_client: client.ApiClient
) -> None:
    api = client.CustomObjectsApi(api_client)
    name = f"claim-{secrets.token_hex(3)}"
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name},
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
            ],
            "nodeClassRef": {
                "group": "karpenter.kwok.sh",
                "kind": "KWOKNodeClass",
                "name": "default",
            },
            "expireAfter": "24h",
        },
    }
    await api.create_cluster_custom_object(GROUP, "v1", "nodeclaims", claim)
    for _ in range(100):  # the apiserver picks up the webhook just registered a moment later
        try:
            beta = await api.get_cluster_custom_object(GROUP, "v1beta1", "nodeclaims", name)
            break
        except ApiException as error:
            if error.status != 500:
                raise
            await asyncio.sleep(0.1)
    else:
        raise TimeoutError("the apiserver never called the registered webhook")
    assert beta["spec"]["nodeClassRef"] == {
        "name": "default",
        "kind": "KWOKNodeClass",
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
    }
    assert beta["spec"]["expireAfter"] == "24h"  # a v1 field v1beta1's schema carries too
