"""The provisionable-pod predicate, rule by rule (Karpenter's IsProvisionable)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from karpy.apis.codec import from_dict
from karpy.apis.kube.pod import Pod
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.trigger import provisionable_pods
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.runtime.channels import Trigger
from karpy.runtime.options import BatchingOptions
from karpy.state.pods import NotProvisionable, is_provisionable, not_provisionable

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


def _pod(
    *,
    meta: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> Pod:
    return from_dict(
        Pod,
        {
            "metadata": {"name": "p", "namespace": "default", "uid": "u", **(meta or {})},
            "spec": {"containers": [{"name": "c"}], **(spec or {})},
            "status": {"phase": "Pending", "conditions": [UNSCHEDULABLE], **(status or {})},
        },
    )


def _owner(kind: str, api_version: str = "apps/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "o", "controller": True}


CASES = [
    ("pending-unschedulable", _pod(), None),
    ("replicaset-owned", _pod(meta={"ownerReferences": [_owner("ReplicaSet")]}), None),
    ("named-default-scheduler", _pod(spec={"schedulerName": "default-scheduler"}), None),
    (
        "terminating",
        _pod(meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        NotProvisionable.TERMINATING,
    ),
    ("bound", _pod(spec={"nodeName": "n1"}), NotProvisionable.BOUND),
    ("nominated", _pod(status={"nominatedNodeName": "n1"}), NotProvisionable.NOMINATED),
    (
        "not-yet-tried",
        _pod(status={"conditions": []}),
        NotProvisionable.NOT_FAILED_TO_SCHEDULE,
    ),
    (
        "scheduled-true",
        _pod(status={"conditions": [{"type": "PodScheduled", "status": "True"}]}),
        NotProvisionable.NOT_FAILED_TO_SCHEDULE,
    ),
    (
        "other-reason",
        _pod(status={"conditions": [{**UNSCHEDULABLE, "reason": "SchedulingGated"}]}),
        NotProvisionable.NOT_FAILED_TO_SCHEDULE,
    ),
    (
        "other-condition",
        _pod(status={"conditions": [{**UNSCHEDULABLE, "type": "Ready"}]}),
        NotProvisionable.NOT_FAILED_TO_SCHEDULE,
    ),
    (
        "daemonset",
        _pod(meta={"ownerReferences": [_owner("DaemonSet")]}),
        NotProvisionable.DAEMONSET,
    ),
    (
        "mirror-annotation",
        _pod(meta={"annotations": {"kubernetes.io/config.mirror": "abc"}}),
        NotProvisionable.MIRROR,
    ),
    (
        "node-owned",
        _pod(meta={"ownerReferences": [_owner("Node", "v1")]}),
        NotProvisionable.MIRROR,
    ),
    (
        "other-scheduler",
        _pod(spec={"schedulerName": "volcano"}),
        NotProvisionable.OTHER_SCHEDULER,
    ),
]


@pytest.mark.parametrize(("pod", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_provisionable_pods(pod: Pod, expected: NotProvisionable | None) -> None:
    assert not_provisionable(pod) is expected
    assert is_provisionable(pod) is (expected is None)


def test_extra_scheduler_names_can_be_served() -> None:
    pod = _pod(spec={"schedulerName": "volcano"})
    assert is_provisionable(pod, scheduler_names=("default-scheduler", "volcano"))


def _event(kind: EventType, pod: Pod, uid: str) -> Event[Pod]:
    ref = ObjectRef(kind="Pod", namespace="default", name=uid, uid=uid, resource_version="1")
    return Event(type=kind, item=Item(ref=ref, obj=pod))


async def test_the_watch_triggers_only_for_live_provisionable_pods() -> None:
    batcher = Batcher(BatchingOptions(idle_duration=0.01), signal=Trigger("provisioning"))
    keys = provisionable_pods()

    def on_event(event: Event[Pod]) -> None:  # as the manager feeds the provisioner's gate
        for key in keys(event):
            batcher.trigger(key)

    on_event(_event(EventType.ADDED, _pod(), "pending"))
    on_event(_event(EventType.MODIFIED, _pod(spec={"nodeName": "n1"}), "bound"))
    on_event(_event(EventType.DELETED, _pod(), "deleted"))
    on_event(_event(EventType.MODIFIED, _pod(), "pending"))
    async with asyncio.timeout(10):
        batch = await batcher.wait()
    assert batch.uids == ("pending",)
    assert batch.triggers == 2
