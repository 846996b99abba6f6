"""EKS cluster discovery on moto: endpoint, CA, service CIDR and Kubernetes version."""

from __future__ import annotations

import secrets

import pytest

from karpy_aws.errors import NotFoundError
from karpy_aws.providers.cluster import describe_cluster
from karpy_aws.session import AWSSession

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


async def test_an_unknown_cluster_is_not_found(session: AWSSession) -> None:
    with pytest.raises(NotFoundError):
        await describe_cluster(await session.client("eks"), "no-such-cluster")
