"""One read of a live cluster for the command-line tools (`karpy explain node`, `karpy simulate
--from-cluster`): connect, list the kinds asked for into a cluster state, build the configured
cloud provider over it and list the kinds the provider declares — then close it all again.

The two tools ask different questions of the same read, so the read lives here once.
Every request goes through the kube client, which bounds each one by the request timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs
from opentelemetry.metrics import NoOpMeter

from karpy.cloudprovider.protocol import CloudProvider
from karpy.kube.client import KubeClient
from karpy.kube.resources import ResourceKind
from karpy.operator.components import (
    close_provider,
    configured_provider,
    extension_of,
    resource_kind,
)
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import Options
from karpy.runtime.telemetry import Metrics
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView


@attrs.frozen(kw_only=True)
class ListedCluster:
    """The cluster as listed once: the open client, the view over what was listed, the
    provider built over that view, and the wall clock the provider was given."""

    client: KubeClient
    view: ClusterView
    provider: CloudProvider
    clock: SystemClock


async def _list_into(client: KubeClient, state: ClusterState, kind: ResourceKind[Any]) -> None:
    """List ``kind`` into ``state``, which then counts as synced once every kind so far is
    listed (a provider reading the view waits for that)."""
    listed = await client.list(kind)
    state.register(kind).replace(listed.items)
    state.mark_listed()


@contextlib.asynccontextmanager
async def listed_cluster(
    options: Options, kinds: Iterable[ResourceKind[Any]], *, meter: str
) -> AsyncIterator[ListedCluster]:
    """Connect, list `kinds` and the provider's own kinds, and yield them with the provider;
    the provider and the client are closed on the way out. Raises KubeError, KubeConfigError
    or ProviderError."""
    client = await KubeClient.connect(
        options.kube.kubeconfig, request_timeout=options.kube.request_timeout
    )
    try:
        state = ClusterState(metrics=Metrics.create(NoOpMeter(meter)))
        for kind in kinds:
            await _list_into(client, state, kind)
        view = ClusterView(state)
        clock = SystemClock()
        provider = await configured_provider(options, kube=client, view=view, clock=clock)
        try:
            for declared in extension_of(provider).kinds:
                kind = resource_kind(declared, provider=options.provider.name)
                if not state.has(kind):
                    await _list_into(client, state, kind)
            yield ListedCluster(client=client, view=view, provider=provider, clock=clock)
        finally:
            await close_provider(provider)
    finally:
        await client.close()
