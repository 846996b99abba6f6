"""The conformance suite's subject: one CloudProvider plus what it needs to be exercised.

Every contract test takes ``subject`` and runs once per provider (``pytest.param(id=...)``). A
provider joins the suite by adding a param and a builder here; the tests themselves never know
which provider they talk to.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import AsyncIterator, Mapping

import attrs
import pytest

from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClaimRequirement,
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy.apis.v1.nodepool import NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec
from karpy.apis.v1alpha1.nodeoverlay import NodeOverlay, NodeOverlaySpec
from karpy.cloudprovider import CloudProvider
from karpy.cloudprovider.overlay import OverlaidCloudProvider, OverlayStore
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODES
from karpy.localcluster import ClusterInfo
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from tests.support.marks import TOOLS


@attrs.frozen
class Subject:
    """A provider under test, the NodePool and NodeClass its NodeClaims use, and a providerID
    in its own scheme that names no instance."""

    provider: CloudProvider
    nodepool: NodePool
    node_class_ref: NodeClassReference
    missing_provider_id: str
    prefix: str = attrs.field(factory=lambda: f"ct-{secrets.token_hex(3)}")

    def nodeclaim(
        self,
        name: str,
        *requirements: NodeClaimRequirement,
        requests: Mapping[str, str] | None = None,
    ) -> NodeClaim:
        """A NodeClaim of the subject's NodePool, as the provisioner would create it."""
        pool = self.nodepool.metadata.name or ""
        return NodeClaim(
            metadata=ObjectMeta(name=f"{self.prefix}-{name}", labels={wk.LABEL_NODEPOOL: pool}),
            spec=NodeClaimSpec(
                requirements=requirements,
                node_class_ref=self.node_class_ref,
                resources=ResourceRequests(
                    requests={k: Quantity(v) for k, v in (requests or {}).items()}
                ),
            ),
        )


def requirement(key: str, *values: str) -> NodeClaimRequirement:
    return NodeClaimRequirement(key=key, operator=RequirementOperator.IN, values=values)


def nodepool(name: str, ref: NodeClassReference) -> NodePool:
    os_linux = NodeSelectorRequirementWithMinValues(
        key=wk.LABEL_OS, operator=RequirementOperator.IN, values=(wk.OS_LINUX,)
    )
    template = NodeClaimTemplate(
        spec=NodeClaimTemplateSpec(requirements=(os_linux,), node_class_ref=ref)
    )
    return NodePool(metadata=ObjectMeta(name=name), spec=NodePoolSpec(template=template))


async def _fake_subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    del request
    ref = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="default")
    yield Subject(
        provider=FakeCloudProvider(),
        nodepool=nodepool("default", ref),
        node_class_ref=ref,
        missing_provider_id="fake:///test-zone-1/fake-99999999",
    )


async def _overlaid_subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    """The fake provider behind the NodeOverlay wrapper, with overlays changing every type's
    price and adding an extended resource: the wrapper keeps the CloudProvider contract."""
    async for built in _fake_subject(request):
        overlays: list[NodeOverlay] = [
            NodeOverlay(
                metadata=ObjectMeta(name="everything"),
                spec=NodeOverlaySpec(
                    requirements=(),
                    price_adjustment="+10%",
                    capacity={"example.com/widget": Quantity("2")},
                ),
            )
        ]
        store = OverlayStore(functools.partial(tuple, overlays))
        yield attrs.evolve(built, provider=OverlaidCloudProvider(built.provider, store))


async def _kwok_subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    """The kwok provider on the real local cluster, with its own KWOKNodeClass; every Node it
    launched and the class are deleted afterwards (this directory has no cluster clean-up)."""
    from karpy_kwok import KwokCloudProvider, KwokOptions
    from karpy_kwok.catalog import load_entries

    cluster_info: ClusterInfo = request.getfixturevalue("cluster_info")
    request.getfixturevalue("karpy_crds")
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    prefix = f"ct-{secrets.token_hex(3)}"
    ref = NodeClassReference(group=kwoklabels.KWOK_GROUP, kind=KWOKNodeClass.KIND, name=prefix)
    provider = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    try:
        await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=prefix)))
        yield Subject(
            provider=provider,
            nodepool=nodepool(prefix, ref),
            node_class_ref=ref,
            missing_provider_id=f"kwok://{prefix}-missing",
            prefix=prefix,
        )
    finally:
        for launched in await provider.list():
            with contextlib.suppress(NotFoundError):
                await kube.delete(NODES, launched.metadata.name or "")
        with contextlib.suppress(NotFoundError):
            await kube.delete(KWOK_NODECLASSES, prefix)
        await kube.close()


async def _clusterapi_subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    """The Cluster API provider on Cluster API's real controllers (tests/support/clusterapi.py),
    over two MachineDeployments of its own namespace: ``small`` (2 vCPU, 8 GiB in zone-a, priced
    per vCPU and GiB) and ``large`` (8 vCPU, 32 GiB in zone-b, annotated at $0.20/h). The
    namespace, and with it every Machine, is deleted afterwards."""
    from karpy.runtime.clock import SystemClock
    from karpy_clusterapi import ClusterAPICloudProvider, ClusterAPIOptions
    from karpy_clusterapi.controllers.nodeclass import NodeClassController
    from tests.support import clusterapi as capi

    env: capi.ClusterAPIEnv = request.getfixturevalue("clusterapi")
    cluster_info: ClusterInfo = request.getfixturevalue("cluster_info")
    request.getfixturevalue("karpy_crds")
    prefix = f"ct-{secrets.token_hex(3)}"
    capi.fleet(env.kube, prefix)
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    provider = ClusterAPICloudProvider(
        kube, kube, options=ClusterAPIOptions(namespace=prefix, create_wait=120.0)
    )
    ref = capi.nodeclass(env.kube, prefix)
    try:
        await NodeClassController(
            kube, provider.fleet, provider.nodeclasses, clock=SystemClock()
        ).reconcile(prefix)
        yield Subject(
            provider=provider,
            nodepool=nodepool(prefix, ref),
            node_class_ref=ref,
            missing_provider_id=f"{capi.PROVIDER_ID_PREFIX}{prefix}/missing",
            prefix=prefix,
        )
    finally:
        await provider.aclose()
        capi.remove_fleet(env.kube, prefix)
        await kube.close()


SUBJECTS = {
    "fake": _fake_subject,
    "overlaid": _overlaid_subject,
    "kwok": _kwok_subject,
    "clusterapi": _clusterapi_subject,
}
MARKS = {"clusterapi": (*TOOLS, pytest.mark.xdist_group("clusterapi"))}
"""Cluster API's tests run last (its manager builds beside the suite) on one worker."""


@pytest.fixture(
    params=[pytest.param(name, id=name, marks=MARKS.get(name, ())) for name in SUBJECTS]
)
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    async for built in SUBJECTS[request.param](request):
        yield built
