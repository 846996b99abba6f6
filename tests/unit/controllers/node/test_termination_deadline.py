"""What termination decides without the cluster (pure): which pods the drain leaves, which of
a drained Node's VolumeAttachments its instance waits for, and when each remaining pod is
deleted under the NodeClaim's terminationGracePeriod, with what grace."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.kube.common import TaintEffect, Toleration, TolerationOperator
from karpy.apis.kube.pod import (
    EphemeralVolumeSource,
    PersistentVolumeClaimVolumeSource,
    Pod,
    PodSpec,
    Volume,
)
from karpy.apis.kube.storage import (
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    VolumeAttachment,
    VolumeAttachmentSource,
    VolumeAttachmentSpec,
)
from karpy.apis.meta import ObjectMeta, OwnerReference
from karpy.apis.v1 import labels as wk
from karpy.controllers.node.termination.eviction import (
    deletion_grace,
    deletion_time,
    drainable,
    due_for_deletion,
    next_deletion,
    overrunning,
)
from karpy.controllers.node.termination.volumes import blocking_attachments

NOW = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
DEADLINE = NOW + datetime.timedelta(seconds=60)
NODE_OWNER = OwnerReference(api_version="v1", kind="Node", name="n", uid="u-node")
TOLERATE_ALL = Toleration(operator=TolerationOperator.EXISTS)
TOLERATE_DISRUPTED = Toleration(
    key=wk.TAINT_DISRUPTED_KEY,
    operator=TolerationOperator.EXISTS,
    effect=TaintEffect.NO_SCHEDULE,
)


def _pod(
    name: str,
    *,
    claims: tuple[str, ...] = (),
    ephemeral: tuple[str, ...] = (),
    tolerations: tuple[Toleration, ...] = (),
    static: bool = False,
    deleted_at: datetime.datetime | None = None,
    grace: int | None = 30,
) -> Pod:
    volumes = tuple(
        Volume(name=c, persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=c))
        for c in claims
    ) + tuple(Volume(name=v, ephemeral=EphemeralVolumeSource()) for v in ephemeral)
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="apps",
            owner_references=(NODE_OWNER,) if static else (),
            deletion_timestamp=deleted_at,
        ),
        spec=PodSpec(
            node_name="n",
            tolerations=tolerations,
            volumes=volumes,
            termination_grace_period_seconds=grace,
        ),
    )


def _attachment(volume: str | None) -> VolumeAttachment:
    return VolumeAttachment(
        metadata=ObjectMeta(name=f"va-{volume}"),
        spec=VolumeAttachmentSpec(
            attacher="ebs.csi.aws.com",
            node_name="n",
            source=VolumeAttachmentSource(persistent_volume_name=volume),
        ),
    )


CLAIMS = {
    ("apps", "data"): PersistentVolumeClaim(
        metadata=ObjectMeta(name="data", namespace="apps"),
        spec=PersistentVolumeClaimSpec(volume_name="pv-data"),
    ),
    ("apps", "agent-scratch"): PersistentVolumeClaim(
        metadata=ObjectMeta(name="agent-scratch", namespace="apps"),
        spec=PersistentVolumeClaimSpec(volume_name="pv-scratch"),
    ),
    ("apps", "pending"): PersistentVolumeClaim(
        metadata=ObjectMeta(name="pending", namespace="apps"),
        spec=PersistentVolumeClaimSpec(),
    ),
}


def _claim(namespace: str, name: str) -> PersistentVolumeClaim | None:
    return CLAIMS.get((namespace, name))


def _blocking(attachments: list[VolumeAttachment], pods: list[Pod]) -> list[str | None]:
    return [
        a.spec.source.persistent_volume_name
        for a in blocking_attachments(attachments, pods, _claim, now=NOW)
    ]


def test_the_drain_leaves_static_pods_pods_tolerating_the_disrupted_taint_and_stuck_ones() -> None:
    assert drainable(_pod("web"), now=NOW)
    assert not drainable(_pod("agent", tolerations=(TOLERATE_ALL,)), now=NOW)
    assert not drainable(_pod("agent", tolerations=(TOLERATE_DISRUPTED,)), now=NOW)
    assert not drainable(_pod("mirror", static=True), now=NOW)
    stuck_since = NOW - datetime.timedelta(minutes=2)
    assert not drainable(_pod("stuck", deleted_at=stuck_since), now=NOW)
    assert drainable(_pod("leaving", deleted_at=NOW), now=NOW)
    # A toleration of some other taint, or of another effect, does not keep a pod on.
    other = Toleration(key="example.com/gpu", operator=TolerationOperator.EXISTS)
    execute = Toleration(
        key=wk.TAINT_DISRUPTED_KEY,
        operator=TolerationOperator.EXISTS,
        effect=TaintEffect.NO_EXECUTE,
    )
    assert drainable(_pod("web", tolerations=(other, execute)), now=NOW)


def test_every_attachment_of_a_persistent_volume_blocks_while_drained_pods_mount_it() -> None:
    attachments = [_attachment("pv-data"), _attachment("pv-other")]
    assert _blocking(attachments, []) == ["pv-data", "pv-other"]
    # A pod the drain moves takes its volume along: its attachment must go first.
    assert _blocking(attachments, [_pod("web", claims=("data",))]) == ["pv-data", "pv-other"]


def test_volumes_of_pods_the_drain_leaves_do_not_block() -> None:
    attachments = [_attachment("pv-data"), _attachment("pv-scratch"), _attachment("pv-other")]
    agent = _pod("agent", claims=("data", "missing", "pending"), tolerations=(TOLERATE_ALL,))
    assert _blocking(attachments, [agent]) == ["pv-scratch", "pv-other"]
    # A generic ephemeral volume's claim is named after the pod and the volume.
    scratch = _pod("agent", ephemeral=("scratch",), static=True)
    assert _blocking(attachments, [scratch]) == ["pv-data", "pv-other"]


def test_an_attachment_naming_no_persistent_volume_never_blocks() -> None:
    assert _blocking([_attachment(None), _attachment("")], []) == []


def test_a_pod_is_deleted_its_own_grace_before_the_deadline_with_that_grace() -> None:
    pod = _pod("guarded", grace=30)
    assert deletion_time(pod, DEADLINE) == DEADLINE - datetime.timedelta(seconds=30)
    early = DEADLINE - datetime.timedelta(seconds=31)
    assert due_for_deletion([pod], DEADLINE, now=early) == ()
    assert next_deletion([pod], DEADLINE, now=early) == DEADLINE - datetime.timedelta(seconds=30)
    on_time = DEADLINE - datetime.timedelta(seconds=30)
    assert due_for_deletion([pod], DEADLINE, now=on_time) == (pod,)
    assert deletion_grace(DEADLINE, now=on_time) == 30
    assert next_deletion([pod], DEADLINE, now=on_time) is None


def test_a_pod_deleted_a_moment_after_its_time_keeps_its_whole_grace() -> None:
    # The drain wakes a little after the deletion time: the grace is not cut to 29 s.
    late = DEADLINE - datetime.timedelta(seconds=30) + datetime.timedelta(milliseconds=20)
    assert deletion_grace(DEADLINE, now=late) == 30
    assert deletion_grace(DEADLINE, now=DEADLINE - datetime.timedelta(seconds=29.5)) == 30


def test_grace_periods_longer_than_the_deadline_allows_are_due_at_once() -> None:
    slow = _pod("slow", grace=3600)
    unset = _pod("unset", grace=None)  # the apiserver's default, 30 s
    assert due_for_deletion([slow, unset], DEADLINE, now=NOW) == (slow,)
    assert deletion_grace(DEADLINE, now=NOW) == 60
    assert next_deletion([slow, unset], DEADLINE, now=NOW) == DEADLINE - datetime.timedelta(
        seconds=30
    )


def test_terminating_pods_are_not_deleted_again_and_past_the_deadline_there_is_no_grace() -> None:
    leaving = _pod("leaving", deleted_at=NOW)
    late = DEADLINE + datetime.timedelta(seconds=5)
    assert due_for_deletion([leaving], DEADLINE, now=late) == ()
    assert next_deletion([leaving], DEADLINE, now=NOW) is None
    assert deletion_grace(DEADLINE, now=late) == 0


def test_a_pod_terminating_past_the_deadline_is_deleted_again_with_the_time_left() -> None:
    # deletionTimestamp is when a terminating pod's grace ends.
    lingering = _pod("lingering", deleted_at=DEADLINE + datetime.timedelta(seconds=240))
    leaving = _pod("leaving", deleted_at=DEADLINE - datetime.timedelta(seconds=5))
    assert overrunning([lingering, leaving], DEADLINE, now=NOW) == (lingering,)
    assert deletion_grace(DEADLINE, now=NOW) == 60
    # Deleted again, it ends by the deadline: not deleted a third time.
    shortened = _pod("lingering", deleted_at=NOW + datetime.timedelta(seconds=60))
    assert overrunning([shortened], DEADLINE, now=NOW) == ()
    # Past the deadline, a pod given no grace has nothing more to lose.
    late = DEADLINE + datetime.timedelta(seconds=10)
    spent = _pod("spent", deleted_at=late)
    assert overrunning([spent], DEADLINE, now=late) == ()
    assert overrunning([lingering], DEADLINE, now=late) == (lingering,)


@given(
    grace=st.integers(min_value=0, max_value=7200),
    elapsed=st.integers(min_value=0, max_value=7200),
)
def test_a_pod_deleted_when_due_is_gone_by_the_deadline_with_no_more_than_its_grace(
    grace: int, elapsed: int
) -> None:
    start = DEADLINE - datetime.timedelta(seconds=3600)
    now = start + datetime.timedelta(seconds=elapsed)
    pod = _pod("p", grace=grace)
    if due_for_deletion([pod], DEADLINE, now=now):
        given_grace = deletion_grace(DEADLINE, now=now)
        assert given_grace <= grace
        # Before the deadline the grace ends by it; past the deadline there is none.
        if now < DEADLINE:
            assert now + datetime.timedelta(seconds=given_grace) <= DEADLINE
        else:
            assert given_grace == 0
    else:
        upcoming = next_deletion([pod], DEADLINE, now=now)
        assert upcoming is not None
        assert now < upcoming <= DEADLINE
