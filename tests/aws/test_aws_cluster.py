"""EKS cluster discovery on moto: endpoint, CA, service CIDR and Kubernetes version."""

from __future__ import annotations

import secrets

import attrs
import pytest

from karpy_aws.errors import NotFoundError
from karpy_aws.providers.cluster import (
    ClusterInfo,
    IPFamily,
    describe_cluster,
    kube_dns_ip,
    with_network,
)
from karpy_aws.session import AWSSession
from karpy_aws_emulator.eks import ipv6_service_cidr

from .conftest import REGION, Moto, boto_client

pytestmark = pytest.mark.aws


async def test_an_eks_cluster_describes_what_nodes_need(session: AWSSession, moto: Moto) -> None:
    name = f"eks-{secrets.token_hex(4)}"
    sync = boto_client(moto, "eks")
    created = sync.create_cluster(
        name=name,
        version="1.31",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(moto.subnets.values())[:2]},
    )["cluster"]
    found = await describe_cluster(await session.client("eks"), name)
    assert found.kubernetes_version == "1.31"
    assert found.info.name == name
    assert found.info.region == REGION
    assert found.info.endpoint == created["endpoint"]
    assert found.info.ca_bundle == created["certificateAuthority"]["data"]
    assert found.info.service_cidr == "172.20.0.0/16"
    assert found.info.ip_family == "ipv4"


async def test_an_ipv6_cluster_gives_its_ipv6_service_cidr(session: AWSSession, moto: Moto) -> None:
    name = f"eks6-{secrets.token_hex(4)}"
    boto_client(moto, "eks").create_cluster(
        name=name,
        version="1.31",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(moto.subnets.values())[:2]},
        kubernetesNetworkConfig={"ipFamily": "ipv6"},
    )
    found = await describe_cluster(await session.client("eks"), name)
    assert found.ip_family == "ipv6"
    assert found.info.ip_family == "ipv6"
    assert found.info.service_cidr == ipv6_service_cidr(name)
    assert found.info.service_cidr.endswith("::/108")


@pytest.mark.parametrize(
    ("dns_ip", "eks_family", "cidr", "expected"),
    [
        pytest.param("fd3a:1b2c:3d4e::a", None, None, "ipv6", id="from-the-dns-address"),
        pytest.param("10.100.0.10", None, "172.20.0.0/16", "ipv4", id="ipv4"),
        pytest.param(None, None, "fd00:1::/108", "ipv6", id="from-the-service-cidr"),
        pytest.param(None, "ipv6", None, "ipv6", id="eks-says"),
        pytest.param(None, None, None, "ipv4", id="nothing-known"),
    ],
)
def test_the_ip_family_comes_from_eks_then_the_dns_address_then_the_cidr(
    dns_ip: str | None, eks_family: IPFamily | None, cidr: str | None, expected: str
) -> None:
    info = ClusterInfo(name="c", region=REGION, endpoint="https://k", ca_bundle="Q0E=")
    info = with_network(attrs.evolve(info, service_cidr=cidr), dns_ip=dns_ip, ip_family=eks_family)
    assert (info.ip_family, info.dns_ip) == (expected, dns_ip)
    assert kube_dns_ip({"spec": {"clusterIP": "None"}}) is None  # a headless kube-dns
    assert kube_dns_ip({"spec": {"clusterIP": "fd3a::a"}}) == "fd3a::a"


async def test_an_unknown_cluster_is_not_found(session: AWSSession) -> None:
    with pytest.raises(NotFoundError):
        await describe_cluster(await session.client("eks"), "no-such-cluster")
