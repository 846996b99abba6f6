"""karpy's AWS cloud provider: CreateFleet, launch templates, SSM AMI discovery, SQS interruption.

Registered under the entry-point group ``karpy.providers`` (``aws = "karpy_aws:build"``); karpy
itself never imports it. :func:`build` is the one way to assemble the provider: it owns the
AWS session for as long as the provider is in use.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from opentelemetry import trace

from karpy.runtime.clock import Clock
from karpy_aws.instance import Instances
from karpy_aws.launchtemplate import LaunchTemplates
from karpy_aws.nodeclaims import ClusterInfo
from karpy_aws.offerings import InstanceTypeCatalog
from karpy_aws.pricing import PriceCache, pricing_endpoint_region
from karpy_aws.provider import AWSCloudProvider, NodeClassSource
from karpy_aws.session import AWSSession, AWSSettings, EventHook
from karpy_aws.unavailable import UnavailableOfferings

__all__ = ["AWSCloudProvider", "AWSSettings", "ClusterInfo", "NodeClassSource", "build"]


@contextlib.asynccontextmanager
async def build(
    settings: AWSSettings,
    cluster: ClusterInfo,
    *,
    nodeclasses: NodeClassSource,
    clock: Clock,
    tracer: trace.Tracer | None = None,
    hooks: Sequence[EventHook] = (),
    instance_types: Sequence[str] = (),
    use_pricing_api: bool = True,
) -> AsyncIterator[AWSCloudProvider]:
    """An AWSCloudProvider whose AWS clients live as long as the ``async with`` block.

    ``instance_types`` narrows the catalog (empty: every type EC2 describes);
    ``use_pricing_api=False`` estimates on-demand prices (isolated regions, tests).
    """
    async with AWSSession(settings, tracer=tracer, hooks=hooks) as session:
        ec2 = await session.client("ec2")
        pricing = (
            await session.client("pricing", region=pricing_endpoint_region(settings.region))
            if use_pricing_api
            else None
        )
        unavailable = UnavailableOfferings(clock)
        prices = PriceCache(ec2=ec2, pricing=pricing, clock=clock, region=settings.region)
        catalog = InstanceTypeCatalog(
            ec2=ec2, prices=prices, unavailable=unavailable, clock=clock, names=instance_types
        )
        yield AWSCloudProvider(
            Instances(ec2, cluster_name=cluster.name),
            catalog,
            cluster=cluster,
            nodeclasses=nodeclasses,
            launch_templates=LaunchTemplates(ec2, clock),
            unavailable=unavailable,
            clock=clock,
        )
