"""KubeClient on the real apiserver: typed reads, pagination, errors as karpy exceptions."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from tests.cluster.runtime.support import CONFIG_MAPS, create_config_map


async def test_get_list_delete_are_typed(
    kube: KubeClient, api_client: client.ApiClient, namespace: str
) -> None:
    await create_config_map(api_client, namespace, "one", "1")
    await create_config_map(api_client, namespace, "two", "2")
    one = await kube.get(CONFIG_MAPS, "one", namespace=namespace)
    assert (one.name, one.namespace, dict(one.data)) == ("one", namespace, {"value": "1"})
    listed = await kube.list(CONFIG_MAPS, namespace=namespace)
    assert {item.obj.name for item in listed.items} >= {"one", "two"}
    assert listed.resource_version
    await kube.delete(CONFIG_MAPS, "one", namespace=namespace)
    with pytest.raises(NotFoundError):
        await kube.get(CONFIG_MAPS, "one", namespace=namespace)
    with pytest.raises(NotFoundError):
        await kube.delete(CONFIG_MAPS, "one", namespace=namespace)


async def test_list_follows_continue_tokens(
    kube: KubeClient, api_client: client.ApiClient, namespace: str
) -> None:
    for index in range(7):
        await create_config_map(api_client, namespace, f"cm-{index}")
    raws, version = await kube.list_raw(CONFIG_MAPS, namespace=namespace, page_size=2)
    names = {raw["metadata"]["name"] for raw in raws}
    assert {f"cm-{index}" for index in range(7)} <= names
    assert version
    assert all(raw["kind"] == "ConfigMap" for raw in raws)


async def test_stale_write_is_a_conflict(
    kube: KubeClient, api_client: client.ApiClient, namespace: str
) -> None:
    await create_config_map(api_client, namespace, "cm")
    path = CONFIG_MAPS.object_path("cm", namespace)
    current = await kube.request("GET", path)
    stale = {**current, "data": {"value": "first"}}
    await kube.request("PUT", path, body=stale)
    with pytest.raises(ConflictError, match="modified"):
        await kube.request("PUT", path, body={**current, "data": {"value": "second"}})
    created = {"metadata": {"name": "cm", "namespace": namespace}}
    with pytest.raises(ConflictError, match="already exists"):
        await kube.request("POST", CONFIG_MAPS.collection_path(namespace), body=created)
