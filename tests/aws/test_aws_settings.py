"""The AWS provider's settings under Karpenter's names: each one typed, refused by name when
malformed, and acted on — the region from instance metadata when unset (an IMDSv2 service on
127.0.0.1), the memory overhead and reserved ENIs in the instance types' capacity, the
cluster read from EKS (moto) for what is not given."""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from karpy.apis.v1 import labels as wk
from karpy.cloudprovider.registry import ProviderConfigError, ProviderContext
from karpy.core.resources import MEMORY, PODS
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.runtime.clock import FakeClock
from karpy.runtime.options import load
from karpy.runtime.telemetry import Telemetry
from karpy_aws import AWSProviderOptions, build
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.operator import EC2NODECLASSES, _cluster
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.instancetype.instancetypes import (
    MIB,
    KubeletSettings,
    eni_limited_pods,
)
from karpy_aws.providers.instancetype.offerings import InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.pricing import PriceCache
from karpy_aws.providers.region import configured_region, region_from_imds
from karpy_aws.session import AWSSession
from karpy_aws_emulator.imds import TOKEN_PATH, ZONE_PATH, metadata_service
from tests.support.providers import Informed

from .conftest import (
    REGION,
    Moto,
    boto_client,
    make_nodeclaim,
    provider_settings,
    ready_nodeclass,
)

pytestmark = pytest.mark.aws


def test_karpenters_variables_reach_the_provider_typed() -> None:
    options = load(
        ["--provider", "aws", "--eks-control-plane"],
        {
            "AWS_REGION": "eu-west-1",
            "CLUSTER_ENDPOINT": "https://k.example",
            "INTERRUPTION_QUEUE": "karpy-demo",
            "VM_MEMORY_OVERHEAD_PERCENT": "0.1",
            "RESERVED_ENIS": "1",
            "ISOLATED_VPC": "true",
        },
    )
    typed = AWSProviderOptions.from_settings(options.provider.settings)
    assert typed.region == "eu-west-1"
    assert typed.cluster_endpoint == "https://k.example"
    assert typed.interruption_queue == "karpy-demo"
    assert typed.vm_memory_overhead_percent == 0.1
    assert typed.reserved_enis == 1
    assert typed.isolated_vpc is True
    assert typed.use_pricing_api is False  # an isolated VPC cannot reach the Pricing API
    assert typed.eks_control_plane is True
    assert AWSProviderOptions.from_settings({}).region is None  # from IMDS at build time
    # Go's ParseBool words, as Karpenter reads its booleans
    assert AWSProviderOptions.from_settings({"eks-control-plane": "1"}).eks_control_plane
    assert not AWSProviderOptions.from_settings({"isolated-vpc": "F"}).isolated_vpc


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        pytest.param(
            {"vm-memory-overhead-percent": "7.5"},
            r"'vm-memory-overhead-percent' \(VM_MEMORY_OVERHEAD_PERCENT\): '7.5' is not a fraction",
            id="percent-as-whole-number",
        ),
        pytest.param(
            {"reserved-enis": "-1"}, r"'reserved-enis' \(RESERVED_ENIS\): '-1'", id="enis"
        ),
        pytest.param(
            {"isolated-vpc": "yes please"}, r"'isolated-vpc' \(ISOLATED_VPC\)", id="isolated"
        ),
        pytest.param(
            {"eks-control-plane": "yes"}, r"'eks-control-plane' \(EKS_CONTROL_PLANE\)", id="eks"
        ),
        pytest.param(
            {"isolated-vpc": "true", "use-pricing-api": "true"},
            "cannot reach the Pricing API",
            id="isolated-with-pricing",
        ),
        pytest.param({"region": ""}, r"'region' \(AWS_REGION\) is empty", id="empty-region"),
    ],
)
def test_a_bad_karpenter_setting_is_refused_by_both_names(
    settings: dict[str, str], match: str
) -> None:
    with pytest.raises(ProviderConfigError, match=match):
        AWSProviderOptions.from_settings(settings)


async def test_the_region_comes_from_instance_metadata_over_imdsv2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)  # the moto env sets it
    async with metadata_service("ap-southeast-2b") as imds:
        assert await region_from_imds(endpoint=imds.endpoint) == "ap-southeast-2"
    methods = [(method, path.rstrip("/")) for method, path, _ in imds.requests]
    assert methods == [("PUT", TOKEN_PATH), ("GET", ZONE_PATH)]
    assert imds.requests[-1][2] is True  # the GET carried the session token


async def test_no_metadata_service_is_an_error_that_says_to_set_the_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    async with metadata_service("us-west-2a") as imds:
        gone = imds.endpoint
    with pytest.raises(Exception, match="did not answer; set AWS_REGION") as caught:
        await region_from_imds(endpoint=gone, deadline=5)
    assert gone in str(caught.value)
    async with metadata_service("not-a-zone") as imds:
        with pytest.raises(Exception, match="answered 'not-a-zon'"):
            await region_from_imds(endpoint=imds.endpoint)


async def test_without_a_region_a_loopback_only_provider_refuses_a_real_imds(
    kube: KubeClient, moto: Moto, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254/")
    settings = provider_settings(moto)
    del settings["region"]
    context: ProviderContext[Any, Any] = ProviderContext(
        kube=kube, clock=FakeClock(), cluster_name="c", settings=settings
    )
    with pytest.raises(ProviderConfigError, match="instance metadata endpoint must be loopback"):
        await build(context)


@pytest.mark.cluster
async def test_a_provider_without_a_region_setting_runs_in_the_instances_region(
    kube: KubeClient, moto: Moto, monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry
) -> None:
    """Only the cluster name (and how to reach the cluster) given, as with Karpenter's chart."""
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)  # moto's environment sets it
    async with metadata_service(f"{REGION}c") as imds:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint)
        settings = provider_settings(
            moto,
            **{
                "cluster-endpoint": "https://k.test",
                "cluster-ca-bundle": "Q0E=",
                "vm-memory-overhead-percent": "0.2",
                "reserved-enis": "1",
            },
        )
        del settings["region"]
        informed = Informed(kube, telemetry)
        informed.inform(EC2NODECLASSES)
        async with informed.running() as view:
            provider = await build(
                ProviderContext(
                    kube=kube,
                    view=view,
                    clock=FakeClock(),
                    cluster_name=f"imds-{secrets.token_hex(3)}",
                    settings=settings,
                )
            )
            try:
                assert isinstance(provider, AWSCloudProvider)
                assert provider.cluster.region == REGION
                assert provider.cluster.endpoint == "https://k.test"
            finally:
                await provider.aclose()
    assert [path.rstrip("/") for _, path, _ in imds.requests] == [TOKEN_PATH, ZONE_PATH]


async def test_the_sdks_configured_region_comes_before_instance_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AWS_DEFAULT_REGION (EKS Pod Identity and IRSA set it beside AWS_REGION) is the SDK's
    second source, as in Karpenter's SDK; no IMDS call is made then."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert configured_region() == "eu-central-1"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)  # no profile to name a region either
    assert configured_region() is None


async def test_memory_overhead_and_reserved_enis_shape_the_instance_types(
    session: AWSSession,
) -> None:
    ec2 = await session.client("ec2")

    def catalog(**settings: Any) -> InstanceTypeCatalog:
        clock = FakeClock()
        return InstanceTypeCatalog(
            ec2=ec2,
            prices=PriceCache(ec2=ec2, pricing=None, clock=clock, region=REGION),
            unavailable=UnavailableOfferings(clock),
            clock=clock,
            names=["m5.large"],
            **settings,
        )

    default, tuned = catalog(), catalog(vm_memory_overhead_percent=0.2, reserved_enis=1)
    await default.refresh()
    await tuned.refresh()
    (before,) = default.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
    (after,) = tuned.instance_types(family=AMIFamily.AL2023, kubelet=KubeletSettings())
    info = default.info("m5.large")
    assert info is not None
    assert before.labels[wk.LABEL_INSTANCE_TYPE] == "m5.large"
    assert before.capacity[MEMORY] == (info.memory_mib - 615) * MIB  # 7.5% of 8192 MiB, up
    assert after.capacity[MEMORY] == (info.memory_mib - 1639) * MIB  # 20%
    assert before.capacity[PODS] == eni_limited_pods(info) == 29  # 3 ENIs x (10 - 1) + 2
    assert after.capacity[PODS] == eni_limited_pods(info, reserved_enis=1) == 20


async def test_eks_fills_in_what_is_not_given_and_what_is_given_wins(
    session: AWSSession, moto: Moto
) -> None:
    name = f"eks-{secrets.token_hex(4)}"
    created = boto_client(moto, "eks").create_cluster(
        name=name,
        version="1.31",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(moto.subnets.values())[:2]},
    )["cluster"]
    # CLUSTER_ENDPOINT alone (Karpenter's chart sets only that): the CA comes from EKS.
    only_endpoint = AWSProviderOptions.from_settings({"cluster-endpoint": "https://mine.test"})
    info, version, _ = await _cluster(session, only_endpoint, name=name)
    assert info.endpoint == "https://mine.test"
    assert info.ca_bundle == created["certificateAuthority"]["data"]
    assert version == "1.31"
    # Endpoint and CA given: EKS is not asked unless EKS_CONTROL_PLANE says the plane is EKS.
    given = {"cluster-endpoint": "https://mine.test", "cluster-ca-bundle": "Q0E="}
    info, version, _ = await _cluster(
        session, AWSProviderOptions.from_settings(given), name="not-in-eks"
    )
    assert (info.ca_bundle, info.service_cidr, version) == ("Q0E=", None, None)
    eks = AWSProviderOptions.from_settings({**given, "eks-control-plane": "true"})
    info, version, family = await _cluster(session, eks, name=name)
    assert (info.endpoint, info.ca_bundle) == ("https://mine.test", "Q0E=")
    assert (info.service_cidr, version, family) == ("172.20.0.0/16", "1.31", None)
    with pytest.raises(ProviderConfigError, match="EKS_CONTROL_PLANE=false"):
        await _cluster(session, eks, name="not-in-eks")


@pytest.mark.cluster
async def test_nodes_get_the_clusters_dns_address_from_its_kube_dns_service(
    kube: KubeClient, moto: Moto, telemetry: Telemetry
) -> None:
    """As Karpenter does: the kube-dns Service's ClusterIP is the kubelet's clusterDNS in the
    user data of an EC2NodeClass that names none, and its family is the cluster's."""
    services = "/api/v1/namespaces/kube-system/services"
    try:
        existing: Mapping[str, Any] | None = await kube.request("GET", f"{services}/kube-dns")
    except NotFoundError:
        existing = None
    if existing is None:
        created = await kube.request(
            "POST",
            services,
            body={
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "kube-dns", "namespace": "kube-system"},
                "spec": {"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
            },
        )
    dns_ip = str((existing or created)["spec"]["clusterIP"])
    name = f"dns-{secrets.token_hex(3)}"
    cluster_name = f"dns-{secrets.token_hex(3)}"
    await kube.create(EC2NODECLASSES, ready_nodeclass(moto, name=name))
    try:
        await kube.patch_status(EC2NODECLASSES, name, ready_nodeclass(moto, name=name).status)
        informed = Informed(kube, telemetry)
        informed.inform(EC2NODECLASSES)
        async with informed.running() as view:
            provider = await build(
                ProviderContext(
                    kube=kube,
                    view=view,
                    clock=FakeClock(),
                    cluster_name=cluster_name,
                    settings=provider_settings(
                        moto, **{"cluster-endpoint": "https://k.test", "cluster-ca-bundle": "Q0E="}
                    ),
                )
            )
            try:
                assert isinstance(provider, AWSCloudProvider)
                assert (provider.cluster.dns_ip, provider.cluster.ip_family) == (dns_ip, "ipv4")
                launched = await provider.create(make_nodeclaim(nodeclass=name))
                await provider.delete(launched)
            finally:
                await provider.aclose()
    finally:
        await kube.delete(EC2NODECLASSES, name)
        if existing is None:
            await kube.request("DELETE", f"{services}/kube-dns")
    ec2 = boto_client(moto, "ec2")
    templates = ec2.describe_launch_templates(
        Filters=[{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [cluster_name]}]
    )["LaunchTemplates"]
    assert templates  # one per launch group (AMI and max pods)
    for template in templates:
        (version,) = ec2.describe_launch_template_versions(
            LaunchTemplateId=template["LaunchTemplateId"], Versions=["$Latest"]
        )["LaunchTemplateVersions"]
        user_data = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
        part = user_data.split('Content-Type: application/node.eks.aws; charset="us-ascii"')[1]
        config = yaml.safe_load(part.split("\n--//")[0])
        assert config["spec"]["kubelet"]["config"]["clusterDNS"] == [dns_ip]
