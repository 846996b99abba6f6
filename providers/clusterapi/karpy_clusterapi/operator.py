"""The ``karpy.providers`` entry point's factory: settings in, a ClusterAPICloudProvider out.

Settings (``--provider-setting key=value`` or ``KARPY_PROVIDER_SETTING_<KEY>``):

``management-kubeconfig``
    Path of the management cluster's kubeconfig, where the MachineDeployments and Machines live.
    Default: the cluster karpy runs against (a self-managed cluster).
``namespace``
    The management cluster namespace of the MachineDeployments. Default: every namespace.
``price-per-vcpu``, ``price-per-gib``
    Hourly cost of one vCPU and of one GiB of memory, for MachineDeployments without a
    ``karpenter.cluster.x-k8s.io/price`` annotation. Defaults 0.032 and 0.004.
``default-zone``
    The zone of a MachineDeployment whose template names no failure domain. Default ``default``.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Final

from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeConfigError
from karpy.state.view import ClusterView
from karpy_clusterapi.cloudprovider.provider import ClusterAPICloudProvider, ClusterAPIOptions
from karpy_clusterapi.providers.machinedeployments import Pricing

SETTINGS: Final = frozenset(
    {"management-kubeconfig", "namespace", "price-per-vcpu", "price-per-gib", "default-zone"}
)
REQUEST_TIMEOUT: Final = 30.0
"""Seconds one request to the management cluster may take."""


def _price(settings: dict[str, str], key: str, default: Decimal) -> Decimal:
    text = settings.get(key)
    if text is None:
        return default
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = Decimal(-1)
    if not value.is_finite() or value < 0:
        msg = f"clusterapi provider: setting {key!r}: {text!r} is not a non-negative number"
        raise ProviderConfigError(msg)
    return value


def options_from_settings(settings: dict[str, str]) -> ClusterAPIOptions:
    """Parse the provider's settings; ProviderConfigError names the bad key."""
    unknown = sorted(set(settings) - SETTINGS)
    if unknown:
        msg = (
            f"clusterapi provider: unknown setting {unknown[0]!r} "
            f"(known: {', '.join(sorted(SETTINGS))})"
        )
        raise ProviderConfigError(msg)
    defaults = ClusterAPIOptions()
    zone = settings.get("default-zone", defaults.default_zone).strip()
    if not zone:
        msg = "clusterapi provider: setting 'default-zone' must not be empty"
        raise ProviderConfigError(msg)
    return ClusterAPIOptions(
        namespace=settings.get("namespace", "").strip() or None,
        pricing=Pricing(
            per_vcpu=_price(settings, "price-per-vcpu", defaults.pricing.per_vcpu),
            per_gib=_price(settings, "price-per-gib", defaults.pricing.per_gib),
        ),
        default_zone=zone,
    )


async def build(context: ProviderContext[KubeClient, ClusterView]) -> ClusterAPICloudProvider:
    """The ``karpy.providers`` factory: a ClusterAPICloudProvider on the operator's KubeClient
    (the workload cluster) and the management cluster's, its own when the
    ``management-kubeconfig`` setting names one."""
    settings = dict(context.settings)
    options = options_from_settings(settings)
    path = settings.get("management-kubeconfig", "").strip()
    management = context.kube
    if path:
        try:
            management = await KubeClient.connect(Path(path), request_timeout=REQUEST_TIMEOUT)
        except KubeConfigError as error:
            msg = f"clusterapi provider: setting 'management-kubeconfig': {error}"
            raise ProviderConfigError(msg) from error
    provider = ClusterAPICloudProvider(
        context.kube,
        management,
        options=options,
        view=context.view,
        clock=context.clock,
        owns_management=management is not context.kube,
        watching=context.watching,
    )
    provider.start()  # the management cluster's informers list and watch from now on
    return provider
