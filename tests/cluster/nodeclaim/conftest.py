"""Shared pieces for the NodeClaim controller tests on the real local cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from karpy.apis.kube.common import Taint
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODEPOOLS
from karpy.runtime.reconciler import Result
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from tests.support.clusterview import CORE_KINDS, LiveView, live_view
from tests.support.waiting import eventually

KWOK_REF = NodeClassReference(
    group=kwoklabels.KWOK_GROUP, kind=KWOKNodeClass.KIND, name="lifecycle-kwok"
)


@pytest.fixture
async def kube(kube: KubeClient) -> KubeClient:
    """The cluster's client (tests/cluster/conftest.py), with the KWOKNodeClass these tests'
    NodeClaims name."""
    await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=KWOK_REF.name)))
    return kube


@pytest.fixture
async def live(kube: KubeClient) -> AsyncIterator[LiveView]:
    """Nodes, Pods, NodeClaims and NodePools in cluster state, kept by informers, as controllers
    read them."""
    async with live_view(kube, (*CORE_KINDS, NODEPOOLS)) as view:
        yield view


@pytest.fixture
async def pool_live(kube: KubeClient) -> AsyncIterator[LiveView]:
    """`live` with KWOKNodeClasses too, for the NodePool controllers that read the NodeClass."""
    async with live_view(kube, (*CORE_KINDS, NODEPOOLS, KWOK_NODECLASSES)) as view:
        yield view


def make_nodeclaim(
    name: str,
    *,
    ref: NodeClassReference = KWOK_REF,
    taints: tuple[Taint, ...] = (),
    startup_taints: tuple[Taint, ...] = (),
    termination_grace_period: str | None = None,
) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(
            name=name,
            labels={wk.LABEL_NODEPOOL: "default", "example.com/team": "blue"},
            annotations={"example.com/owner": "tests"},
        ),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=ref,
            taints=taints,
            startup_taints=startup_taints,
            termination_grace_period=termination_grace_period,
        ),
    )


async def reconcile_until(
    reconcile: Callable[[str], Awaitable[Result]],
    name: str,
    done: Callable[[], Awaitable[bool]],
    *,
    within: float = 30.0,
) -> None:
    """Reconcile `name` again and again (as the runner would on events) until `done()` holds."""

    async def probe() -> bool:
        await reconcile(name)
        return await done()

    await eventually(probe, within=within, interval=0.1)
