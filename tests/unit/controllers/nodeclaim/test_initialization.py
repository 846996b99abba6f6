"""When a registered Node counts as initialized (pure): Ready, no startup or ephemeral taints,
and every requested extended resource registered."""

from __future__ import annotations

import pytest

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeCondition, NodeSpec, NodeStatus
from karpy.apis.meta import ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy.controllers.nodeclaim.lifecycle.initialization import initialization_blocker

BOOT = Taint(key="example.com/boot", effect=TaintEffect.NO_SCHEDULE)
CLAIM = NodeClaim(
    metadata=ObjectMeta(name="c"),
    spec=NodeClaimSpec(
        requirements=(),
        node_class_ref=NodeClassReference(group="g", kind="K", name="n"),
        startup_taints=(BOOT,),
        resources=ResourceRequests(
            requests={"cpu": Quantity("1"), "nvidia.com/gpu": Quantity("1")}
        ),
    ),
)
READY = NodeCondition(type="Ready", status=ConditionStatus.TRUE)


def _node(*taints: Taint, ready: bool = True, allocatable: dict[str, str] | None = None) -> Node:
    conditions = (READY,) if ready else (NodeCondition(type="Ready", status=ConditionStatus.FALSE),)
    alloc = allocatable if allocatable is not None else {"cpu": "4", "nvidia.com/gpu": "1"}
    return Node(
        metadata=ObjectMeta(name="n"),
        spec=NodeSpec(taints=taints),
        status=NodeStatus(
            conditions=conditions, allocatable={k: Quantity(v) for k, v in alloc.items()}
        ),
    )


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        pytest.param(_node(ready=False), "NodeNotReady", id="not-ready"),
        pytest.param(_node(BOOT), "StartupTaintsExist", id="startup-taint"),
        pytest.param(
            _node(Taint(key=wk.TAINT_NODE_NOT_READY, effect=TaintEffect.NO_EXECUTE)),
            "StartupTaintsExist",
            id="ephemeral-taint",
        ),
        pytest.param(_node(allocatable={"cpu": "4"}), "ResourceNotRegistered", id="gpu-missing"),
        pytest.param(
            _node(allocatable={"cpu": "4", "nvidia.com/gpu": "0"}),
            "ResourceNotRegistered",
            id="gpu-zero",
        ),
    ],
)
def test_what_holds_initialization_back(node: Node, reason: str) -> None:
    blocker = initialization_blocker(CLAIM, node)
    assert blocker is not None
    assert blocker[0] == reason


def test_a_ready_clean_node_with_its_resources_is_initialized() -> None:
    other = Taint(key="example.com/team", effect=TaintEffect.NO_SCHEDULE)
    assert initialization_blocker(CLAIM, _node(other)) is None
