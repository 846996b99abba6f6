"""e2e tests create NodePools, KWOKNodeClasses, NodeClaims and Nodes, which outlive a test's
namespace: they get the same per-test clean-up of cluster-scoped objects as tests/cluster."""

from __future__ import annotations

from tests.cluster.conftest import _clean_cluster_scoped, _cluster_scoped_paths

__all__ = ["_clean_cluster_scoped", "_cluster_scoped_paths"]
