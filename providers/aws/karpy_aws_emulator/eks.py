"""EKS clusters created for IPv6 get an IPv6 service CIDR, as on EKS (moto leaves it out).

EKS assigns an IPv6 cluster a unique-local ``/108`` for Services and reports it as
``kubernetesNetworkConfig.serviceIpv6Cidr`` (an output only: CreateCluster takes just
``ipFamily``). moto echoes the request's network config and nothing more, so an IPv6 cluster on
moto has no service CIDR and karpy's IPv6 bootstrap could not be exercised. ``install()`` makes
moto's clusters fill it in, derived from the cluster's name so it is stable across runs (once
per process; moto's state is per process too).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from typing import Any

_installed = threading.Event()


def ipv6_service_cidr(cluster_name: str) -> str:
    """A unique-local (fd00::/8) /108 for the cluster's Services, stable for its name."""
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()
    return f"fd{digest[:2]}:{digest[2:6]}:{digest[6:10]}::/108"


def install() -> None:
    """Make moto's IPv6 EKS clusters report a service CIDR. Imports moto."""
    if _installed.is_set():
        return
    from moto.eks.models import Cluster

    original: Callable[..., None] = Cluster.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        network = dict(self.kubernetes_network_config or {})
        if network.get("ipFamily") == "ipv6" and "serviceIpv6Cidr" not in network:
            network["serviceIpv6Cidr"] = ipv6_service_cidr(str(self.name))
            network.pop("serviceIpv4Cidr", None)
            self.kubernetes_network_config = network

    Cluster.__init__ = init  # type: ignore[method-assign]
    _installed.set()
