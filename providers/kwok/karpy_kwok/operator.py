"""The ``karpy.providers`` entry point's factory: settings in, a KwokCloudProvider out.

The only place the kwok provider's pieces are put together from the operator's
ProviderContext; the provider builds its own instances, NodeClass reads and declared passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from karpy.apis.duration import duration_seconds
from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.kube.client import KubeClient
from karpy.state.view import ClusterView
from karpy_kwok.catalog import CatalogError, OfferingSelector, load_entries
from karpy_kwok.cloudprovider.provider import KwokCloudProvider, KwokOptions

SETTINGS: Final = frozenset({"registration-delay", "unavailable-offerings", "catalog"})


def options_from_settings(settings: dict[str, str]) -> KwokOptions:
    """Parse the provider's settings; ProviderConfigError names the bad key."""
    unknown = sorted(set(settings) - SETTINGS)
    if unknown:
        msg = (
            f"kwok provider: unknown setting {unknown[0]!r} (known: {', '.join(sorted(SETTINGS))})"
        )
        raise ProviderConfigError(msg)
    try:
        delay = duration_seconds(settings.get("registration-delay", "0").strip())
    except ValueError as error:
        msg = f"kwok provider: setting 'registration-delay': {error}"
        raise ProviderConfigError(msg) from error
    try:
        unavailable = tuple(
            OfferingSelector.parse(part)
            for part in settings.get("unavailable-offerings", "").split(",")
            if part.strip()
        )
    except ValueError as error:
        msg = f"kwok provider: setting 'unavailable-offerings': {error}"
        raise ProviderConfigError(msg) from error
    return KwokOptions(registration_delay=delay, unavailable=unavailable)


def build(context: ProviderContext[KubeClient, ClusterView]) -> KwokCloudProvider:
    """The ``karpy.providers`` factory: a KwokCloudProvider on the operator's KubeClient and
    cluster view.

    Pending launches (registration delay > 0) need the pass the provider declares
    (``extension()``) running, as the operator runs it.
    """
    options = options_from_settings(dict(context.settings))
    catalog_path = context.settings.get("catalog")
    try:
        catalog = load_entries(Path(catalog_path) if catalog_path else None)
    except CatalogError as error:
        msg = f"kwok provider: setting 'catalog': {error}"
        raise ProviderConfigError(msg) from error
    return KwokCloudProvider(
        context.kube,
        catalog,
        options=options,
        view=context.view,
        clock=context.clock,
        launch_catalog=context.launch_catalog,
    )
