"""The entry point's factory: settings parsed with errors that name the key, and a provider
built from a ProviderContext whose cluster view informs EC2NodeClasses from the real local control
plane, launching on moto."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.cloudprovider import CloudProvider
from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.kube.client import KubeClient
from karpy.kube.resources import Item, ObjectRef
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView
from karpy_aws import AWSProviderOptions, build
from karpy_aws.controllers.nodeclass.status import resolve_status
from karpy_aws.operator import EC2NODECLASSES, ViewNodeClasses
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.session import AWSSession
from tests.support.providers import Informed

from .conftest import (
    K8S_VERSION,
    REGION,
    SSM_PREFIX,
    Moto,
    make_nodeclaim,
    make_nodeclass,
    provider_settings,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        pytest.param({"region": REGION, "colour": "red"}, "'colour' is unknown", id="unknown"),
        pytest.param(
            {"region": REGION, "use-pricing-api": "maybe"}, "'use-pricing-api'", id="bool"
        ),
        pytest.param({"region": REGION, "max-attempts": "0"}, "'max-attempts'", id="count"),
        pytest.param({"region": REGION, "retry-mode": "eager"}, "'retry-mode'", id="mode"),
    ],
)
def test_bad_settings_name_the_key(settings: dict[str, str], match: str) -> None:
    with pytest.raises(ProviderConfigError, match=match):
        AWSProviderOptions.from_settings(settings)


def test_settings_are_typed() -> None:
    options = AWSProviderOptions.from_settings(
        {
            "region": REGION,
            "max-attempts": "5",
            "use-pricing-api": "False",
            "instance-types": "m5.large, c5.large,m5.large",
        }
    )
    assert options.max_attempts == 5
    assert options.use_pricing_api is False
    assert options.instance_types == ("c5.large", "m5.large")


@pytest.mark.cluster
async def test_the_factory_builds_a_provider_reading_nodeclasses_from_the_cluster_view(
    kube: KubeClient, moto: Moto, session: AWSSession
) -> None:
    name = f"aws-{secrets.token_hex(3)}"
    profile = f"given-{secrets.token_hex(3)}"
    await kube.create(
        EC2NODECLASSES, ready_nodeclass(moto, name=name, instance_profile=profile, role=None)
    )
    try:
        iam = await session.client("iam")
        await iam.call("CreateInstanceProfile", InstanceProfileName=profile)
        stored = await kube.get(EC2NODECLASSES, name)
        status = await resolve_status(
            stored,
            ec2=await session.client("ec2"),
            ssm=await session.client("ssm"),
            profiles=InstanceProfiles(iam, FakeClock(), cluster_name="c", region=REGION),
            k8s_version=K8S_VERSION,
            clock=FakeClock(),
            ssm_prefix=SSM_PREFIX,
        )
        await kube.patch_status(EC2NODECLASSES, name, status)
        spans = InMemorySpanExporter()
        telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=spans)
        informed = Informed(kube, telemetry)
        informed.inform(EC2NODECLASSES)
        async with informed.running() as view:
            context = ProviderContext(
                kube=kube,
                view=view,
                clock=FakeClock(),
                cluster_name=f"built-{secrets.token_hex(3)}",
                settings=provider_settings(
                    moto, **{"cluster-endpoint": "https://k.test", "cluster-ca-bundle": "Q0E="}
                ),
                telemetry=telemetry,
            )
            provider = await build(context)
            try:
                assert isinstance(provider, CloudProvider)
                assert await ViewNodeClasses(view).get("no-such-nodeclass") is None
                launched = await provider.create(make_nodeclaim(nodeclass=name))
                assert launched.status.provider_id is not None
                assert [n.status.provider_id for n in await provider.list()] == [
                    launched.status.provider_id
                ]
                await provider.delete(launched)
                # The AWS calls report through the operator's telemetry it was given.
                names = {span.name for span in spans.get_finished_spans()}
                assert {"aws.ec2.CreateFleet", "aws.ec2.TerminateInstances"} <= names
            finally:
                await provider.aclose()
        # Closing the provider leaves the operator's telemetry working.
        with telemetry.tracer.start_as_current_span("after the provider closed"):
            pass
        assert "after the provider closed" in {s.name for s in spans.get_finished_spans()}
        telemetry.shutdown()
    finally:
        await kube.delete(EC2NODECLASSES, name)


@pytest.mark.cluster
async def test_a_cluster_eks_does_not_know_is_a_config_error(kube: KubeClient, moto: Moto) -> None:
    context: ProviderContext[Any, Any] = ProviderContext(
        kube=kube, clock=FakeClock(), cluster_name="not-in-eks", settings=provider_settings(moto)
    )
    with pytest.raises(ProviderConfigError, match="'not-in-eks' could not be read from EKS"):
        await build(context)


async def test_a_nodeclass_read_waits_for_the_views_first_listing(telemetry: Telemetry) -> None:
    """Right after a start: a launch asking for its EC2NodeClass before the informer has listed
    must get the class, not "not found" (which deletes the NodeClaim)."""
    state = ClusterState(metrics=telemetry.metrics)
    store = state.register(EC2NODECLASSES)
    nodeclasses = ViewNodeClasses(ClusterView(state), sync_wait=30)
    asking = asyncio.create_task(nodeclasses.get("listed-late"))
    await asyncio.sleep(0.05)
    assert not asking.done()
    ref = ObjectRef(
        kind="EC2NodeClass", namespace="", name="listed-late", uid="u1", resource_version="1"
    )
    store.replace([Item(ref=ref, obj=make_nodeclass("listed-late"))])
    state.mark_listed()
    found = await asyncio.wait_for(asking, timeout=5)
    assert found is not None
    assert found.metadata.name == "listed-late"
    # Once listed, an unknown name is simply not found, at once.
    assert await ViewNodeClasses(ClusterView(state), sync_wait=30).get("unknown") is None


async def test_a_nodeclass_read_stops_waiting_for_a_view_that_never_lists(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    state.register(EC2NODECLASSES)
    assert await ViewNodeClasses(ClusterView(state), sync_wait=0.05).get("any") is None
