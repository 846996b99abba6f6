"""InformedKinds, the informers a provider runs over another cluster's kinds, on the real
apiserver: it lists once, then hears each change on its watch, and wakes a waiter with it."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from karpy.kube.client import KubeClient
from karpy.kube.resources import ResourceKind
from karpy.state.informed import InformedKinds
from tests.cluster.runtime.support import (
    CONFIG_MAPS,
    ConfigMap,
    create_config_map,
    decode_config_map,
)


async def test_a_waiter_wakes_with_the_change_its_watch_brings(
    kube: KubeClient, api_client: client.ApiClient, namespace: str
) -> None:
    await create_config_map(api_client, namespace, "before")
    informed = InformedKinds(kube, (CONFIG_MAPS,), namespace=namespace)
    try:
        assert not informed.synced
        await informed.wait_synced(30)
        assert informed.started
        assert "before" in {c.name for c in informed.view.objects(CONFIG_MAPS)}
        assert informed.view.get(CONFIG_MAPS, "after", namespace=namespace) is None
        seen = informed.changes
        await create_config_map(api_client, namespace, "after")
        # Every object of the namespace the watch brings; the one created is among them.
        while informed.view.get(CONFIG_MAPS, "after", namespace=namespace) is None:
            assert await informed.wait_changed(seen, 30), "the watch brought no change"
            seen = informed.changes
        assert informed.changes > 0
    finally:
        await informed.aclose()
    assert not informed.started


async def test_a_kind_the_apiserver_does_not_serve_never_syncs(kube: KubeClient) -> None:
    """Its informer backs off and retries; a reader waiting for the first list times out."""
    missing = ResourceKind[ConfigMap](
        kind="Nothing", plural="nothings", group="none.karpy.dev", version="v1",
        decode=decode_config_map,
    )  # fmt: skip
    informed = InformedKinds(kube, (missing,))
    try:
        with pytest.raises(TimeoutError):
            await informed.wait_synced(1.0)
        assert not informed.synced
    finally:
        await informed.aclose()
