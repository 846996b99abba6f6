"""CapacityBuffers as virtual pods (karpy.state.buffers) and the status the capacitybuffer
controller writes for them, from wire objects through the codec."""

from __future__ import annotations

from typing import Any

import attrs

from karpy.apis.autoscaling.capacitybuffer import CapacityBuffer
from karpy.apis.codec import from_dict, to_dict
from karpy.apis.kube.workloads import Deployment, PodTemplate
from karpy.controllers.capacitybuffer.controller import buffer_status
from karpy.runtime.clock import FakeClock
from karpy.state.buffers import (
    Lookup,
    buffer_pods,
    hold_room,
    is_virtual,
    resolve,
    virtual_pods,
)
from karpy.state.snapshot import ClusterObjects
from tests.unit.state.support import node, pod

CHUNK_SPEC = {
    "nodeSelector": {"intent": "apps"},
    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
}
TEMPLATE = from_dict(
    PodTemplate,
    {
        "metadata": {"name": "chunk", "namespace": "default", "generation": 3},
        "template": {"metadata": {"labels": {"app": "chunk"}}, "spec": CHUNK_SPEC},
    },
)
WEB = from_dict(
    Deployment,
    {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 10, "template": {"spec": CHUNK_SPEC}},
    },
)


def lookup(kind: str, namespace: str, name: str) -> Any:
    objects = {("PodTemplate", "chunk"): TEMPLATE, ("Deployment", "web"): WEB}
    return objects.get((kind, name)) if namespace == "default" else None


def buffer(spec: dict[str, Any], status: dict[str, Any] | None = None) -> CapacityBuffer:
    return from_dict(
        CapacityBuffer,
        {
            "metadata": {"name": "b", "namespace": "default", "uid": "buid", "generation": 1},
            "spec": spec,
            "status": status or {},
        },
    )


def conditions(b: CapacityBuffer, lookup_: Lookup = lookup) -> dict[str, tuple[str, str]]:
    status = buffer_status(b, lookup_, clock=FakeClock())
    return {c.type: (str(c.status), c.reason) for c in status.conditions}


def test_a_pod_template_buffer_is_ready_with_its_template_and_generation() -> None:
    b = buffer({"podTemplateRef": {"name": "chunk"}, "replicas": 2})
    status = buffer_status(b, lookup, clock=FakeClock())
    wire = to_dict(status)
    assert wire["podTemplateRef"] == {"name": "chunk"}
    assert wire["podTemplateGeneration"] == 3
    assert wire["replicas"] == 2
    assert wire["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    assert conditions(b) == {
        "ReadyForProvisioning": ("True", "Resolved"),
        "Provisioning": ("True", "FakePodsInjected"),
    }
    # Written once: the same status again is no change.
    again = attrs.evolve(b, status=status)
    assert buffer_status(again, lookup, clock=FakeClock()) == again.status


def test_a_scalable_buffer_takes_a_percentage_of_the_workload() -> None:
    b = buffer(
        {
            "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"},
            "percentage": 25,
            "replicas": 1,
        }
    )
    status = buffer_status(b, lookup, clock=FakeClock())
    assert status.replicas == 3  # 25% of 10 rounded up, larger than 1
    assert status.pod_template_ref is None


def test_a_missing_template_says_so_and_holds_nothing() -> None:
    b = buffer({"podTemplateRef": {"name": "gone"}, "replicas": 2})
    status = buffer_status(b, lookup, clock=FakeClock())
    assert status.replicas is None
    ready = next(c for c in status.conditions if c.type == "ReadyForProvisioning")
    assert (str(ready.status), ready.reason) == ("False", "PodTemplateNotFound")
    assert "gone" in ready.message
    assert conditions(b)["Provisioning"] == ("False", "NotReadyForProvisioning")
    assert buffer_pods([attrs.evolve(b, status=status)], lookup) == []


def test_limits_on_nothing_the_chunk_requests_name_the_field() -> None:
    b = buffer({"podTemplateRef": {"name": "chunk"}, "limits": {"nvidia.com/gpu": "2"}})
    ready = next(
        c
        for c in buffer_status(b, lookup, clock=FakeClock()).conditions
        if c.type == "ReadyForProvisioning"
    )
    assert ready.reason == "ResolutionFailed"
    assert "spec.limits" in ready.message


def test_zero_replicas_is_an_empty_buffer() -> None:
    b = buffer({"podTemplateRef": {"name": "chunk"}, "replicas": 0})
    assert conditions(b)["Provisioning"] == ("False", "BufferIsEmpty")


def test_ready_buffers_become_virtual_pods_named_and_marked_as_cluster_autoscalers() -> None:
    b = buffer({"podTemplateRef": {"name": "chunk"}, "replicas": 2})
    ready = attrs.evolve(b, status=buffer_status(b, lookup, clock=FakeClock()))
    pods = buffer_pods([ready], lookup)
    assert [p.metadata.name for p in pods] == ["capacity-buffer-b-1", "capacity-buffer-b-2"]
    assert [p.metadata.uid for p in pods] == ["buid-1", "buid-2"]
    assert all(is_virtual(p) and not p.spec.node_name for p in pods)
    assert pods[0].metadata.labels == {"app": "chunk"}
    assert not is_virtual(pod("real"))
    # Before its controller resolved it, a buffer holds nothing.
    assert buffer_pods([b], lookup) == []


def test_virtual_pods_are_bound_where_their_room_is_after_real_pending_pods() -> None:
    chunk = resolve(buffer({"podTemplateRef": {"name": "chunk"}, "replicas": 1}), lookup)
    b = buffer({"podTemplateRef": {"name": "chunk"}, "replicas": 3})
    virtual = virtual_pods(b, chunk.template, 3)
    n1 = node("n1", labels={"intent": "apps"})  # 4 cpu
    real = pod("real", CHUNK_SPEC)
    objects = ClusterObjects(nodes=[n1], pods=[real])
    held = hold_room(objects, virtual)
    bound = [p for p in held.pods if is_virtual(p)]
    # The pending real pod takes one cpu first; three 1-cpu chunks still fit the rest.
    assert len(bound) == 3
    assert {p.spec.node_name for p in bound} == {"n1"}
    crowded = ClusterObjects(nodes=[n1], pods=[pod(f"r{i}", CHUNK_SPEC) for i in range(3)])
    assert len([p for p in hold_room(crowded, virtual).pods if is_virtual(p)]) == 1
