"""e2e tests create NodePools, KWOKNodeClasses, NodeClaims and Nodes, which outlive a test's
namespace: they get the same per-test clean-up of cluster-scoped objects as tests/cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.conftest import _clean_cluster_scoped, _cluster_scoped_paths
from tests.support.secrets import Witness

__all__ = ["_clean_cluster_scoped", "_cluster_scoped_paths"]


@pytest.fixture
def witness() -> Iterator[Witness]:
    """Every log record (at debug) while the test runs, and a span exporter for its daemon: what
    the test then searches for the credentials it used (tests.support.secrets)."""
    watched = Witness()
    with watched.watching():
        yield watched
