"""Requirement set algebra: the language NodePools, pods, instance types and offerings share.

Pure: values in, values out. A ``Requirement`` is the set of label values one key may take — a
finite set, the complement of a finite set, optionally cut by integer bounds (Gt/Lt/Gte/Lte) —
so that intersecting a NodePool's requirements with a pod's node selector, an instance type's
labels and an offering's zone is plain set algebra with one meaning everywhere. Errors name the
key and both sides so that a person can read why two sets do not meet.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

import attrs

from karpy.apis.v1 import labels as wk


class Operator(enum.StrEnum):
    """Node selector operators, with Karpenter's Gte/Lte extensions."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"
    GTE = "Gte"
    LTE = "Lte"


class RequirementError(ValueError):
    """A requirement is malformed (the message names the key and what is wrong)."""


_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_INT64: Final = 2**63


def _as_int(value: str) -> int | None:
    """``value`` read as Go's ``strconv.ParseInt(value, 10, 64)`` reads it (a sign and digits,
    no spaces or underscores, within int64), else None."""
    if _INT_RE.fullmatch(value) is None:
        return None
    number = int(value)
    return number if -_INT64 <= number < _INT64 else None


@attrs.frozen(cache_hash=True)
class Requirement:
    """The values one label key may take.

    ``complement=False``: exactly ``values`` (empty means the label must be absent).
    ``complement=True``: anything except ``values`` (empty means any value, label present).
    ``greater_than``/``less_than`` are exclusive integer bounds applied on top.
    """

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    greater_than: int | None = None
    less_than: int | None = None
    min_values: int | None = None

    @classmethod
    def new(
        cls,
        key: str,
        operator: Operator | str,
        values: Iterable[str] = (),
        *,
        min_values: int | None = None,
    ) -> Requirement:
        """Build from a node selector requirement; raises ``RequirementError`` on bad input."""
        try:
            op = Operator(operator)
        except ValueError:
            raise RequirementError(
                f"requirement {key!r}: unknown operator {operator!r}"
                f" (expected one of {', '.join(o.value for o in Operator)})"
            ) from None
        key = wk.NORMALIZED_LABELS.get(key, key)
        vals = frozenset(values)
        if min_values is not None and min_values < 1:
            raise RequirementError(f"requirement {key!r}: minValues must be at least 1")
        if op is Operator.IN:
            if not vals:
                raise RequirementError(f"requirement {key!r}: operator In needs values")
            if min_values is not None and len(vals) < min_values:
                raise RequirementError(
                    f"requirement {key!r}: In has {len(vals)} values, fewer than minValues"
                    f" {min_values}"
                )
            return cls(key, False, vals, min_values=min_values)
        if op is Operator.NOT_IN:
            return cls(key, True, vals, min_values=min_values)
        if op is Operator.EXISTS:
            return cls(key, True, min_values=min_values)
        if op is Operator.DOES_NOT_EXIST:
            return cls(key, False, min_values=min_values)
        if len(vals) != 1:
            raise RequirementError(f"requirement {key!r}: operator {op} needs exactly one value")
        (raw,) = vals
        bound = _as_int(raw)
        if bound is None:
            raise RequirementError(
                f"requirement {key!r}: operator {op} needs an integer (int64), got {raw!r}"
            )
        if op is Operator.GT:
            return cls(key, True, greater_than=bound, min_values=min_values)
        if op is Operator.GTE:
            return cls(key, True, greater_than=bound - 1, min_values=min_values)
        if op is Operator.LT:
            return cls(key, True, less_than=bound, min_values=min_values)
        return cls(key, True, less_than=bound + 1, min_values=min_values)

    @property
    def operator(self) -> Operator:
        """The operator of the first of ``expressions()``: the whole meaning only when there is
        one expression (a set with excluded values and bounds, or two bounds, needs several)."""
        return self.expressions()[0][0]

    def expressions(self) -> tuple[tuple[Operator, tuple[str, ...]], ...]:
        """Node-selector expressions on this key that, ANDed, mean exactly this set: one for
        In, NotIn, Exists and DoesNotExist; NotIn (if values are excluded) then Gt and Lt when
        integer bounds are set."""
        if not self.complement:
            op = Operator.IN if self.values else Operator.DOES_NOT_EXIST
            return ((op, tuple(self.sorted_values())),)
        out: list[tuple[Operator, tuple[str, ...]]] = []
        if self.values:
            out.append((Operator.NOT_IN, tuple(self.sorted_values())))
        if self.greater_than is not None:
            out.append((Operator.GT, (str(self.greater_than),)))
        if self.less_than is not None:
            out.append((Operator.LT, (str(self.less_than),)))
        return tuple(out) or ((Operator.EXISTS, ()),)

    def _in_bounds(self, value: str) -> bool:
        if self.greater_than is None and self.less_than is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        if self.greater_than is not None and number <= self.greater_than:
            return False
        return self.less_than is None or number < self.less_than

    def has(self, value: str) -> bool:
        """True when a label with this value satisfies the requirement."""
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values

    def allows_absent(self) -> bool:
        """True when a node *without* the label satisfies it (NotIn and DoesNotExist)."""
        bounded = self.greater_than is not None or self.less_than is not None
        if self.complement:
            return bool(self.values) and not bounded
        return not self.values

    def is_empty(self) -> bool:
        """True when no label value satisfies it (the label would have to be absent)."""
        return not self.complement and not self.values

    def size(self) -> float:
        """How many values satisfy it; infinite for complements."""
        return float("inf") if self.complement else float(len(self.values))

    def intersection(self, other: Requirement) -> Requirement:
        """The values both allow; minValues is the larger of the two."""
        gt = _max_opt(self.greater_than, other.greater_than)
        lt = _min_opt(self.less_than, other.less_than)
        mv = _max_opt(self.min_values, other.min_values)
        if gt is not None and lt is not None and gt + 1 >= lt:
            return Requirement(self.key, False, min_values=mv)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, gt, lt, mv)
        if self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        probe = Requirement(self.key, True, greater_than=gt, less_than=lt)
        values = frozenset(v for v in values if probe._in_bounds(v))
        return Requirement(self.key, False, values, min_values=mv)

    def intersects(self, other: Requirement) -> bool:
        """True when both can hold at once, counting "label absent" as a shared answer."""
        if not self.intersection(other).is_empty():
            return True
        return self.allows_absent() and other.allows_absent()

    def sorted_values(self) -> list[str]:
        """Values in a stable order (numbers numerically, then strings)."""
        return sorted(self.values, key=_value_order)

    def describe(self) -> str:
        """``key In [a, b]``-style text for messages; every expression, comma-separated
        (``key NotIn [3], Gt 0, Lt 8``)."""
        parts = []
        for op, values in self.expressions():
            if op in (Operator.IN, Operator.NOT_IN):
                parts.append(f"{op} [{', '.join(values)}]")
            elif values:
                parts.append(f"{op} {values[0]}")
            else:
                parts.append(str(op))
        return f"{self.key} {', '.join(parts)}"


def _value_order(value: str) -> tuple[int, int, str]:
    number = _as_int(value)
    return (0, number, "") if number is not None else (1, 0, value)


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


@attrs.frozen
class Incompatibility:
    """Why two requirement sets do not meet: the key and both sides, for explanations."""

    key: str
    wanted: str
    offered: str
    undefined: bool = False

    def message(self) -> str:
        """One readable clause."""
        if self.undefined:
            return f"{self.wanted}: no label {self.key} is defined there"
        return f"{self.wanted} does not match {self.offered}"


def _freeze(items: Mapping[str, Requirement] | Iterable[Requirement]) -> tuple[Requirement, ...]:
    reqs = items.values() if isinstance(items, Mapping) else items
    merged: dict[str, Requirement] = {}
    for req in reqs:
        prior = merged.get(req.key)
        merged[req.key] = req if prior is None else prior.intersection(req)
    return tuple(merged[k] for k in sorted(merged))


@attrs.frozen(cache_hash=True)
class Requirements:
    """Requirements keyed by label (one per key; adding a key twice intersects)."""

    items: tuple[Requirement, ...] = attrs.field(converter=_freeze, default=())

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """``key In [value]`` for every label (how a node's labels read as requirements)."""
        return cls(Requirement(k, False, frozenset({v})) for k, v in labels.items())

    def get(self, key: str) -> Requirement | None:
        """The requirement on ``key``, if any."""
        for req in self.items:
            if req.key == key:
                return req
        return None

    def keys(self) -> tuple[str, ...]:
        """Keys in sorted order."""
        return tuple(r.key for r in self.items)

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, *reqs: Requirement) -> Requirements:
        """A copy with ``reqs`` intersected in."""
        if not reqs:
            return self
        return Requirements(self.items + reqs)

    def merge(self, other: Requirements) -> Requirements:
        """The intersection of two sets, key by key."""
        if not other.items:
            return self
        if not self.items:
            return other
        return Requirements(self.items + other.items)

    def without(self, key: str) -> Requirements:
        """A copy with ``key`` dropped."""
        return Requirements(r for r in self.items if r.key != key)

    def single_value(self, key: str) -> str | None:
        """The one value ``key`` can take, if it is pinned to exactly one."""
        req = self.get(key)
        if req is None or req.complement or len(req.values) != 1:
            return None
        return next(iter(req.values))

    def conflict(self, other: Requirements) -> Incompatibility | None:
        """The first key (sorted) on which both sets define a requirement that cannot meet."""
        if not self.items or not other.items:
            return None
        mine = {r.key: r for r in self.items}
        for theirs in other.items:
            req = mine.get(theirs.key)
            if req is not None and not req.intersects(theirs):
                return Incompatibility(theirs.key, theirs.describe(), req.describe())
        return None

    def compatible(
        self, incoming: Requirements, *, allow_undefined: frozenset[str] = frozenset()
    ) -> Incompatibility | None:
        """Can a node with these requirements satisfy ``incoming`` (a pod's)?

        A key the node does not define only passes when the pod accepts an absent label (NotIn,
        DoesNotExist) or the key is in ``allow_undefined`` (well-known labels the instance types
        will define later).
        """
        mine = {r.key: r for r in self.items}
        for req in incoming.items:
            have = mine.get(req.key)
            if have is None:
                if req.allows_absent() or req.key in allow_undefined:
                    continue
                return Incompatibility(req.key, req.describe(), "", undefined=True)
            if not have.intersects(req):
                return Incompatibility(req.key, req.describe(), have.describe())
        return None

    def matches_labels(self, node_labels: Mapping[str, str]) -> Incompatibility | None:
        """Do a node's labels satisfy these requirements (Kubernetes label-selector semantics)?"""
        for req in self.items:
            value = node_labels.get(req.key)
            if value is None:
                if not req.allows_absent():
                    return Incompatibility(req.key, req.describe(), f"{req.key} absent")
            elif not req.has(value):
                return Incompatibility(req.key, req.describe(), f"{req.key}={value}")
        return None

    def labels(self) -> dict[str, str]:
        """Labels implied by single-valued requirements (what a launched node would carry)."""
        out: dict[str, str] = {}
        for req in self.items:
            if not req.complement and len(req.values) == 1:
                out[req.key] = next(iter(req.values))
        return out

    def describe(self) -> str:
        """All requirements, ``; ``-separated."""
        return "; ".join(r.describe() for r in self.items)


ANY: Final = Requirements()
