"""NodeClaim garbage collection's decision: which NodeClaims have lost their instance."""

from __future__ import annotations

import datetime

import pytest

from karpy.apis.kube.node import Node, NodeCondition, NodeSpec, NodeStatus
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.controllers.nodeclaim.garbagecollection import collectable

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
PROVIDER_ID = "fake:///z/i-1"


def _claim(*, launched_ago: float | None, provider_id: str | None = PROVIDER_ID) -> NodeClaim:
    conditions = (
        ()
        if launched_ago is None
        else (
            Condition(
                type=ConditionType.LAUNCHED,
                status=ConditionStatus.TRUE,
                last_transition_time=NOW - datetime.timedelta(seconds=launched_ago),
                reason="Launched",
                message="",
            ),
        )
    )
    return NodeClaim(
        metadata=ObjectMeta(name="c1", creation_timestamp=NOW - datetime.timedelta(hours=1)),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=NodeClassReference(
                group="karpenter.kwok.sh", kind="KWOKNodeClass", name="k"
            ),
        ),
        status=NodeClaimStatus(provider_id=provider_id, conditions=conditions),
    )


def _node(ready: ConditionStatus | None) -> Node:
    conditions = () if ready is None else (NodeCondition(type="Ready", status=ready),)
    return Node(
        metadata=ObjectMeta(name="n1"),
        spec=NodeSpec(provider_id=PROVIDER_ID),
        status=NodeStatus(conditions=conditions),
    )


@pytest.mark.parametrize(
    ("ready", "expected"),
    [
        pytest.param(ConditionStatus.TRUE, False, id="ready-node-kept"),
        pytest.param(ConditionStatus.FALSE, True, id="not-ready-node"),
        pytest.param(ConditionStatus.UNKNOWN, True, id="unknown-node"),
        pytest.param(None, True, id="node-without-ready"),
    ],
)
def test_a_missing_instance_is_collected_unless_its_node_is_ready(
    ready: ConditionStatus | None, *, expected: bool
) -> None:
    claim = _claim(launched_ago=3600)
    nodes = {PROVIDER_ID: _node(ready)}
    assert collectable(claim, listed=frozenset(), nodes=nodes, now=NOW) is expected


def test_a_listed_instance_is_never_collected() -> None:
    claim = _claim(launched_ago=3600)
    assert not collectable(claim, listed=frozenset({PROVIDER_ID}), nodes={}, now=NOW)
    assert collectable(claim, listed=frozenset({"fake:///z/other"}), nodes={}, now=NOW)


def test_only_nodeclaims_launched_before_the_grace_period_are_collected() -> None:
    assert not collectable(_claim(launched_ago=None), listed=frozenset(), nodes={}, now=NOW)
    assert not collectable(_claim(launched_ago=5), listed=frozenset(), nodes={}, now=NOW)
    assert collectable(_claim(launched_ago=11), listed=frozenset(), nodes={}, now=NOW)
    assert not collectable(
        _claim(launched_ago=11), listed=frozenset(), nodes={}, now=NOW, grace_period=30
    )


def test_a_nodeclaim_without_a_provider_id_is_never_collected() -> None:
    claim = _claim(launched_ago=3600, provider_id=None)
    assert not collectable(claim, listed=frozenset(), nodes={}, now=NOW)
