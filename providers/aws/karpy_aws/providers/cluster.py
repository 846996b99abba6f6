"""The EKS cluster nodes join: endpoint, CA, service CIDR, IP family and Kubernetes version.

User data needs the API endpoint, the CA bundle and (for AL2023's nodeadm) the service CIDR, and
AMI aliases resolve per Kubernetes minor version. On EKS all of these come from one
DescribeCluster call, so operators need not copy them into karpy's options; elsewhere the caller
builds ClusterInfo itself. An IPv6 cluster's nodes need more: AL2's bootstrap must be told the
family and the IPv6 service CIDR, and the cluster DNS address cannot be guessed from an IPv4
default, so it is read from the cluster's own ``kube-dns`` Service, as Karpenter does.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from karpy_aws.errors import ConfigurationError
from karpy_aws.session import AWSClient

IPFamily = Literal["ipv4", "ipv6"]
KUBE_DNS_PATH: Final = "/api/v1/namespaces/kube-system/services/kube-dns"


@attrs.frozen(kw_only=True)
class ClusterInfo:
    """The cluster nodes join: what user data and tags need."""

    name: str
    region: str
    endpoint: str
    ca_bundle: str
    service_cidr: str | None = None
    dns_ip: str | None = None
    """The cluster DNS Service's address (``kube-dns``), the kubelet's clusterDNS when the
    EC2NodeClass names none; None leaves the AMI's bootstrap to derive it."""
    ip_family: IPFamily = "ipv4"


def ip_family_of(address: str | None) -> IPFamily | None:
    """``ipv6`` for an IPv6 address or CIDR, ``ipv4`` for an IPv4 one, None for none or junk."""
    if not address:
        return None
    try:
        network = ipaddress.ip_network(address, strict=False)
    except ValueError:
        return None
    return "ipv6" if network.version == 6 else "ipv4"


def kube_dns_ip(service: Mapping[str, Any]) -> str | None:
    """The ClusterIP of a ``kube-dns`` Service object (None when headless or malformed)."""
    address = service.get("spec", {}).get("clusterIP")
    return str(address) if ip_family_of(address) is not None else None


def with_network(
    info: ClusterInfo, *, dns_ip: str | None, ip_family: IPFamily | None = None
) -> ClusterInfo:
    """``info`` with the cluster DNS address and the IP family: the one given (EKS's), else the
    DNS address's, else the service CIDR's, else IPv4."""
    family = ip_family or ip_family_of(dns_ip) or ip_family_of(info.service_cidr) or "ipv4"
    return attrs.evolve(info, dns_ip=dns_ip, ip_family=family)


@attrs.frozen(kw_only=True)
class DiscoveredCluster:
    """What EKS says about the cluster."""

    info: ClusterInfo
    kubernetes_version: str
    ip_family: IPFamily | None = None
    """EKS's ``kubernetesNetworkConfig.ipFamily`` (None when it does not say)."""
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
    network = cluster.get("kubernetesNetworkConfig", {})
    family: IPFamily | None = "ipv6" if network.get("ipFamily") == "ipv6" else None
    if family is None and network.get("ipFamily") == "ipv4":
        family = "ipv4"
    cidr = network.get("serviceIpv6Cidr") if family == "ipv6" else network.get("serviceIpv4Cidr")
    return DiscoveredCluster(
        info=ClusterInfo(
            name=name,
            region=eks.region,
            endpoint=str(endpoint),
            ca_bundle=str(ca_bundle),
            service_cidr=str(cidr) if cidr else None,
            ip_family=family or "ipv4",
        ),
        kubernetes_version=str(cluster.get("version", "")),
        ip_family=family,
    )
