"""FakeCloudProvider's knobs, beyond the contract every provider keeps: recorded calls,
one-shot errors, a create budget, drift by providerID, per-NodePool instance types, reset."""

from __future__ import annotations

import re

import pytest

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.cloudprovider import (
    CreateError,
    DriftReason,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider
from karpy.testing.instancetypes import make_instance_types
from tests.contract.conftest import Subject, nodepool, requirement


@pytest.fixture
def fake() -> FakeCloudProvider:
    return FakeCloudProvider()


@pytest.fixture
def subject(fake: FakeCloudProvider) -> Subject:
    """Overrides the suite's parametrised subject: these tests are about the fake only."""
    ref = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="default")
    return Subject(
        provider=fake,
        nodepool=nodepool("default", ref),
        node_class_ref=ref,
        missing_provider_id="fake:///test-zone-1/fake-99999999",
    )


async def test_calls_are_recorded_and_ids_follow_the_fake_scheme(
    subject: Subject, fake: FakeCloudProvider
) -> None:
    first = await fake.create(subject.nodeclaim("a"))
    second = await fake.create(subject.nodeclaim("b"))
    assert [nc.metadata.name for nc in fake.create_calls] == [
        f"{subject.prefix}-a",
        f"{subject.prefix}-b",
    ]
    for launched in (first, second):
        zone = launched.metadata.labels[wk.LABEL_TOPOLOGY_ZONE]
        assert re.fullmatch(rf"fake:///{zone}/fake-\d{{8}}", launched.status.provider_id or "")
    assert first.status.provider_id != second.status.provider_id
    # The cheapest fake type is fake-it-0, spot in test-zone-1 (price ties break on zone, then
    # capacity type).
    assert first.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "fake-it-0"
    assert first.metadata.labels[wk.LABEL_CAPACITY_TYPE] == wk.CAPACITY_TYPE_ON_DEMAND
    assert first.status.image_id == "fake-image"


async def test_next_create_error_fails_once(subject: Subject, fake: FakeCloudProvider) -> None:
    fake.next_create_error = NodeClassNotReadyError("nodeclass default is not ready")
    with pytest.raises(NodeClassNotReadyError):
        await fake.create(subject.nodeclaim("a"))
    assert vars(fake)["next_create_error"] is None  # vars(): mypy narrowed the attribute
    assert (await fake.create(subject.nodeclaim("b"))).status.provider_id
    assert len(fake.create_calls) == 2


async def test_allowed_create_calls_caps_launches(
    subject: Subject, fake: FakeCloudProvider
) -> None:
    fake.allowed_create_calls = 1
    await fake.create(subject.nodeclaim("a"))
    with pytest.raises(CreateError) as caught:
        await fake.create(subject.nodeclaim("b"))
    assert caught.value.condition_reason == "AllowedCreateCallsExceeded"
    assert len(fake.created) == 1


async def test_drift_is_reported_by_provider_id(subject: Subject, fake: FakeCloudProvider) -> None:
    launched = await fake.create(subject.nodeclaim("a"))
    assert launched.status.provider_id is not None
    fake.drifted[launched.status.provider_id] = DriftReason("NodeClassDrift")
    assert await fake.is_drifted(launched) == "NodeClassDrift"


async def test_instance_types_per_nodepool(subject: Subject, fake: FakeCloudProvider) -> None:
    only = make_instance_types(3)[2:]
    fake.instance_types_for_nodepool[subject.nodepool.metadata.name or ""] = only
    assert await fake.get_instance_types(subject.nodepool) == only
    launched = await fake.create(subject.nodeclaim("a"))
    assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "fake-it-2"


async def test_reset_forgets_everything(subject: Subject, fake: FakeCloudProvider) -> None:
    launched = await fake.create(subject.nodeclaim("a", requirement(wk.LABEL_ARCH, "amd64")))
    fake.allowed_create_calls = 0
    fake.instance_types = ()
    fake.reset()
    assert (fake.create_calls, fake.created) == ([], {})
    assert vars(fake)["allowed_create_calls"] is None  # vars(): mypy narrowed the attribute
    assert len(await fake.get_instance_types(subject.nodepool)) == 10
    with pytest.raises(NodeClaimNotFoundError):
        await fake.delete(launched)
