"""PodDisruptionBudgets as disruption sees them. Pure: counts in, counts out.

Two rules live here. The Kubernetes disruption controller's arithmetic, which it writes to a
PDB's status: the pods that must stay healthy (`minAvailable`, or the expected pods less
`maxUnavailable`; a percentage is of the expected pods, rounded up) and the evictions allowed
now (healthy less desired, never below zero, and none while no pod is expected). A running
cluster's PDBs carry the result in their status; `karpy simulate --consolidate` computes it for
a scenario's. And Karpenter's eviction rule: a pod covered by a PDB that allows no disruption,
or by more than one PDB (the eviction API refuses those), cannot be evicted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from karpy.core.disruption.budgets import count_or_percent


def scaled(value: int | str, total: int, *, field: str) -> int:
    """An int-or-percent against `total` ("25%" of 10 is 3, rounded up as Kubernetes does for
    PDBs); raises ValueError naming `field` for a negative number or a string that is not a
    percentage 0%-100%."""
    if isinstance(value, bool):
        msg = f"{field}: expected an integer or a percentage, got {value!r}"
        raise ValueError(msg)
    if isinstance(value, int):
        if value < 0:
            msg = f"{field}: must not be negative, got {value}"
            raise ValueError(msg)
        return value
    if value.strip().endswith("%"):
        with contextlib.suppress(ValueError):
            return count_or_percent(value, total)
    msg = f"{field}: {value!r} is not an integer or a percentage 0%-100%"
    raise ValueError(msg)


def desired_healthy(
    *, min_available: int | str | None, max_unavailable: int | str | None, expected: int
) -> int:
    """The pods a PDB keeps healthy out of `expected`: exactly one of `min_available` and
    `max_unavailable` is set (ValueError naming the field otherwise)."""
    if min_available is not None and max_unavailable is not None:
        msg = "spec: minAvailable and maxUnavailable cannot both be set"
        raise ValueError(msg)
    if max_unavailable is not None:
        unavailable = scaled(max_unavailable, expected, field="spec.maxUnavailable")
        return max(0, expected - unavailable)
    if min_available is None:
        msg = "spec: set minAvailable or maxUnavailable"
        raise ValueError(msg)
    return scaled(min_available, expected, field="spec.minAvailable")


def disruptions_allowed(*, healthy: int, desired: int, expected: int) -> int:
    """Evictions a PDB allows now (its status.disruptionsAllowed)."""
    if expected <= 0:
        return 0
    return max(0, healthy - desired)


def blocking(covering: Sequence[tuple[str, int]]) -> str | None:
    """Of the PDBs covering one pod (`namespace/name`, disruptions allowed), the one that
    forbids evicting it, or None: any that allows none, or the first when more than one
    covers it."""
    for name, allowed in covering:
        if allowed <= 0 or len(covering) > 1:
            return name
    return None
