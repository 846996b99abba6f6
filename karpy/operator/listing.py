"""One read of a live cluster for the command-line tools (`karpy explain node`, `karpy simulate
--from-cluster`): connect, list the kinds asked for into a cluster state, build the configured
cloud provider over it and list the kinds the provider declares — then close it all again.
With the NodeOverlay gate on, the NodeOverlays are listed too and the provider's catalog has
the ones the running controller applies applied, as the controllers see it.

The two tools ask different questions of the same read, so the read lives here once.
Every request goes through the kube client, which bounds each one by the request timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs
from opentelemetry.metrics import NoOpMeter

from karpy.apis.conditions import find
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1alpha1.nodeoverlay import ConditionType
from karpy.cloudprovider.overlay import OverlaidCloudProvider, OverlayStore
from karpy.cloudprovider.protocol import CloudProvider
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODEOVERLAYS
from karpy.kube.resources import ResourceKind
from karpy.operator.components import (
    close_provider,
    configured_provider,
    extension_of,
    overlay_store,
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
    overlays: OverlayStore | None = None
    """The NodeOverlays the running controller applies, when their gate is on: those its
    status does not mark ValidationSucceeded=False. `provider` has them applied."""


async def _list_into(client: KubeClient, state: ClusterState, kind: ResourceKind[Any]) -> None:
    """List ``kind`` into ``state``, which then counts as synced once every kind so far is
    listed (a provider reading the view waits for that)."""
    listed = await client.list(kind)
    state.register(kind).replace(listed.items)
    state.mark_listed()


def _not_validated(view: ClusterView) -> dict[str, str]:
    """The NodeOverlays whose status says they are not applied (conflict, unreadable)."""
    out: dict[str, str] = {}
    for overlay in view.objects(NODEOVERLAYS):
        condition = find(overlay.status.conditions, ConditionType.VALIDATION_SUCCEEDED)
        if condition is not None and condition.status is ConditionStatus.FALSE:
            out[overlay.metadata.name or ""] = f"{condition.reason}: {condition.message}"
    return out


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
        overlays = overlay_store(options, view)
        if overlays is not None:
            await _list_into(client, state, NODEOVERLAYS)
            overlays.reject(_not_validated(view))
        provider = await configured_provider(
            options, kube=client, view=view, clock=clock, overlays=overlays
        )
        try:
            for declared in extension_of(provider).kinds:
                kind = resource_kind(declared, provider=options.provider.name)
                if not state.has(kind):
                    await _list_into(client, state, kind)
            yield ListedCluster(
                client=client,
                view=view,
                provider=provider
                if overlays is None
                else OverlaidCloudProvider(provider, overlays),
                clock=clock,
                overlays=overlays,
            )
        finally:
            await close_provider(provider)
    finally:
        await client.close()
