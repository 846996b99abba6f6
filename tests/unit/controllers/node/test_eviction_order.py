"""Drain order (pure): which pods a drain evicts now, in Karpenter's four tiers."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.kube.pod import Pod, PodPhase, PodSpec, PodStatus
from karpy.apis.meta import ObjectMeta, OwnerReference
from karpy.apis.v1 import labels as wk
from karpy.controllers.node.termination.eviction import Tier, next_to_evict, tier_of
from karpy.state.pods import do_not_disrupt, is_terminating, needs_drain

WHEN = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
DAEMON = OwnerReference(api_version="apps/v1", kind="DaemonSet", name="ds", uid="u")


def _pod(
    name: str,
    *,
    critical: bool = False,
    daemon: bool = False,
    mirror: bool = False,
    dnd: bool = False,
    deleting: bool = False,
    phase: PodPhase = PodPhase.RUNNING,
) -> Pod:
    annotations = {}
    if mirror:
        annotations[wk.ANNOTATION_MIRROR_POD] = "x"
    if dnd:
        annotations[wk.ANNOTATION_DO_NOT_DISRUPT] = "true"
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="ns",
            uid=name,
            annotations=annotations,
            owner_references=(DAEMON,) if daemon else (),
            deletion_timestamp=WHEN if deleting else None,
        ),
        spec=PodSpec(priority_class_name="system-node-critical" if critical else None),
        status=PodStatus(phase=phase),
    )


def test_tiers_follow_karpenters_order() -> None:
    assert tier_of(_pod("a")) is Tier.NON_CRITICAL
    assert tier_of(_pod("b", daemon=True)) is Tier.NON_CRITICAL_DAEMON
    assert tier_of(_pod("c", critical=True)) is Tier.CRITICAL
    assert tier_of(_pod("d", critical=True, daemon=True)) is Tier.CRITICAL_DAEMON


def test_mirror_and_finished_pods_are_not_drained() -> None:
    assert not needs_drain(_pod("m", mirror=True))
    assert not needs_drain(_pod("s", phase=PodPhase.SUCCEEDED))
    assert not needs_drain(_pod("f", phase=PodPhase.FAILED))
    assert needs_drain(_pod("r"))


def test_a_terminating_pod_holds_back_the_next_tier() -> None:
    pods = [_pod("going", deleting=True), _pod("daemon", daemon=True)]
    assert next_to_evict(pods) == ()
    assert [p.metadata.name for p in next_to_evict(pods[1:])] == ["daemon"]


def test_do_not_disrupt_pods_are_never_evicted_and_do_not_hold_back_tiers() -> None:
    pods = [_pod("precious", dnd=True), _pod("critical", critical=True)]
    assert [p.metadata.name for p in next_to_evict(pods)] == ["critical"]


pods_strategy = st.lists(
    st.builds(
        _pod,
        st.text(alphabet="abcdef", min_size=1, max_size=4),
        critical=st.booleans(),
        daemon=st.booleans(),
        mirror=st.booleans(),
        dnd=st.booleans(),
        deleting=st.booleans(),
        phase=st.sampled_from(list(PodPhase)),
    ),
    max_size=12,
)


@given(pods_strategy)
def test_only_the_first_unfinished_tier_is_evicted(pods: list[Pod]) -> None:
    chosen = next_to_evict(pods)
    evictable = [p for p in pods if needs_drain(p) and not do_not_disrupt(p)]
    for pod in chosen:
        assert needs_drain(pod)
        assert not do_not_disrupt(pod)
        assert not is_terminating(pod)
        assert all(tier_of(pod) <= tier_of(other) for other in evictable)
    if evictable and not chosen:
        # Nothing to evict now only while the first tier is still terminating.
        first = min(tier_of(p) for p in evictable)
        assert all(is_terminating(p) for p in evictable if tier_of(p) == first)
