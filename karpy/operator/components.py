"""What one `karpy run` process is made of, and the provider at its edges.

`Components` is what `karpy.operator.wiring.build` returns and the supervisor runs. The provider
helpers here (build the configured provider, read its declared extension, close it) serve both
the process and the command-line tools that read a live cluster (`karpy.operator.listing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from karpy.apis.v1alpha5.translate import LegacySettings
from karpy.cloudprovider.instrumented import InstrumentedCloudProvider
from karpy.cloudprovider.overlay import OverlaidCloudProvider, OverlayStore
from karpy.cloudprovider.protocol import CloudProvider
from karpy.cloudprovider.registry import ProviderContext, ProviderError, build_provider
from karpy.controllers.legacy.extension import legacy_extension
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODEOVERLAYS
from karpy.kube.lease import LeaderElector
from karpy.kube.resources import ResourceKind
from karpy.manager import Extended, ProviderExtension
from karpy.manager.declare import kinds_of
from karpy.operator.conversion import ConversionWebhook
from karpy.runtime.clock import Clock
from karpy.runtime.health import ProbeServer
from karpy.runtime.options import Options
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.view import ClusterView


class Controller(Protocol):
    """What the supervisor needs from a running controller (a `karpy.manager.Loop`)."""

    @property
    def name(self) -> str:
        """Dotted controller name, used for task names and logs."""
        ...

    async def run(self) -> None:
        """Work until `stop()` is called and in-flight work is done."""
        ...

    def stop(self) -> None:
        """Stop taking new work."""
        ...


@attrs.define
class Components:
    """Everything one `karpy run` process is made of."""

    options: Options
    telemetry: Telemetry
    client: KubeClient
    state: ClusterState
    informers: Sequence[Informer[Any]]
    elector: LeaderElector | None
    probes: ProbeServer
    controllers: Sequence[Controller]
    cloudprovider: CloudProvider | None = None
    webhook: ConversionWebhook | None = None

    async def close(self) -> None:
        """Close the provider (its optional `aclose()` hook), the kube client, and flush
        telemetry (after the supervisor has stopped)."""
        try:
            if self.cloudprovider is not None:
                await close_provider(self.cloudprovider)
        finally:
            try:
                await self.client.close()
            finally:
                self.telemetry.shutdown()


@runtime_checkable
class _Closes(Protocol):
    """The optional provider hook: release clients and connections at shutdown."""

    async def aclose(self) -> None: ...


def _unwrapped(provider: CloudProvider) -> object:
    while isinstance(provider, InstrumentedCloudProvider | OverlaidCloudProvider):
        provider = provider.inner
    return provider


def overlay_store(options: Options, view: ClusterView) -> OverlayStore | None:
    """The NodeOverlays in `view` that apply, when their feature gate is on."""
    if not options.feature_gates.node_overlay:
        return None
    return OverlayStore(lambda: view.objects(NODEOVERLAYS) if view.informs(NODEOVERLAYS) else [])


async def configured_provider(
    options: Options,
    *,
    kube: KubeClient,
    view: ClusterView,
    clock: Clock,
    telemetry: Telemetry | None = None,
    overlays: OverlayStore | None = None,
) -> CloudProvider:
    """The configured cloud provider (`options.provider`) over `kube` and `view`, given the
    overlaid catalog to launch from when `overlays` apply."""
    return await build_provider(
        options.provider.name,
        ProviderContext(
            kube=kube,
            view=view,
            clock=clock,
            cluster_name=options.provider.cluster_name,
            settings=options.provider.settings,
            telemetry=telemetry,
            launch_catalog=None if overlays is None else overlays.for_nodeclaim,
            watching=options.watching,
        ),
    )


async def close_provider(provider: CloudProvider) -> None:
    inner = _unwrapped(provider)
    if isinstance(inner, _Closes):
        await inner.aclose()


def extension_of(provider: CloudProvider) -> ProviderExtension:
    """What the provider declares besides its methods (nothing when it has no `extension()`)."""
    inner = _unwrapped(provider)
    return inner.extension() if isinstance(inner, Extended) else ProviderExtension()


def resource_kind(kind: object, *, provider: str) -> ResourceKind[Any]:
    if not isinstance(kind, ResourceKind):
        msg = (
            f"cloud provider {provider!r} declared a kind of type {type(kind).__name__}; "
            "kinds are karpy.kube.resources.ResourceKind"
        )
        raise ProviderError(msg)
    return kind


async def provider_and_extensions(
    options: Options, *, client: KubeClient, view: ClusterView, clock: Clock, telemetry: Telemetry
) -> tuple[CloudProvider, tuple[ProviderExtension, ...]]:
    """The configured provider, wrapped for spans and metrics (and NodeOverlays, with their
    gate), and what runs beside the core
    controllers: the provider's declared extension and the Karpenter v0.x legacy controller's
    (Provisioners and templates kept as owned v1 objects; docs/migration.md).

    Raises ProviderError when the provider cannot be found or built, or declares a kind that
    is not a ResourceKind (the provider is closed first).
    """
    overlays = overlay_store(options, view)
    instrumented = InstrumentedCloudProvider(
        await configured_provider(
            options, kube=client, view=view, clock=clock, telemetry=telemetry, overlays=overlays
        ),
        telemetry,
    )
    provider: CloudProvider = (
        instrumented if overlays is None else OverlaidCloudProvider(instrumented, overlays)
    )
    try:
        extensions = (
            extension_of(provider),
            legacy_extension(
                options.provider.name,
                client=client,
                view=view,
                settings=LegacySettings(
                    cluster_name=options.provider.cluster_name,
                    default_instance_profile=options.provider.default_instance_profile,
                ),
                clock=clock,
            ),
        )
        for extension in extensions:
            for declared in (
                *extension.kinds,
                *(k for c in extension.controllers for k in kinds_of(c)),
            ):
                resource_kind(declared, provider=options.provider.name)
    except BaseException:
        await close_provider(provider)
        raise
    return provider, extensions
