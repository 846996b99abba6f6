"""Fixtures for the Node termination tests: a client and the KWOKNodeClass kwok launches from."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from karpy.apis.meta import ObjectMeta
from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from tests.cluster.nodeclaim.conftest import KWOK_REF, live

__all__ = ["kube", "live"]


@pytest.fixture
async def kube(cluster_info: ClusterInfo) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=KWOK_REF.name)))
        yield kube
    finally:
        await kube.close()
