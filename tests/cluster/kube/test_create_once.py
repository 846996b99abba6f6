"""A create whose answer is lost makes one object, not two: KubeClient.create_once against the
real apiserver, reached through a proxy that resets the connection as the answer comes back
(tests/support/watchcut.py). The apiserver has stored the object by then; a plain create
reports the failure, and a caller trying again under a fresh generateName made a second one
(a watch-cut trial saw a drain end with a NodeClaim too many)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from karpy.apis.kube.configmap import ConfigMap
from karpy.apis.meta import ObjectMeta
from karpy.kube.client import KubeClient
from karpy.kube.errors import UnreachableError
from karpy.kube.kinds import CONFIGMAPS
from karpy.localcluster import ClusterInfo
from tests.support.watchcut import CuttingProxy, watch_cut


@pytest.fixture
async def proxied(
    cluster_info: ClusterInfo, tmp_path: Path
) -> AsyncIterator[tuple[KubeClient, CuttingProxy]]:
    async with watch_cut(cluster_info.kubeconfig, tmp_path, mode="drop") as cut:
        kube = await KubeClient.connect(cut.kubeconfig, request_timeout=10.0)
        try:
            yield kube, cut.proxy
        finally:
            await kube.close()


def _config_map(prefix: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(generate_name=prefix), data={"a": "b"})


async def _ours(kube: KubeClient, namespace: str, prefix: str) -> list[str]:
    listed = await kube.list(CONFIGMAPS, namespace=namespace)
    return sorted(
        i.obj.metadata.name or ""
        for i in listed.items
        if (i.obj.metadata.name or "").startswith(prefix)
    )


async def test_a_create_whose_answer_is_lost_is_stored_once_and_read_back(
    proxied: tuple[KubeClient, CuttingProxy], namespace: str
) -> None:
    kube, proxy = proxied
    prefix = f"once-{secrets.token_hex(2)}-"
    await kube.list(CONFIGMAPS, namespace=namespace)  # a pooled connection for the POST
    assert proxy.lose_answers() >= 1
    opened = proxy.opened
    stored = await kube.create_once(CONFIGMAPS, _config_map(prefix), namespace=namespace)
    assert proxy.opened > opened  # the first answer was lost: sent again on a new connection
    assert (stored.metadata.name or "").startswith(prefix)
    assert await _ours(kube, namespace, prefix) == [stored.metadata.name]


async def test_a_plain_create_whose_answer_is_lost_fails_though_it_was_stored(
    proxied: tuple[KubeClient, CuttingProxy], namespace: str
) -> None:
    kube, proxy = proxied
    prefix = f"plain-{secrets.token_hex(2)}-"
    await kube.list(CONFIGMAPS, namespace=namespace)
    assert proxy.lose_answers() >= 1
    with pytest.raises(UnreachableError):
        await kube.create(CONFIGMAPS, _config_map(prefix), namespace=namespace)
    # Stored all the same: trying again under a fresh generateName would make a second.
    assert len(await _ours(kube, namespace, prefix)) == 1
