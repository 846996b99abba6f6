"""The provisionable-pod predicate, rule by rule (Karpenter's IsProvisionable)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.apis.codec import from_dict
from karpy.apis.kube.pod import Pod
from karpy.controllers.provisioning.trigger import (
    NotProvisionable,
    is_provisionable,
    not_provisionable,
)

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
