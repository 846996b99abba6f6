"""When a deleted NodeClaim's Node stops being drained politely: its termination deadline.

A NodeClaim with spec.terminationGracePeriod gives its pods that long after its deletion; past it,
the drain deletes pods instead of evicting them. Karpenter writes the deadline on the NodeClaim as
karpenter.sh/nodeclaim-termination-timestamp so users and every controller see the same instant;
the lifecycle controller writes it and the termination controller reads it, both through here
(in karpy.state, below both, so neither controller imports the other).
"""

from __future__ import annotations

import datetime

from karpy.apis.codec import parse_time
from karpy.apis.duration import parse_duration
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim


def termination_deadline(
    nodeclaim: NodeClaim, *, deleted_at: datetime.datetime | None = None
) -> datetime.datetime | None:
    """The recorded deadline, else the NodeClaim's (or `deleted_at`, when the NodeClaim's own
    deletion is not yet seen) deletion time plus its terminationGracePeriod; None without one.

    Raises ValueError naming the NodeClaim when the annotation or the grace period is malformed.
    """
    name = nodeclaim.metadata.name
    recorded = nodeclaim.metadata.annotations.get(wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP)
    if recorded:
        try:
            return parse_time(recorded)
        except ValueError as error:
            msg = (
                f"nodeclaim {name!r}: annotation"
                f" {wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP}={recorded!r} is not an RFC 3339"
                f" time: {error}"
            )
            raise ValueError(msg) from error
    if nodeclaim.spec.termination_grace_period is None:
        return None
    grace = parse_duration(
        nodeclaim.spec.termination_grace_period,
        field_name=f"nodeclaim {name!r} spec.terminationGracePeriod",
    )
    started = nodeclaim.metadata.deletion_timestamp or deleted_at
    if grace is None or started is None:
        return None
    return started + grace
