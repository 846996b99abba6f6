"""The ``karpy.providers`` entry point: build an AWSCloudProvider from the operator's context.

The operator finds providers by name and calls their factory with a ProviderContext (the
apiserver client, the clock, the cluster name and the provider's own string settings). This
module turns those settings into typed options — refusing unknown or malformed ones with a
ProviderConfigError that names the key — opens the AWS session the provider owns until
``aclose()``, discovers the cluster from EKS when its endpoint is not given, and reads
EC2NodeClasses through the apiserver client.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import attrs

from karpy.apis.codec import from_dict
from karpy.apis.v1.ec2nodeclass import EC2NodeClass
from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError as KubeNotFoundError
from karpy.kube.resources import ResourceKind
from karpy_aws.cluster import describe_cluster
from karpy_aws.errors import AWSError, ConfigurationError
from karpy_aws.instance import Instances
from karpy_aws.launchtemplate import LaunchTemplates
from karpy_aws.nodeclaims import ClusterInfo
from karpy_aws.offerings import InstanceTypeCatalog
from karpy_aws.pricing import PriceCache, pricing_endpoint_region
from karpy_aws.provider import AWSCloudProvider
from karpy_aws.session import AWSSession, AWSSettings
from karpy_aws.unavailable import UnavailableOfferings

EC2NODECLASSES: Final = ResourceKind[EC2NodeClass](
    kind=EC2NodeClass.KIND,
    plural=EC2NodeClass.PLURAL,
    group=EC2NodeClass.GROUP,
    version=EC2NodeClass.VERSION,
    namespaced=False,
    decode=functools.partial(from_dict, EC2NodeClass),
)
_BOOLEANS: Final = {"true": True, "false": False}


class KubeNodeClasses:
    """EC2NodeClasses read from the apiserver (one GET per lookup)."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def get(self, name: str) -> EC2NodeClass | None:
        try:
            return await self._kube.get(EC2NODECLASSES, name)
        except KubeNotFoundError:
            return None


@attrs.frozen(kw_only=True)
class AWSProviderOptions:
    """The provider's settings (``--provider-setting key=value``), typed."""

    region: str
    endpoint_url: str | None = None
    require_loopback_endpoint: bool = False
    retry_mode: str = "standard"
    max_attempts: int = 3
    cluster_endpoint: str | None = None
    cluster_ca_bundle: str | None = None
    cluster_cidr: str | None = None
    instance_types: tuple[str, ...] = ()
    use_pricing_api: bool = True

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> AWSProviderOptions:
        """Parse settings; ProviderConfigError names the key that is unknown or malformed."""
        known = {f.name.replace("_", "-"): f.name for f in attrs.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in settings.items():
            name = known.get(key)
            if name is None:
                raise ProviderConfigError(
                    f"aws provider setting {key!r} is unknown; known: {', '.join(sorted(known))}"
                )
            values[name] = _parse(key, raw)
        if not values.get("region"):
            raise ProviderConfigError("aws provider setting 'region' is required")
        if (values.get("cluster_endpoint") is None) != (values.get("cluster_ca_bundle") is None):
            raise ProviderConfigError(
                "aws provider settings 'cluster-endpoint' and 'cluster-ca-bundle' go together "
                "(give both, or neither to read them from EKS)"
            )
        return cls(**values)


def _parse(key: str, raw: str) -> object:
    if key in ("require-loopback-endpoint", "use-pricing-api"):
        if raw.lower() not in _BOOLEANS:
            raise ProviderConfigError(f"aws provider setting {key!r}: {raw!r} is not true/false")
        return _BOOLEANS[raw.lower()]
    if key == "max-attempts":
        if not raw.isdigit() or int(raw) < 1:
            raise ProviderConfigError(f"aws provider setting {key!r}: {raw!r} is not a count >= 1")
        return int(raw)
    if key == "retry-mode" and raw not in ("standard", "adaptive"):
        raise ProviderConfigError(f"aws provider setting {key!r}: {raw!r} is not standard/adaptive")
    if key == "instance-types":
        return tuple(sorted({t.strip() for t in raw.split(",") if t.strip()}))
    return raw


async def build(context: ProviderContext[KubeClient]) -> AWSCloudProvider:
    """The entry point's factory. The returned provider owns an AWS session: ``aclose()`` it.

    Raises ProviderConfigError for bad settings or a cluster EKS does not know.
    """
    options = AWSProviderOptions.from_settings(context.settings)
    try:
        settings = AWSSettings(
            region=options.region,
            endpoint_url=options.endpoint_url,
            require_loopback_endpoint=options.require_loopback_endpoint,
            retry_mode="adaptive" if options.retry_mode == "adaptive" else "standard",
            max_attempts=options.max_attempts,
        )
    except ConfigurationError as e:
        raise ProviderConfigError(str(e)) from e
    session = AWSSession(settings)
    await session.__aenter__()
    try:
        cluster = await _cluster(session, options, name=context.cluster_name)
        ec2 = await session.client("ec2")
        pricing = (
            await session.client("pricing", region=pricing_endpoint_region(options.region))
            if options.use_pricing_api
            else None
        )
        unavailable = UnavailableOfferings(context.clock)
        prices = PriceCache(ec2=ec2, pricing=pricing, clock=context.clock, region=options.region)
        catalog = InstanceTypeCatalog(
            ec2=ec2,
            prices=prices,
            unavailable=unavailable,
            clock=context.clock,
            names=options.instance_types,
        )
    except BaseException:
        await session.__aexit__(None, None, None)
        raise
    return AWSCloudProvider(
        Instances(ec2, cluster_name=cluster.name),
        catalog,
        cluster=cluster,
        nodeclasses=KubeNodeClasses(context.kube),
        launch_templates=LaunchTemplates(ec2, context.clock),
        unavailable=unavailable,
        clock=context.clock,
        on_close=session.aclose,
    )


async def _cluster(session: AWSSession, options: AWSProviderOptions, *, name: str) -> ClusterInfo:
    if options.cluster_endpoint is not None and options.cluster_ca_bundle is not None:
        return ClusterInfo(
            name=name,
            region=options.region,
            endpoint=options.cluster_endpoint,
            ca_bundle=options.cluster_ca_bundle,
            service_cidr=options.cluster_cidr,
        )
    try:
        found = await describe_cluster(await session.client("eks"), name)
    except (AWSError, ConfigurationError) as e:
        raise ProviderConfigError(
            f"aws provider: cluster {name!r} could not be read from EKS ({e}); give "
            "'cluster-endpoint' and 'cluster-ca-bundle' instead"
        ) from e
    if options.cluster_cidr is not None:
        return attrs.evolve(found.info, service_cidr=options.cluster_cidr)
    return found.info
