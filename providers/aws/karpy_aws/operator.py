"""The ``karpy.providers`` entry point: build an AWSCloudProvider from the operator's context.

The operator finds providers by name and calls their factory with a ProviderContext (the
apiserver client, its cluster view, the clock, the cluster name and the provider's own string
settings). This module turns those settings into typed options — refusing unknown or malformed
ones with a ProviderConfigError that names the key — opens the AWS session the provider owns
until ``aclose()``, discovers the cluster from EKS when its endpoint is not given, and builds the
provider with its collaborators: the EC2NodeClass controller, leaked-instance garbage collection,
tagging of registered instances and, when an interruption queue is given, the interruption
controller. It runs none of them: the provider declares them (``extension()``) and the operator
runs them with its own controllers, all reading NodeClaims and EC2NodeClasses from the view.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Final

import attrs
from opentelemetry import trace

from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.kube.client import KubeClient
from karpy.manager import Declaration
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.controllers.interruption.controller import InterruptionController
from karpy_aws.controllers.interruption.sqs import check_queue
from karpy_aws.controllers.nodeclass.controller import NodeClassController
from karpy_aws.controllers.tagging import TaggingController
from karpy_aws.controllers.upkeep import LeakedInstanceController
from karpy_aws.errors import AWSError, ConfigurationError
from karpy_aws.providers.amifamily.amis import DEFAULT_SSM_PREFIX
from karpy_aws.providers.cluster import ClusterInfo, describe_cluster
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.instancetype.offerings import InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.pricing import PriceCache, pricing_endpoint_region
from karpy_aws.providers.version import KubernetesVersion, check_pinned
from karpy_aws.session import AWSSession, AWSSettings

__all__ = ["EC2NODECLASSES", "AWSProviderOptions", "ViewNodeClasses", "build"]

_BOOLEANS: Final = {"true": True, "false": False}
TELEMETRY_SERVICE: Final = "karpy-aws"
VIEW_SYNC_WAIT: Final = 60.0  # seconds a NodeClass read waits for the view's first listing


class ViewNodeClasses:
    """EC2NodeClasses read from the operator's cluster view (informed; no apiserver call).

    Right after a start the view may not have listed the EC2NodeClasses yet. "Not found" then
    would be wrong, and costly: a launch fails NodeClassNotReady and the NodeClaim is deleted (as
    in Karpenter), so a NodeClaim a crashed process had launched lost its instance to garbage
    collection. ``get`` first waits, up to ``sync_wait`` seconds, for the view's first listing.
    """

    def __init__(self, view: ClusterView, *, sync_wait: float = VIEW_SYNC_WAIT) -> None:
        self._view = view
        self._sync_wait = sync_wait

    async def get(self, name: str) -> EC2NodeClass | None:
        if not self._view.informers_synced:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._sync_wait):
                    await self._view.wait_synced()
        return self._view.get(EC2NODECLASSES, name)


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
    kubernetes_version: str | None = None
    ssm_prefix: str = DEFAULT_SSM_PREFIX
    interruption_queue: str | None = None
    """The SQS queue (name or URL) EventBridge sends interruption events to (Karpenter's
    INTERRUPTION_QUEUE); None runs no interruption controller."""

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
    if key == "kubernetes-version":
        try:
            return check_pinned(raw)
        except ConfigurationError as e:
            raise ProviderConfigError(f"aws provider setting {key!r}: {e}") from e
    if key == "ssm-prefix" and (not raw.startswith("/") or raw.endswith("/")):
        raise ProviderConfigError(
            f"aws provider setting {key!r}: {raw!r} must start with '/' and not end with it"
        )
    if key == "interruption-queue":
        try:
            return check_queue(raw)
        except ValueError as e:
            raise ProviderConfigError(f"aws provider setting {key!r}: {e}") from e
    return raw


async def build(context: ProviderContext[KubeClient, ClusterView]) -> AWSCloudProvider:
    """The entry point's factory. The returned provider owns an AWS session: ``aclose()`` it.

    Raises ProviderConfigError for bad settings, a cluster EKS does not know, or a context
    without a cluster view (the provider reads EC2NodeClasses and NodeClaims through it).
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
    # Inside the operator the loops and AWS calls report through its telemetry (one trace per
    # reconcile with the AWS calls as children, metrics on its /metrics); built alone (tests,
    # tools) the provider gets a private meter and the global tracer, and shuts them down itself.
    owns_telemetry = context.telemetry is None
    telemetry = (
        context.telemetry
        if context.telemetry is not None
        else attrs.evolve(
            Telemetry.setup(service_name=TELEMETRY_SERVICE), tracer=trace.get_tracer("karpy_aws")
        )
    )
    session = AWSSession(settings, tracer=telemetry.tracer)
    await session.__aenter__()
    try:
        cluster, eks_version = await _cluster(session, options, name=context.cluster_name)
        view = context.view
        if view is None:
            raise ProviderConfigError("aws provider: the context has no cluster view to read")
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
        instances = Instances(ec2, cluster_name=cluster.name)
        templates = LaunchTemplates(ec2, context.clock)
        nodeclasses = NodeClassController(
            context.kube,
            view,
            ec2=ec2,
            ssm=await session.client("ssm"),
            profiles=InstanceProfiles(
                await session.client("iam"),
                context.clock,
                cluster_name=cluster.name,
                region=options.region,
            ),
            templates=templates,
            version=KubernetesVersion(
                context.kube,
                context.clock,
                pinned=options.kubernetes_version,
                fallback=eks_version,
            ),
            clock=context.clock,
            cluster_name=cluster.name,
            ssm_prefix=options.ssm_prefix,
        )
        leaked = LeakedInstanceController(context.kube, view, instances, clock=context.clock)
        tagging = TaggingController(context.kube, view, instances)
        controllers: tuple[Declaration, ...] = (
            nodeclasses.spec(),
            leaked.spec(),
            tagging.spec(),
        )
        if options.interruption_queue is not None:
            interruption = InterruptionController(
                context.kube,
                view,
                await session.client("sqs"),
                queue=options.interruption_queue,
                unavailable=unavailable,
                clock=context.clock,
                telemetry=telemetry,
            )
            controllers = (*controllers, interruption.spec())
    except BaseException:
        await session.__aexit__(None, None, None)
        if owns_telemetry:
            telemetry.shutdown()
        raise

    async def close() -> None:
        try:
            await session.aclose()
        finally:
            if owns_telemetry:  # the operator's telemetry outlives its provider
                telemetry.shutdown()

    return AWSCloudProvider(
        instances,
        catalog,
        cluster=cluster,
        nodeclasses=ViewNodeClasses(view),
        launch_templates=templates,
        unavailable=unavailable,
        clock=context.clock,
        on_close=close,
        controllers=controllers,
    )


async def _cluster(
    session: AWSSession, options: AWSProviderOptions, *, name: str
) -> tuple[ClusterInfo, str | None]:
    """The cluster nodes join, and EKS's Kubernetes version when EKS was asked."""
    if options.cluster_endpoint is not None and options.cluster_ca_bundle is not None:
        return ClusterInfo(
            name=name,
            region=options.region,
            endpoint=options.cluster_endpoint,
            ca_bundle=options.cluster_ca_bundle,
            service_cidr=options.cluster_cidr,
        ), None
    try:
        found = await describe_cluster(await session.client("eks"), name)
    except (AWSError, ConfigurationError) as e:
        raise ProviderConfigError(
            f"aws provider: cluster {name!r} could not be read from EKS ({e}); give "
            "'cluster-endpoint' and 'cluster-ca-bundle' instead"
        ) from e
    info = found.info
    if options.cluster_cidr is not None:
        info = attrs.evolve(info, service_cidr=options.cluster_cidr)
    return info, found.kubernetes_version or None
