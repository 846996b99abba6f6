"""Karpenter's node-shape consistency check, as a pure function: which resources of a NodeClaim
its Node reports under 90 % of."""

from __future__ import annotations

import datetime

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeStatus
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import (
    ConditionType,
    NodeClaim,
    NodeClaimSpec,
    NodeClaimStatus,
    ResourceRequests,
)
from karpy.controllers.nodeclaim.consistency import node_shape_issues

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
INITIALIZED = Condition(
    type=ConditionType.INITIALIZED,
    status=ConditionStatus.TRUE,
    reason="Initialized",
    last_transition_time=NOW,
)


def _claim(
    *, requests: dict[str, str], capacity: dict[str, str], initialized: bool = True
) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(name="c"),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=NodeClassReference(group="g", kind="K", name="n"),
            resources=ResourceRequests(requests={k: Quantity(v) for k, v in requests.items()}),
        ),
        status=NodeClaimStatus(
            capacity={k: Quantity(v) for k, v in capacity.items()},
            conditions=(INITIALIZED,) if initialized else (),
        ),
    )


def _node(capacity: dict[str, str]) -> Node:
    return Node(
        metadata=ObjectMeta(name="n"),
        status=NodeStatus(capacity={k: Quantity(v) for k, v in capacity.items()}),
    )


@pytest.mark.parametrize(
    ("node", "issues"),
    [
        pytest.param({"cpu": "4", "memory": "16Gi"}, [], id="as-promised"),
        pytest.param({"cpu": "4", "memory": "15Gi"}, [], id="within-ten-percent"),
        pytest.param(
            {"cpu": "2", "memory": "16Gi"},
            ["expected 4 of resource cpu, but found 2 (50.0% of expected)"],
            id="half-the-cpu",
        ),
        pytest.param(
            {"cpu": "4"},
            ["expected 16Gi of resource memory, but found 0 (0.0% of expected)"],
            id="memory-missing",
        ),
    ],
)
def test_node_shape(node: dict[str, str], issues: list[str]) -> None:
    claim = _claim(requests={"cpu": "1", "memory": "1Gi"}, capacity={"cpu": "4", "memory": "16Gi"})
    assert node_shape_issues(claim, _node(node)) == issues


def test_only_requested_and_expected_resources_are_checked() -> None:
    # Nothing requested of memory, nothing expected of the GPU: neither is compared.
    claim = _claim(requests={"cpu": "1", "example.com/gpu": "1"}, capacity={"cpu": "4"})
    assert node_shape_issues(claim, _node({"cpu": "4"})) == []


def test_uninitialized_and_deleting_nodeclaims_are_not_checked() -> None:
    kwargs = {"requests": {"cpu": "1"}, "capacity": {"cpu": "4"}}
    small = _node({"cpu": "1"})
    assert node_shape_issues(_claim(**kwargs, initialized=False), small) == []
    deleting = _claim(**kwargs)
    deleting = attrs.evolve(
        deleting, metadata=attrs.evolve(deleting.metadata, deletion_timestamp=NOW)
    )
    assert node_shape_issues(deleting, small) == []
    assert node_shape_issues(_claim(**kwargs), small) != []
