"""Recent node registration outcomes per NodePool, behind its NodeRegistrationHealthy condition.

One NodeClaim that fails to join says little (a bad instance, a slow boot); half of the recent
ones failing says the pool's configuration is broken (a security group without egress, an
image that never starts kubelet). Karpenter keeps, per NodePool, the outcome of the last four
launches that ended (registered, or deleted at the launch or registration timeout) and calls the
pool unhealthy when two of those four slots are failures; karpy keeps the same window.

The window lives in memory, so it is shared by the two controllers that act on it: the NodeClaim
lifecycle records outcomes (and sets the condition True or False), the NodePool status controller
empties it when the pool or its NodeClass changes (and sets the condition Unknown). After a
restart the window is seeded from the condition as last written, so a pool already False stays
False until a registration succeeds, as it would have without the restart. Wiring constructs one
and hands it to both.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Final

WINDOW: Final = 4
"""Outcomes remembered per NodePool (Karpenter's buffer size)."""

UNHEALTHY_SHARE: Final = 0.5
"""Share of the window's slots that must be failures for the pool to be unhealthy."""


class Health(enum.Enum):
    """What a NodePool's window says."""

    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


def health_of(outcomes: tuple[bool, ...]) -> Health:
    """The health the outcomes (True: registered) say. Failures are counted against the whole
    window, not against the outcomes seen so far, so a single early failure is not a verdict."""
    if not outcomes:
        return Health.UNKNOWN
    failures = sum(1 for ok in outcomes[-WINDOW:] if not ok)
    return Health.UNHEALTHY if failures / WINDOW >= UNHEALTHY_SHARE else Health.HEALTHY


class RegistrationHealth:
    """Per NodePool (by UID), its last `WINDOW` registration outcomes."""

    def __init__(self) -> None:
        self._windows: dict[str, deque[bool]] = {}

    def outcomes(self, pool_uid: str) -> tuple[bool, ...]:
        """The outcomes remembered for the pool, oldest first."""
        return tuple(self._windows.get(pool_uid, ()))

    def health_after(self, pool_uid: str, registered: bool) -> Health:
        """The pool's health if one more outcome were recorded (nothing is recorded)."""
        return health_of((*self.outcomes(pool_uid), registered))

    def record(self, pool_uid: str, registered: bool) -> None:
        """Remember one outcome; the oldest past the window is forgotten."""
        self._windows.setdefault(pool_uid, deque(maxlen=WINDOW)).append(registered)

    def reset(self, pool_uid: str) -> None:
        """Forget the pool's outcomes: its spec (or its NodeClass's) changed."""
        self._windows.pop(pool_uid, None)

    def seed(self, pool_uid: str, health: Health) -> None:
        """Start an empty window where the condition left off (after a restart): one success
        for a healthy pool, enough failures for an unhealthy one. A known window is kept."""
        if pool_uid in self._windows or health is Health.UNKNOWN:
            return
        if health is Health.HEALTHY:
            self.record(pool_uid, True)
            return
        for _ in range(int(WINDOW * UNHEALTHY_SHARE)):
            self.record(pool_uid, False)
