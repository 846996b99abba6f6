"""A real Kubernetes control plane on 127.0.0.1, built from upstream Go modules.

karpy's demo, its controller tests and its scale runs need the same kube-apiserver,
kube-scheduler and kube-controller-manager a user's cluster runs — an in-memory imitation would
hide exactly the behaviour karpy depends on (the scheduler's ``Unschedulable`` signal, PDB-aware
eviction, garbage collection). No package registry ships those binaries, so this package builds
them from the Go module proxy once, caches them by version, and runs them with etcd and kwok
(which plays the kubelet for simulated nodes).

It imports nothing else of karpy: the CLI (``karpy cluster``), ``karpy demo`` and the pytest
fixtures all sit on top of :class:`LocalCluster`.
"""

from karpy.localcluster.build import (
    Binaries,
    ClusterAPI,
    Tools,
    ensure_all,
    ensure_binaries,
    ensure_clusterapi,
    ensure_helm,
    ensure_jaeger,
    ensure_tools,
)
from karpy.localcluster.cluster import ClusterInfo, ComponentStatus, LocalCluster
from karpy.localcluster.errors import (
    BuildFailedError,
    ComponentFailedError,
    GoToolchainError,
    LocalClusterError,
    PortInUseError,
)
from karpy.localcluster.versions import KUBERNETES_VERSION, KWOK_VERSION

__all__ = [
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "Binaries",
    "BuildFailedError",
    "ClusterAPI",
    "ClusterInfo",
    "ComponentFailedError",
    "ComponentStatus",
    "GoToolchainError",
    "LocalCluster",
    "LocalClusterError",
    "PortInUseError",
    "Tools",
    "ensure_all",
    "ensure_binaries",
    "ensure_clusterapi",
    "ensure_helm",
    "ensure_jaeger",
    "ensure_tools",
]
