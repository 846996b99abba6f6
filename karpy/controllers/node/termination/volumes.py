"""Which of a draining Node's VolumeAttachments its instance must wait for.

Terminating an instance with a volume still attached leaves the volume to the cloud's forced
detach: on EBS that takes about six minutes, and a stateful pod rescheduled elsewhere waits that
long for its volume. So once the drain is done, termination waits for the Node's
VolumeAttachments to be deleted (the attach/detach controller deletes each one when its volume
is detached), bounded by the NodeClaim's terminationGracePeriod.

Not every attachment is waited for, as Karpenter's `filterVolumeAttachments` decides: a pod the
drain does not move (it tolerates karpenter.sh/disrupted:NoSchedule, as DaemonSet pods commonly
do; it is a static pod; or it is stuck terminating) keeps running until the instance goes, so
the volumes it mounts through PersistentVolumeClaims stay attached and must not hold the Node.
An attachment naming no PersistentVolume (an inline volume) never blocks either.

Pure: the pods, the attachments and the claim lookup are arguments; the time is an argument.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable

from karpy.apis.kube.pod import Pod, Volume
from karpy.apis.kube.storage import PersistentVolumeClaim, VolumeAttachment
from karpy.controllers.node.termination.eviction import drainable

ClaimLookup = Callable[[str, str], PersistentVolumeClaim | None]
"""A PersistentVolumeClaim by (namespace, name), or None when cluster state has none."""


def claim_name(pod: Pod, volume: Volume) -> str | None:
    """The PersistentVolumeClaim a pod's volume mounts: its claimName, or for a generic
    ephemeral volume the claim the ephemeral-volume controller makes (pod name, dash, volume
    name); None for any other volume."""
    if volume.persistent_volume_claim is not None:
        return volume.persistent_volume_claim.claim_name
    if volume.ephemeral is not None:
        return f"{pod.metadata.name}-{volume.name}"
    return None


def kept_volumes(
    pods: Iterable[Pod], claims: ClaimLookup, *, now: datetime.datetime
) -> frozenset[str]:
    """The PersistentVolumes that pods the drain leaves on the Node mount (bound claims only)."""
    kept: set[str] = set()
    for pod in pods:
        if drainable(pod, now=now):
            continue
        for volume in pod.spec.volumes:
            name = claim_name(pod, volume)
            if name is None:
                continue
            claim = claims(pod.metadata.namespace or "", name)
            if claim is not None and claim.spec.volume_name:
                kept.add(claim.spec.volume_name)
    return frozenset(kept)


def blocking_attachments(
    attachments: Iterable[VolumeAttachment],
    pods: Iterable[Pod],
    claims: ClaimLookup,
    *,
    now: datetime.datetime,
) -> tuple[VolumeAttachment, ...]:
    """The attachments the instance waits for: each names a PersistentVolume that no pod left
    on the Node mounts."""
    attached = tuple(attachments)
    if not attached:
        return ()
    kept = kept_volumes(pods, claims, now=now)
    return tuple(
        a
        for a in attached
        if a.spec.source.persistent_volume_name and a.spec.source.persistent_volume_name not in kept
    )
