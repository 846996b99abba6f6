"""Node repair decisions: is a node unhealthy long enough to replace, and may its pool lose it.
Pure: conditions, policies and the time come in as values.

A cloud provider names the node conditions after which a node will not recover (its repair
policies: Ready=False for 30 minutes, ...). A node matching one for the policy's toleration is
replaced. But when many nodes of a pool are unhealthy at once the cause is rarely the nodes (a
broken network, a bad image): replacing them all would only churn, so repair stops once more
than a threshold of the pool (Karpenter: 20 %, rounded up, as a PDB's maxUnavailable) is
unhealthy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import attrs


@attrs.frozen
class ConditionState:
    """One node condition: its type, status and when it last changed (epoch seconds)."""

    type: str
    status: str
    since: float


@attrs.frozen
class Policy:
    """A repair policy: `type` at `status` for `toleration` seconds means replace the node."""

    type: str
    status: str
    toleration: float


@attrs.frozen
class Unhealthy:
    """The condition that makes a node unhealthy and when its toleration runs out."""

    condition: ConditionState
    policy: Policy
    repair_at: float


def unhealthy(conditions: Iterable[ConditionState], policies: Sequence[Policy]) -> Unhealthy | None:
    """The policy match whose toleration runs out first, or None when no policy matches."""
    by_type = {c.type: c for c in conditions}
    best: Unhealthy | None = None
    for policy in policies:
        condition = by_type.get(policy.type)
        if condition is None or condition.status != policy.status:
            continue
        repair_at = condition.since + policy.toleration
        if best is None or repair_at < best.repair_at:
            best = Unhealthy(condition=condition, policy=policy, repair_at=repair_at)
    return best


def allowed_unhealthy(threshold: str, total: int) -> int:
    """How many of `total` nodes may be unhealthy: `threshold` is a count ("3") or a percentage
    ("20%") rounded up. Raises ValueError for anything else."""
    text = threshold.strip()
    if text.endswith("%"):
        number = text[:-1]
        if not number.isdigit():
            msg = f"invalid threshold {threshold!r}: expected an integer or a percentage"
            raise ValueError(msg)
        return math.ceil(int(number) * total / 100)
    if not text.isdigit():
        msg = f"invalid threshold {threshold!r}: expected an integer or a percentage"
        raise ValueError(msg)
    return int(text)


def repair_allowed(*, unhealthy_count: int, total: int, threshold: str) -> bool:
    """True when `unhealthy_count` of `total` nodes is within `threshold` (see above)."""
    return unhealthy_count <= allowed_unhealthy(threshold, total)
