"""Informer events → lifecycle and termination keys (their controllers' watches)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.kube.pod import Pod, PodSpec
from karpy.apis.kube.storage import (
    VolumeAttachment,
    VolumeAttachmentSource,
    VolumeAttachmentSpec,
)
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.controllers.node.termination import watches as termination
from karpy.controllers.nodeclaim.lifecycle import watches as lifecycle
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.manager import unless_deleted
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView

WHEN = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture
def state() -> Iterator[ClusterState]:
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=InMemorySpanExporter())
    state = ClusterState(metrics=telemetry.metrics)
    state.register(NODECLAIMS)
    state.register(NODES)
    yield state
    telemetry.shutdown()


def _event(
    kind: EventType,
    obj: NodeClaim | Node | Pod | VolumeAttachment,
    name: str,
    namespace: str = "",
) -> Event[Any]:
    ref = ObjectRef(
        kind=type(obj).__name__, namespace=namespace, name=name, uid=name, resource_version="1"
    )
    return Event(type=kind, item=Item(ref=ref, obj=obj))


def _claim(name: str, provider_id: str | None) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(name=name),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
        status=NodeClaimStatus(provider_id=provider_id),
    )


def _node(name: str, provider_id: str, *, deleting: bool = False, finalized: bool = True) -> Node:
    return Node(
        metadata=ObjectMeta(
            name=name,
            deletion_timestamp=WHEN if deleting else None,
            finalizers=(wk.FINALIZER_TERMINATION,) if finalized else (),
        ),
        spec=NodeSpec(provider_id=provider_id),
    )


def _feeding(
    queued: list[str], keys: Callable[[Event[Any]], Iterable[str]]
) -> Callable[[Event[Any]], None]:
    """What the manager does with a watch's key function: queue every key it names."""
    return lambda event: queued.extend(keys(event))


def test_nodeclaim_changes_queue_the_nodeclaim_but_not_its_removal() -> None:
    queued: list[str] = []
    on_event = _feeding(queued, unless_deleted)
    on_event(_event(EventType.ADDED, _claim("a", None), "a"))
    on_event(_event(EventType.MODIFIED, _claim("a", "p://a"), "a"))
    on_event(_event(EventType.DELETED, _claim("a", "p://a"), "a"))
    assert queued == ["a", "a"]


def test_a_node_queues_the_nodeclaim_with_its_provider_id(state: ClusterState) -> None:
    claims = state.store(NODECLAIMS)
    claims.apply(_event(EventType.ADDED, _claim("a", "p://1"), "a"))
    claims.apply(_event(EventType.ADDED, _claim("b", "p://2"), "b"))
    claims.apply(_event(EventType.ADDED, _claim("c", None), "c"))
    queued: list[str] = []
    on_event = _feeding(queued, lifecycle.claims_of_node(ClusterView(state)))
    on_event(_event(EventType.MODIFIED, _node("n2", "p://2"), "n2"))
    on_event(_event(EventType.DELETED, _node("n1", "p://1"), "n1"))
    on_event(_event(EventType.ADDED, _node("n9", "p://9"), "n9"))
    assert queued == ["b", "a"]


def test_only_draining_nodes_are_queued_for_termination(state: ClusterState) -> None:
    queued: list[str] = []
    on_event = _feeding(queued, termination.terminating_node)
    on_event(_event(EventType.MODIFIED, _node("live", "p://1"), "live"))
    on_event(
        _event(
            EventType.MODIFIED, _node("foreign", "p://2", deleting=True, finalized=False), "foreign"
        )
    )
    on_event(_event(EventType.MODIFIED, _node("going", "p://3", deleting=True), "going"))
    assert queued == ["going"]


def test_a_pod_leaving_a_draining_node_queues_that_node(state: ClusterState) -> None:
    nodes = state.store(NODES)
    nodes.apply(_event(EventType.ADDED, _node("going", "p://1", deleting=True), "going"))
    nodes.apply(_event(EventType.ADDED, _node("live", "p://2"), "live"))
    queued: list[str] = []
    on_event = _feeding(queued, termination.draining_node_of_pod(ClusterView(state)))

    def pod(node: str) -> Pod:
        return Pod(metadata=ObjectMeta(name="p", namespace="ns"), spec=PodSpec(node_name=node))

    on_event(_event(EventType.DELETED, pod("going"), "p", "ns"))
    on_event(_event(EventType.MODIFIED, pod("live"), "p", "ns"))
    on_event(_event(EventType.ADDED, pod("going"), "p", "ns"))
    assert queued == ["going"]


def test_a_volume_attachment_going_from_a_draining_node_queues_that_node(
    state: ClusterState,
) -> None:
    nodes = state.store(NODES)
    nodes.apply(_event(EventType.ADDED, _node("going", "p://1", deleting=True), "going"))
    nodes.apply(_event(EventType.ADDED, _node("live", "p://2"), "live"))
    queued: list[str] = []
    on_event = _feeding(queued, termination.draining_node_of_attachment(ClusterView(state)))

    def attachment(node: str) -> VolumeAttachment:
        return VolumeAttachment(
            metadata=ObjectMeta(name="va"),
            spec=VolumeAttachmentSpec(
                attacher="ebs.csi.aws.com",
                node_name=node,
                source=VolumeAttachmentSource(persistent_volume_name="pv"),
            ),
        )

    on_event(_event(EventType.DELETED, attachment("going"), "va"))
    on_event(_event(EventType.MODIFIED, attachment("going"), "va"))
    on_event(_event(EventType.DELETED, attachment("live"), "va"))
    on_event(_event(EventType.ADDED, attachment("going"), "va"))
    on_event(_event(EventType.DELETED, attachment("elsewhere"), "va"))
    assert queued == ["going", "going"]
