"""Pods of deleting nodes count as pending; a Node that starts deleting triggers a batch."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import pytest

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod, PodPhase, PodSpec, PodStatus
from karpy.apis.meta import ObjectMeta, OwnerReference
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.labels import ANNOTATION_MIRROR_POD
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.deleting import (
    deleted_nodeclaim,
    deleting_node,
    pods_of_deleting_nodes,
)
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.runtime.channels import Trigger
from karpy.runtime.options import BatchingOptions
from karpy.state.pods import is_reschedulable

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def _gated(
    batcher: Batcher, keys: Callable[[Event[Any]], Iterable[str]]
) -> Callable[[Event[Any]], None]:
    """What the manager does with the provisioner's watches: each key goes to its gate."""

    def on_event(event: Event[Any]) -> None:
        for key in keys(event):
            batcher.trigger(key)

    return on_event


def _owner(kind: str) -> OwnerReference:
    return OwnerReference(api_version="apps/v1", kind=kind, name="o", uid="o-uid")


def _pod(
    name: str,
    node: str,
    *,
    owners: tuple[OwnerReference, ...] = (),
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    phase: PodPhase = PodPhase.RUNNING,
) -> Pod:
    meta = ObjectMeta(
        name=name,
        namespace="default",
        uid=name,
        owner_references=owners,
        annotations=annotations or {},
        deletion_timestamp=WHEN if deleting else None,
    )
    return Pod(metadata=meta, spec=PodSpec(node_name=node), status=PodStatus(phase=phase))


def _node(name: str, *, deleting: bool) -> Node:
    return Node(
        metadata=ObjectMeta(name=name, uid=name, deletion_timestamp=WHEN if deleting else None)
    )


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(_pod("web", "n"), True, id="running"),
        pytest.param(_pod("rs", "n", owners=(_owner("ReplicaSet"),)), True, id="rs"),
        pytest.param(_pod("done", "n", phase=PodPhase.SUCCEEDED), False, id="succeeded"),
        pytest.param(_pod("failed", "n", phase=PodPhase.FAILED), False, id="failed"),
        pytest.param(_pod("going", "n", deleting=True), False, id="terminating"),
        pytest.param(_pod("ds", "n", owners=(_owner("DaemonSet"),)), False, id="ds"),
        pytest.param(
            _pod("mirror", "n", annotations={ANNOTATION_MIRROR_POD: "x"}), False, id="mirror"
        ),
    ],
)
def test_which_pods_need_a_new_home(pod: Pod, expected: bool) -> None:
    assert is_reschedulable(pod) is expected


def test_only_pods_of_deleting_nodes_are_taken() -> None:
    nodes = [_node("leaving", deleting=True), _node("staying", deleting=False)]
    pods = [
        _pod("a", "leaving"),
        _pod("b", "staying"),
        _pod("c", "leaving", owners=(_owner("DaemonSet"),)),
    ]
    assert [p.metadata.name for p in pods_of_deleting_nodes(nodes, pods)] == ["a"]
    assert pods_of_deleting_nodes([_node("staying", deleting=False)], pods) == []


def _event(node: Node, type_: EventType) -> Event[Node]:
    ref = ObjectRef(
        kind="Node",
        namespace="",
        name=node.metadata.name or "",
        uid="node-uid",
        resource_version="1",
    )
    return Event(type=type_, item=Item(ref=ref, obj=node))


async def test_a_node_that_starts_deleting_triggers_the_batcher() -> None:
    batcher = Batcher(BatchingOptions(), signal=Trigger("test"))
    on_event = _gated(batcher, deleting_node)
    on_event(_event(_node("staying", deleting=False), EventType.MODIFIED))
    on_event(_event(_node("leaving", deleting=True), EventType.DELETED))
    assert batcher.pending == 0
    on_event(_event(_node("leaving", deleting=True), EventType.MODIFIED))
    assert batcher.pending == 1


async def test_a_nodeclaim_that_is_gone_triggers_the_batcher() -> None:
    """Its nominated pods are pending again (say its launch found no capacity)."""
    batcher = Batcher(BatchingOptions(), signal=Trigger("test"))
    on_event = _gated(batcher, deleted_nodeclaim)
    claim = NodeClaim(
        metadata=ObjectMeta(name="default-abcde"),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=NodeClassReference(group="g", kind="K", name="n"),
        ),
    )
    ref = ObjectRef(
        kind="NodeClaim", namespace="", name="default-abcde", uid="claim-uid", resource_version="1"
    )
    for type_ in (EventType.ADDED, EventType.MODIFIED):
        on_event(Event(type=type_, item=Item(ref=ref, obj=claim)))
    assert batcher.pending == 0
    on_event(Event(type=EventType.DELETED, item=Item(ref=ref, obj=claim)))
    assert batcher.pending == 1
