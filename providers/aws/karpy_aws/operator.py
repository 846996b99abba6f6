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
import logging
from collections.abc import Mapping
from typing import Any, Final

import attrs
from opentelemetry import trace

from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError
from karpy.manager import Declaration
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.controllers.capacitytype import CapacityTypeController
from karpy_aws.controllers.instanceprofiles import InstanceProfileGC
from karpy_aws.controllers.instancestatus import InstanceStatusController
from karpy_aws.controllers.interruption.controller import InterruptionController
from karpy_aws.controllers.interruption.sqs import check_queue
from karpy_aws.controllers.learning import LearningController
from karpy_aws.controllers.nodeclass.controller import NodeClassController
from karpy_aws.controllers.tagging import TaggingController
from karpy_aws.controllers.upkeep import LeakedInstanceController
from karpy_aws.errors import AWSError, ConfigurationError
from karpy_aws.providers.amifamily.amis import DEFAULT_SSM_PREFIX
from karpy_aws.providers.capacityreservations import ReservationAvailability
from karpy_aws.providers.cluster import (
    KUBE_DNS_PATH,
    ClusterInfo,
    IPFamily,
    describe_cluster,
    kube_dns_ip,
    with_network,
)
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.instancetype.instancetypes import (
    DEFAULT_RESERVED_ENIS,
    VM_MEMORY_OVERHEAD_PERCENT,
)
from karpy_aws.providers.instancetype.offerings import CATALOG_READ_TIMEOUT, InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.pricing import PriceCache, pricing_endpoint_region
from karpy_aws.providers.region import configured_region, imds_endpoint, region_from_imds
from karpy_aws.providers.version import KubernetesVersion, check_pinned
from karpy_aws.session import AWSSession, AWSSettings, is_loopback

__all__ = ["EC2NODECLASSES", "AWSProviderOptions", "ViewNodeClasses", "build"]

_BOOLEANS: Final = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}
"""Go's strconv.ParseBool words (case aside), as Karpenter reads ISOLATED_VPC and the like."""
TELEMETRY_SERVICE: Final = "karpy-aws"
VIEW_SYNC_WAIT: Final = 60.0  # seconds a NodeClass read waits for the view's first listing

log = logging.getLogger(__name__)


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
    """The provider's settings, typed: Karpenter's variables and flags (`CLUSTER_ENDPOINT`,
    `--cluster-endpoint`, ...: karpy.runtime.options.NAMED_PROVIDER_SETTINGS) or karpy's
    ``--provider-setting key=value``, both arriving here by key."""

    region: str | None = None
    """None: the region of the instance karpy runs on, from instance metadata (as Karpenter's
    AWS SDK does when ``AWS_REGION`` is unset)."""
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
    vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT
    """The share of an instance type's memory the hypervisor and OS keep (Karpenter's
    VM_MEMORY_OVERHEAD_PERCENT): a type's capacity is its EC2 memory less this."""
    reserved_enis: int = DEFAULT_RESERVED_ENIS
    """ENIs per instance the VPC CNI may not use for pods (Karpenter's RESERVED_ENIS), taken
    out of the ENI-limited max-pods."""
    isolated_vpc: bool = False
    """No route to AWS endpoints without a VPC endpoint (Karpenter's ISOLATED_VPC): the Pricing
    API is not called, prices come from the built-in table."""
    eks_control_plane: bool = False
    """The control plane is EKS (Karpenter's EKS_CONTROL_PLANE): the Kubernetes version and
    service CIDR are read from DescribeCluster even when the endpoint and CA are given."""

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
        if "region" in values and not values["region"]:
            raise ProviderConfigError(
                f"aws provider setting {_named('region')} is empty; give a region or leave it "
                "unset to read it from instance metadata"
            )
        if values.get("isolated_vpc") and values.get("use_pricing_api"):
            raise ProviderConfigError(
                f"aws provider settings {_named('isolated-vpc')} and 'use-pricing-api' are both "
                "true: an isolated VPC cannot reach the Pricing API"
            )
        if values.get("isolated_vpc"):
            values["use_pricing_api"] = False
        return cls(**values)


_KARPENTER_NAMES: Final = {
    "region": "AWS_REGION",
    "cluster-endpoint": "CLUSTER_ENDPOINT",
    "cluster-ca-bundle": "CLUSTER_CA_BUNDLE",
    "interruption-queue": "INTERRUPTION_QUEUE",
    "vm-memory-overhead-percent": "VM_MEMORY_OVERHEAD_PERCENT",
    "reserved-enis": "RESERVED_ENIS",
    "isolated-vpc": "ISOLATED_VPC",
    "eks-control-plane": "EKS_CONTROL_PLANE",
}
"""The variable a Karpenter user knows each key by, for error messages."""


def _named(key: str) -> str:
    env = _KARPENTER_NAMES.get(key)
    return f"{key!r} ({env})" if env else repr(key)


def _parse(key: str, raw: str) -> object:
    named = _named(key)
    if key in ("require-loopback-endpoint", "use-pricing-api", "isolated-vpc", "eks-control-plane"):
        if raw.lower() not in _BOOLEANS:
            raise ProviderConfigError(f"aws provider setting {named}: {raw!r} is not true/false")
        return _BOOLEANS[raw.lower()]
    if key == "max-attempts":
        if not raw.isdigit() or int(raw) < 1:
            raise ProviderConfigError(f"aws provider setting {named}: {raw!r} is not a count >= 1")
        return int(raw)
    if key == "reserved-enis":
        if not raw.isdigit():
            raise ProviderConfigError(f"aws provider setting {named}: {raw!r} is not a count >= 0")
        return int(raw)
    if key == "vm-memory-overhead-percent":
        try:
            share = float(raw)
        except ValueError:
            share = -1.0
        if not 0.0 <= share < 1.0:
            raise ProviderConfigError(
                f"aws provider setting {named}: {raw!r} is not a fraction in [0, 1) (0.075 is 7.5%)"
            )
        return share
    if key == "retry-mode" and raw not in ("standard", "adaptive"):
        raise ProviderConfigError(f"aws provider setting {named}: {raw!r} is not standard/adaptive")
    if key == "instance-types":
        return tuple(sorted({t.strip() for t in raw.split(",") if t.strip()}))
    if key == "kubernetes-version":
        try:
            return check_pinned(raw)
        except ConfigurationError as e:
            raise ProviderConfigError(f"aws provider setting {named}: {e}") from e
    if key == "ssm-prefix" and (not raw.startswith("/") or raw.endswith("/")):
        raise ProviderConfigError(
            f"aws provider setting {named}: {raw!r} must start with '/' and not end with it"
        )
    if key == "interruption-queue":
        try:
            return check_queue(raw)
        except ValueError as e:
            raise ProviderConfigError(f"aws provider setting {named}: {e}") from e
    return raw


async def build(context: ProviderContext[KubeClient, ClusterView]) -> AWSCloudProvider:
    """The entry point's factory. The returned provider owns an AWS session: ``aclose()`` it.

    Raises ProviderConfigError for bad settings, a cluster EKS does not know, or a context
    without a cluster view (the provider reads EC2NodeClasses and NodeClaims through it).
    """
    options = AWSProviderOptions.from_settings(context.settings)
    region = options.region or configured_region() or await _imds_region(options)
    try:
        settings = AWSSettings(
            region=region,
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
        cluster, eks_version, eks_family = await _cluster(
            session, options, name=context.cluster_name
        )
        cluster = with_network(cluster, dns_ip=await _kube_dns(context.kube), ip_family=eks_family)
        log.info(
            "discovered cluster network",
            extra={
                "ip_family": cluster.ip_family,
                "cluster_dns": cluster.dns_ip,
                "service_cidr": cluster.service_cidr,
            },
        )
        view = context.view
        if view is None:
            raise ProviderConfigError("aws provider: the context has no cluster view to read")
        ec2 = await session.client("ec2")
        pricing = (
            await session.client("pricing", region=pricing_endpoint_region(region))
            if options.use_pricing_api
            else None
        )
        unavailable = UnavailableOfferings(context.clock)
        prices = PriceCache(ec2=ec2, pricing=pricing, clock=context.clock, region=region)
        catalog = InstanceTypeCatalog(
            ec2=await session.client("ec2", read_timeout=CATALOG_READ_TIMEOUT),
            prices=prices,
            unavailable=unavailable,
            clock=context.clock,
            names=options.instance_types,
            vm_memory_overhead_percent=options.vm_memory_overhead_percent,
            reserved_enis=options.reserved_enis,
        )
        instances = Instances(ec2, cluster_name=cluster.name)
        reservations = ReservationAvailability(ec2, context.clock)
        templates = LaunchTemplates(ec2, context.clock)
        iam = await session.client("iam")
        nodeclasses = NodeClassController(
            context.kube,
            view,
            ec2=ec2,
            ssm=await session.client("ssm"),
            profiles=InstanceProfiles(
                iam,
                context.clock,
                cluster_name=cluster.name,
                region=region,
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
        health = InstanceStatusController(
            context.kube, view, ec2, clock=context.clock, telemetry=telemetry
        )
        learning = LearningController(view, catalog.learned)
        capacity_types = CapacityTypeController(context.kube, view, reservations)
        profiles_gc = InstanceProfileGC(
            view,
            iam,
            instances,
            cluster_name=cluster.name,
            region=region,
            clock=context.clock,
        )
        controllers: tuple[Declaration, ...] = (
            nodeclasses.spec(),
            leaked.spec(),
            tagging.spec(),
            health.spec(),
            profiles_gc.spec(),
            learning.spec(),
            capacity_types.spec(),
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
                reservations=reservations,
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
        reservations=reservations,
    )


async def _imds_region(options: AWSProviderOptions) -> str:
    endpoint = imds_endpoint()
    if options.require_loopback_endpoint and not is_loopback(endpoint):
        raise ProviderConfigError(
            "aws provider: 'require-loopback-endpoint' is set and the region is not, so the "
            f"instance metadata endpoint must be loopback too; it is {endpoint!r}"
        )
    try:
        return await region_from_imds(endpoint=endpoint)
    except ConfigurationError as e:
        raise ProviderConfigError(f"aws provider: {e}") from e


async def _kube_dns(kube: KubeClient) -> str | None:
    """The ``kube-dns`` Service's ClusterIP, or None (logged) when there is none to read: a
    cluster with another DNS setup still gets nodes, whose AMI then picks the DNS address, as
    with Karpenter."""
    try:
        service = await kube.request("GET", KUBE_DNS_PATH)
    except KubeError as e:
        log.warning("unable to read the kube-dns service", extra={"error": str(e)})
        return None
    return kube_dns_ip(service)


async def _cluster(
    session: AWSSession, options: AWSProviderOptions, *, name: str
) -> tuple[ClusterInfo, str | None, IPFamily | None]:
    """The cluster nodes join, and EKS's Kubernetes version and IP family when EKS was asked.

    EKS is asked (DescribeCluster) when the endpoint or the CA bundle is not given, or when
    EKS_CONTROL_PLANE says the control plane is EKS; a given endpoint, CA or service CIDR
    overrides what EKS says, as Karpenter's settings do.
    """
    endpoint, ca_bundle = options.cluster_endpoint, options.cluster_ca_bundle
    if endpoint is not None and ca_bundle is not None and not options.eks_control_plane:
        return (
            ClusterInfo(
                name=name,
                region=session.settings.region,
                endpoint=endpoint,
                ca_bundle=ca_bundle,
                service_cidr=options.cluster_cidr,
            ),
            None,
            None,
        )
    try:
        found = await describe_cluster(await session.client("eks"), name)
    except (AWSError, ConfigurationError) as e:
        raise ProviderConfigError(
            f"aws provider: cluster {name!r} could not be read from EKS ({e}); give "
            "CLUSTER_ENDPOINT and CLUSTER_CA_BUNDLE instead (and EKS_CONTROL_PLANE=false)"
        ) from e
    info = found.info
    info = attrs.evolve(
        info,
        endpoint=endpoint or info.endpoint,
        ca_bundle=ca_bundle or info.ca_bundle,
        service_cidr=options.cluster_cidr or info.service_cidr,
    )
    return info, found.kubernetes_version or None, found.ip_family
