"""Fixtures for the Node termination tests: a client, the KWOKNodeClass kwok launches from, and
cluster state holding what termination reads (Nodes, Pods, NodeClaims, and the
VolumeAttachments and PersistentVolumeClaims the wait for volume detachment looks at)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from karpy.apis.meta import ObjectMeta
from karpy.kube.client import KubeClient
from karpy.kube.kinds import (
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODDISRUPTIONBUDGETS,
    PODS,
    VOLUME_ATTACHMENTS,
)
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from tests.cluster.nodeclaim.conftest import KWOK_REF
from tests.support.clusterview import LiveView, live_view

TERMINATION_KINDS = (
    NODES,
    PODS,
    NODECLAIMS,
    NODEPOOLS,  # the lifecycle reads the NodeClaim's NodePool (registration health)
    VOLUME_ATTACHMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PODDISRUPTIONBUDGETS,  # an eviction granted whose pod deletion never happened
)


@pytest.fixture
async def kube(kube: KubeClient) -> KubeClient:
    """The cluster's client (tests/cluster/conftest.py), with the KWOKNodeClass these tests'
    NodeClaims name."""
    await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=KWOK_REF.name)))
    return kube


@pytest.fixture
async def live(kube: KubeClient) -> AsyncIterator[LiveView]:
    """What termination reads, in cluster state kept by informers, as the controller reads it."""
    async with live_view(kube, TERMINATION_KINDS) as view:
        yield view
