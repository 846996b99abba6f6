"""The shared pod predicates: the cases where two of them deliberately differ, and
do-not-disrupt on every kind that carries it."""

from __future__ import annotations

import datetime

import pytest

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod, PodPhase, PodStatus
from karpy.apis.meta import ObjectMeta, OwnerReference
from karpy.apis.v1 import labels as wk
from karpy.state.pods import (
    do_not_disrupt,
    is_daemon_owned,
    is_reschedulable,
    is_static,
    is_terminal,
    is_terminating,
    needs_drain,
)

NODE_OWNER = OwnerReference(api_version="v1", kind="Node", name="n1", uid="n1")
DAEMON_OWNER = OwnerReference(api_version="apps/v1", kind="DaemonSet", name="ds", uid="ds")


def _pod(
    *,
    owner: OwnerReference | None = None,
    annotations: dict[str, str] | None = None,
    phase: PodPhase = PodPhase.RUNNING,
    deleting: bool = False,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name="p",
            namespace="ns",
            annotations=annotations or {},
            owner_references=(owner,) if owner else (),
            deletion_timestamp=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
            if deleting
            else None,
        ),
        status=PodStatus(phase=phase),
    )


def test_a_running_plain_pod_is_reschedulable_and_drained() -> None:
    pod = _pod()
    assert is_reschedulable(pod)
    assert needs_drain(pod)
    assert not is_terminal(pod)
    assert not is_terminating(pod)
    assert not is_daemon_owned(pod)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(_pod(phase=PodPhase.SUCCEEDED), id="succeeded"),
        pytest.param(_pod(phase=PodPhase.FAILED), id="failed"),
        pytest.param(_pod(deleting=True), id="terminating"),
        pytest.param(_pod(owner=DAEMON_OWNER), id="daemonset"),
        pytest.param(_pod(owner=NODE_OWNER), id="node-owned"),
        pytest.param(_pod(annotations={wk.ANNOTATION_MIRROR_POD: "x"}), id="mirror"),
    ],
)
def test_pods_that_need_no_new_home_are_not_reschedulable(pod: Pod) -> None:
    assert not is_reschedulable(pod)


def test_a_static_pod_shows_by_annotation_or_node_owner_but_only_the_annotation_skips_drain() -> (
    None
):
    by_owner = _pod(owner=NODE_OWNER)
    by_annotation = _pod(annotations={wk.ANNOTATION_MIRROR_POD: "x"})
    assert is_static(by_owner)
    assert is_static(by_annotation)
    assert needs_drain(by_owner)
    assert not needs_drain(by_annotation)


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False), ("5m", False)])
def test_do_not_disrupt_reads_the_annotation_on_pods_and_nodes(value: str, expected: bool) -> None:
    annotations = {wk.ANNOTATION_DO_NOT_DISRUPT: value}
    assert do_not_disrupt(_pod(annotations=annotations)) is expected
    assert do_not_disrupt(Node(metadata=ObjectMeta(name="n", annotations=annotations))) is expected
    assert not do_not_disrupt(_pod())


def test_v1alpha5_do_not_evict_and_do_not_consolidate_count_as_do_not_disrupt() -> None:
    from karpy.apis.meta import ObjectMeta
    from karpy.state.pods import do_not_disrupt

    class Obj:
        def __init__(self, annotations: dict[str, str]) -> None:
            self.metadata = ObjectMeta(annotations=annotations)

    assert do_not_disrupt(Obj({"karpenter.sh/do-not-evict": "true"}))
    assert do_not_disrupt(Obj({"karpenter.sh/do-not-consolidate": "true"}))
    assert not do_not_disrupt(Obj({"karpenter.sh/do-not-evict": "false"}))
