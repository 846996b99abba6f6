"""Taints and tolerations, matched exactly as kube-scheduler's TaintToleration filter does.

Pure: two small values and the matching rule, shared by NodePool templates, existing nodes and
DaemonSet overhead, so that "does this pod tolerate that node" has a single answer in the core.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from karpy.apis.v1 import labels as wk


class Effect(enum.StrEnum):
    """Taint effects."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class TolerationOperator(enum.StrEnum):
    """Toleration operators."""

    EQUAL = "Equal"
    EXISTS = "Exists"


@attrs.frozen(cache_hash=True)
class Taint:
    """A node taint."""

    key: str
    effect: Effect
    value: str = ""

    def describe(self) -> str:
        """``key=value:Effect`` as kubectl prints it."""
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@attrs.frozen(cache_hash=True)
class Toleration:
    """A pod toleration; an empty key with Exists tolerates everything."""

    key: str = ""
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    effect: Effect | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator is TolerationOperator.EXISTS:
            return True
        return self.value == taint.value


PREFER_NO_SCHEDULE_TOLERATION = Toleration(
    operator=TolerationOperator.EXISTS, effect=Effect.PREFER_NO_SCHEDULE
)


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first taint (in the order given) that no toleration covers, or None.

    PreferNoSchedule taints count as untolerated here: Karpenter treats them as hard until the
    last relaxation step adds a blanket PreferNoSchedule toleration.
    """
    tols = tuple(tolerations)
    for taint in taints:
        if not any(t.tolerates(taint) for t in tols):
            return taint
    return None


def schedulable_taints(taints: Iterable[Taint], *, initialized: bool) -> tuple[Taint, ...]:
    """The taints that decide placement: known ephemeral taints are ignored on a node that is
    still starting (they go away on their own)."""
    if initialized:
        return tuple(taints)
    return tuple(t for t in taints if t.key not in wk.EPHEMERAL_TAINT_KEYS)
