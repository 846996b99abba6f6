"""OverlaidCloudProvider and OverlayStore: the catalog every consumer reads has the applying
NodeOverlays on it, rejected or deleted overlays never apply, and a launch is asked without the
extended resources only overlays declare (the provider's own catalog has none of them)."""

from __future__ import annotations

import datetime

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
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.apis.v1alpha1.nodeoverlay import NodeOverlay, NodeOverlaySpec, NodeSelectorRequirement
from karpy.cloudprovider.overlay import OverlaidCloudProvider, OverlayStore, overlay_from_api
from karpy.core.overlays import OverlayError
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider

REF = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="default")
WIDGET = "example.com/widget"


def _pool(name: str = "default", labels: dict[str, str] | None = None) -> NodePool:
    requirement = NodeSelectorRequirementWithMinValues(
        key=wk.LABEL_OS, operator=RequirementOperator.IN, values=(wk.OS_LINUX,)
    )
    template = NodeClaimTemplate(
        spec=NodeClaimTemplateSpec(requirements=(requirement,), node_class_ref=REF),
        metadata=NodeClaimTemplateMetadata(labels=labels or {}),
    )
    return NodePool(metadata=ObjectMeta(name=name), spec=NodePoolSpec(template=template))


def _overlay(name: str, *, deleting: bool = False, **spec: object) -> NodeOverlay:
    fields: dict[str, object] = {"requirements": (), **spec}
    return NodeOverlay(
        metadata=ObjectMeta(
            name=name,
            deletion_timestamp=datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
            if deleting
            else None,
        ),
        spec=NodeOverlaySpec(**fields),  # type: ignore[arg-type]
    )


def _select(key: str, *values: str) -> tuple[NodeSelectorRequirement, ...]:
    return (NodeSelectorRequirement(key=key, operator=RequirementOperator.IN, values=values),)


async def test_the_catalog_has_the_applying_overlays_and_not_the_others() -> None:
    fake = FakeCloudProvider()
    overlays = [
        _overlay("cheap", price="0.001", requirements=_select(wk.LABEL_INSTANCE_TYPE, "fake-it-3")),
        _overlay("rejected", price="9", requirements=_select(wk.LABEL_INSTANCE_TYPE, "fake-it-0")),
        _overlay("gone", price="9", deleting=True),
        _overlay("other-team", price="9", requirements=_select("team", "db")),
    ]
    store = OverlayStore(lambda: overlays)
    store.reject({"rejected": "Conflict: conflict with another overlay"})
    provider = OverlaidCloudProvider(fake, store)
    types = {t.name: t for t in await provider.get_instance_types(_pool(labels={"team": "web"}))}
    base = {t.name: t for t in fake.instance_types}
    assert {o.price for o in types["fake-it-3"].offerings} == {0.001}
    assert all(types[n] == base[n] for n in base if n != "fake-it-3")
    assert [o.name for o in store.overlays()] == ["other-team", "cheap"]


async def test_a_launch_is_asked_without_overlay_only_resources_and_keeps_its_spec() -> None:
    fake = FakeCloudProvider()
    overlays = [_overlay("widgets", capacity={WIDGET: Quantity("4")})]
    provider = OverlaidCloudProvider(fake, OverlayStore(lambda: overlays))
    claim = NodeClaim(
        metadata=ObjectMeta(name="default-abc", labels={wk.LABEL_NODEPOOL: "default"}),
        spec=NodeClaimSpec(
            requirements=(
                NodeClaimRequirement(
                    key=wk.LABEL_INSTANCE_TYPE,
                    operator=RequirementOperator.IN,
                    values=("fake-it-1",),
                ),
            ),
            node_class_ref=REF,
            resources=ResourceRequests(requests={"cpu": Quantity("1"), WIDGET: Quantity("1")}),
        ),
    )
    launched = await provider.create(claim)
    (asked,) = fake.create_calls
    assert WIDGET not in asked.spec.resources.requests
    assert asked.spec.resources.requests["cpu"] == "1"
    assert launched.spec == claim.spec
    assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "fake-it-1"


def test_a_launch_catalog_applies_overlays_by_the_nodeclaims_pool_labels() -> None:
    fake = FakeCloudProvider()
    overlays = [_overlay("web", price="0.002", requirements=_select("team", "web"))]
    store = OverlayStore(lambda: overlays)
    web = NodeClaim(
        metadata=ObjectMeta(name="a", labels={wk.LABEL_NODEPOOL: "p", "team": "web"}),
        spec=NodeClaimSpec(requirements=(), node_class_ref=REF),
    )
    other = NodeClaim(
        metadata=ObjectMeta(name="b", labels={wk.LABEL_NODEPOOL: "p"}),
        spec=NodeClaimSpec(requirements=(), node_class_ref=REF),
    )
    assert {
        o.price for t in store.for_nodeclaim(web, fake.instance_types) for o in t.offerings
    } == {0.002}
    assert store.for_nodeclaim(other, fake.instance_types) == fake.instance_types


def test_a_requirement_the_core_cannot_read_names_its_entry() -> None:
    overlay = _overlay(
        "huge",
        requirements=(
            NodeSelectorRequirement(
                key="karpenter.kwok.sh/instance-cpu",
                operator=RequirementOperator.GT,
                values=("99999999999999999999",),
            ),
        ),
    )
    with pytest.raises(OverlayError, match=r"spec.requirements\[0\]"):
        overlay_from_api(overlay)


async def test_the_overlaid_catalog_is_reused_until_catalog_or_overlays_change() -> None:
    fake = FakeCloudProvider()
    overlays = [_overlay("cheap", price="0.001")]
    provider = OverlaidCloudProvider(fake, OverlayStore(lambda: overlays))
    pool = _pool()
    first = await provider.get_instance_types(pool)
    assert await provider.get_instance_types(pool) is first
    overlays.append(_overlay("dear", weight=2, price="7"))
    second = await provider.get_instance_types(pool)
    assert {o.price for t in second for o in t.offerings} == {7.0}
    fake.instance_types = fake.instance_types[:2]
    assert len(await provider.get_instance_types(pool)) == 2
