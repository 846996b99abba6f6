"""Finding and building cloud providers by name, through the ``karpy.providers`` entry points.

karpy never imports a provider (import-linter forbids it): each provider is a distribution that
declares a factory under the entry-point group ``karpy.providers``, e.g.

    [project.entry-points."karpy.providers"]
    kwok = "karpy_kwok:build"

and the operator picks one by name from its options. The factory receives a `ProviderContext`
— everything a provider may take from karpy — and returns the provider (or an awaitable of it,
for providers that must call their cloud while starting). A provider that owns kinds or brings
loops of its own declares them through the `Extended` hook (karpy.cloudprovider.protocol), and
the operator runs them. Installing a distribution is all it takes to add a provider; nothing in
karpy changes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Final, Generic, TypeVar

import attrs

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.protocol import CloudProvider
from karpy.core.instancetypes import InstanceType
from karpy.runtime.clock import Clock
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Telemetry

ENTRY_POINT_GROUP: Final = "karpy.providers"

KubeT = TypeVar("KubeT")
ViewT = TypeVar("ViewT")

LaunchCatalog = Callable[[NodeClaim, Sequence[InstanceType]], Sequence[InstanceType]]
"""(NodeClaim, the provider's instance types) -> the types as the scheduler saw them."""


@attrs.frozen(kw_only=True)
class ProviderContext(Generic[KubeT, ViewT]):
    """What a provider factory receives from karpy.

    ``kube`` is the operator's apiserver client, a ``karpy.kube.client.KubeClient`` (shared; the
    provider must not close it). ``view`` is the operator's read-only view of cluster state, a
    ``karpy.state.view.ClusterView``: the informers' objects, the provider's own kinds among
    them, which the provider and its loops read instead of the apiserver (None outside the
    operator). The types are parameters only because karpy.cloudprovider may not import
    karpy.kube (a sibling) or karpy.state (above it); wiring builds a
    ``ProviderContext[KubeClient, ClusterView]`` and provider factories declare that type. The
    rest:
    ``clock`` the injected wall clock, ``cluster_name`` the name instances are tagged with, and
    ``settings`` the provider's own options as given to the operator (string keys and values,
    e.g. ``{"registration-delay": "5s"}``); a factory refuses unknown or malformed ones with a
    `ProviderConfigError` naming the key. ``telemetry`` is the operator's tracer and metric
    instruments: a provider's own loops and calls report through it, so their spans join the
    operator's traces and their metrics show on its /metrics (None outside the operator).
    ``launch_catalog``, given when NodeOverlays apply (their feature gate), turns a NodeClaim
    and the provider's own instance types into the types as karpy's scheduler saw them for it
    (overlaid prices and extended resources): a provider that simulates its cloud (kwok)
    launches from them, so an overlaid price ranks its launches and an overlaid resource is on
    the Node as a device plugin would put it there.
    A provider's loops and the informers of its kinds take the operator's backoff and watch
    settings without being handed them: it declares them
    (`karpy.cloudprovider.protocol.ProviderExtension`) and the operator runs them. Kinds of
    another cluster it informs itself (`karpy.state.informed.InformedKinds`), with ``watching``,
    the operator's watch settings.
    """

    kube: KubeT
    clock: Clock
    view: ViewT | None = None
    cluster_name: str
    settings: Mapping[str, str] = attrs.field(factory=dict)
    telemetry: Telemetry | None = None
    launch_catalog: LaunchCatalog | None = None
    watching: WatchingOptions = attrs.field(factory=WatchingOptions)
    """The operator's watch settings (WATCH_*), for informers a provider runs over another
    cluster's kinds (`karpy.state.informed.InformedKinds`)."""


ProviderFactory = Callable[[ProviderContext[Any, Any]], CloudProvider | Awaitable[CloudProvider]]


class ProviderError(Exception):
    """A provider could not be found or built; the message says which and why."""


class UnknownProviderError(ProviderError, LookupError):
    """No installed distribution offers a provider of that name."""

    def __init__(self, name: str, available: tuple[str, ...]) -> None:
        listing = ", ".join(available) if available else "none are installed"
        super().__init__(
            f"unknown cloud provider {name!r}: available providers ({ENTRY_POINT_GROUP}"
            f" entry points) are {listing}"
        )
        self.name = name
        self.available = available


class ProviderConfigError(ProviderError, ValueError):
    """A provider setting is unknown or malformed; raised by factories."""


def _entry_points() -> dict[str, list[metadata.EntryPoint]]:
    found: dict[str, list[metadata.EntryPoint]] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, []).append(entry_point)
    return found


def available_providers() -> tuple[str, ...]:
    """Names of every installed provider, sorted."""
    return tuple(sorted(_entry_points()))


def load_factory(name: str) -> ProviderFactory:
    """The factory registered under ``name``.

    Raises UnknownProviderError (listing the available names) when there is none, ProviderError
    when two distributions claim the name or the entry point cannot be imported or called.
    """
    entry_points = _entry_points()
    candidates = entry_points.get(name, [])
    if not candidates:
        raise UnknownProviderError(name, tuple(sorted(entry_points)))
    targets = sorted({ep.value for ep in candidates})
    if len(targets) > 1:
        msg = f"cloud provider {name!r} is registered more than once: {', '.join(targets)}"
        raise ProviderError(msg)
    entry_point = candidates[0]
    try:
        factory = entry_point.load()
    except (ImportError, AttributeError) as error:
        msg = f"cloud provider {name!r}: cannot load {entry_point.value!r}: {error}"
        raise ProviderError(msg) from error
    if not callable(factory):
        msg = f"cloud provider {name!r}: {entry_point.value!r} is not callable"
        raise ProviderError(msg)
    loaded: ProviderFactory = factory
    return loaded


async def build_provider(name: str, context: ProviderContext[Any, Any]) -> CloudProvider:
    """Find the provider ``name`` and build it with ``context``.

    Side effects: whatever the factory does (it may call its cloud). Raises the errors of
    `load_factory`, and ProviderError when the factory returns something that does not
    implement the CloudProvider Protocol or whose ``name`` differs from the one asked for.
    Errors raised by the factory itself (ProviderConfigError, ...) propagate unchanged.
    """
    factory = load_factory(name)
    built = factory(context)
    provider: object = await built if inspect.isawaitable(built) else built
    if not isinstance(provider, CloudProvider):
        msg = (
            f"cloud provider {name!r}: the factory returned a {type(provider).__name__}, which"
            " does not implement the CloudProvider Protocol"
        )
        raise ProviderError(msg)
    if provider.name != name:
        msg = (
            f"cloud provider {name!r}: the factory built a provider named {provider.name!r};"
            " the entry-point name and the provider's name must agree"
        )
        raise ProviderError(msg)
    return provider
