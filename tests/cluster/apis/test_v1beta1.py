"""karpenter.sh/v1beta1 on the real apiserver, through karpy's conversion webhook.

The webhook is the one `karpy run` starts (karpy.operator.conversion), listening on loopback and
registered in the session's CRDs by URL: a v1beta1 NodePool applied as written reads back as v1
with Karpenter's translation, reads back as v1beta1 as it was written, and a v1beta1 field v1
has no place for is refused naming it.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.apis.codec import from_dict
from karpy.apis.crds import all_crds, render_crd
from karpy.apis.v1.nodepool import NodePool
from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo
from karpy.operator.conversion import (
    CRD_PATH,
    ConversionWebhook,
    Endpoint,
    node_class_defaults,
)
from karpy.runtime.clock import SystemClock
from tests.support.kubehttp import KubeHTTP

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
        await hook.server.close()
        await kube.close()
        for crd in crds:  # back to the generated placeholders, for the rest of the session
            if crd.served:
                rendered = render_crd(crd)
                name = rendered["metadata"]["name"]
                kube_http.request(
                    "PATCH",
                    f"{CRD_PATH}/{name}",
                    {"spec": {"conversion": merge_patch_of(rendered["spec"]["conversion"])}},
                    content_type="application/merge-patch+json",
                )


def merge_patch_of(conversion: dict[str, Any]) -> dict[str, Any]:
    """The rendered conversion stanza as a merge patch: the URL and CA bundle removed."""
    config = conversion["webhook"]["clientConfig"]
    patch = {**conversion["webhook"], "clientConfig": {**config, "url": None, "caBundle": None}}
    return {**conversion, "webhook": patch}


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
    await api.create_cluster_custom_object(GROUP, "v1beta1", "nodepools", written)

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
        await api.create_cluster_custom_object(GROUP, "v1beta1", "nodepools", pool)
    assert refused.value.status in (400, 422, 500)
    assert "spec.template.spec.kubelet" in refused.value.body
    assert "EC2NodeClass.spec.kubelet" in refused.value.body
