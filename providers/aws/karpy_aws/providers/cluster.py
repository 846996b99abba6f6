"""The EKS cluster nodes join: endpoint, CA, service CIDR and Kubernetes version, from EKS.

User data needs the API endpoint, the CA bundle and (for AL2023's nodeadm) the service CIDR, and
AMI aliases resolve per Kubernetes minor version. On EKS all of these come from one
DescribeCluster call, so operators need not copy them into karpy's options; elsewhere the caller
builds ClusterInfo itself.
"""

from __future__ import annotations

import attrs

from karpy_aws.errors import ConfigurationError
from karpy_aws.session import AWSClient


@attrs.frozen(kw_only=True)
class ClusterInfo:
    """The cluster nodes join: what user data and tags need."""

    name: str
    region: str
    endpoint: str
    ca_bundle: str
    service_cidr: str | None = None


@attrs.frozen(kw_only=True)
class DiscoveredCluster:
    """What EKS says about the cluster."""

    info: ClusterInfo
    kubernetes_version: str
    """The control plane's ``<major>.<minor>``, as AMI aliases want it."""


async def describe_cluster(eks: AWSClient, name: str) -> DiscoveredCluster:
    """DescribeCluster ``name`` in the client's region.

    Raises karpy_aws.errors.NotFoundError when there is no such cluster, ConfigurationError when
    it is not active yet (no endpoint or CA).
    """
    cluster = (await eks.call("DescribeCluster", name=name))["cluster"]
    endpoint = cluster.get("endpoint")
    ca_bundle = cluster.get("certificateAuthority", {}).get("data")
    if not endpoint or not ca_bundle:
        status = cluster.get("status")
        raise ConfigurationError(
            f"cluster {name!r}: EKS reports no endpoint or CA yet (status {status!r})"
        )
    return DiscoveredCluster(
        info=ClusterInfo(
            name=name,
            region=eks.region,
            endpoint=str(endpoint),
            ca_bundle=str(ca_bundle),
            service_cidr=cluster.get("kubernetesNetworkConfig", {}).get("serviceIpv4Cidr"),
        ),
        kubernetes_version=str(cluster.get("version", "")),
    )
