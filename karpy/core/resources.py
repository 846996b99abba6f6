"""Kubernetes resource quantities and resource lists, as the scheduler compares them.

Pure: parsing and arithmetic only, no I/O and no clock, so the scheduling core can be tested and
benchmarked without a cluster. Quantities are parsed exactly (``fractions.Fraction``), the way
Kubernetes' ``resource.Quantity`` keeps an exact decimal, then read as kube-scheduler reads them
— CPU with ``MilliValue()``, everything else with ``Value()``, both rounding up — and stored as
integer *milli-units*. Every resource (cpu, memory, pods, extended resources) uses the same unit,
so a whole request fits in plain ints and compares without float error: ``"1.5"`` cpu is 1500,
``"1Gi"`` of memory is 1073741824000.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Final

import attrs

from karpy.apis.v1.labels import LIMIT_COST_PER_HOUR

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"

MILLI: Final = 1000

_BINARY: Final[dict[str, int]] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_DECIMAL: Final[dict[str, Fraction]] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity (the message quotes it)."""


def parse_quantity_exact(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity (``"100m"``, ``"1.5Gi"``, ``"2e3"``, ``4``) exactly.

    Accepts the same grammar as ``resource.ParseQuantity``: a signed decimal number followed by a
    binary suffix (Ki…Ei), a decimal suffix (n, u, m, k, M, G, T, P, E) or a decimal exponent.
    """
    if isinstance(value, bool):
        raise QuantityError(f"quantity {value!r} is a boolean, not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Fraction(str(value))
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """A quantity string, parsed once: a cluster's requests and capacities are a few hundred
    distinct strings read on every pod and node event, and exact arithmetic on fractions costs
    tens of microseconds each time. Fractions are immutable, so the cached value is shared."""
    if value != value.strip():
        raise QuantityError(
            f"quantity {value!r} has leading or trailing whitespace, which Kubernetes rejects"
        )
    match = _QUANTITY_RE.match(value)
    if match is None:
        raise QuantityError(f"quantity {value!r} is not a valid Kubernetes quantity")
    number = Fraction(match["number"])
    if match["sign"] == "-":
        number = -number
    if match["exp"]:
        return number * Fraction(10) ** int(match["exp"][1:])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def parse_quantity(value: str | int | float) -> int:
    """Parse a quantity into integer milli-units, rounding up as ``Quantity.MilliValue()`` does."""
    if isinstance(value, str):
        return _milli_text(value)
    return math.ceil(parse_quantity_exact(value) * MILLI)


@functools.lru_cache(maxsize=4096)
def _milli_text(value: str) -> int:
    return math.ceil(_parse_text(value) * MILLI)


def parse_resource(name: str, value: str | int | float) -> int:
    """Parse a request or capacity of resource ``name`` the way kube-scheduler reads it.

    CPU is read with ``MilliValue()``; every other resource with ``Value()`` (whole units, rounded
    up), so ``memory: 1.5`` is 2 bytes. The result is in milli-units either way. A NodePool's
    cost limit (karpy's, no kube-scheduler resource) keeps its fraction, as CPU does.
    """
    if name in (CPU, LIMIT_COST_PER_HOUR):
        return parse_quantity(value)
    if isinstance(value, str):
        return _whole_text(value)
    return math.ceil(parse_quantity_exact(value)) * MILLI


@functools.lru_cache(maxsize=4096)
def _whole_text(value: str) -> int:
    return math.ceil(_parse_text(value)) * MILLI


def format_quantity(name: str, milli: int) -> str:
    """Render milli-units for people: cpu in cores or millicores, memory in binary units."""
    if name == CPU:
        return f"{milli // MILLI}" if milli % MILLI == 0 else f"{milli}m"
    if milli % MILLI:
        return f"{milli}m"
    whole = milli // MILLI
    if name in (MEMORY, EPHEMERAL_STORAGE) or name.endswith("storage"):
        for suffix, size in reversed(_BINARY.items()):
            if whole >= size and whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


def _pairs(items: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    merged: dict[str, int] = {}
    for name, amount in items:
        merged[name] = merged.get(name, 0) + amount
    return tuple(sorted(merged.items()))


@attrs.frozen(cache_hash=True)
class Resources(Mapping[str, int]):
    """An immutable resource list: resource name -> milli-units; absent names are zero.

    Explicit zeros are kept (a NodePool limit of ``cpu: 0`` means none at all).

    Kept as a sorted tuple of pairs so that equal lists hash and print identically on every run.
    """

    items_: tuple[tuple[str, int], ...] = attrs.field(converter=_pairs, default=())

    @classmethod
    def of(cls, values: Mapping[str, str | int | float] | None = None) -> Resources:
        """Build from Kubernetes quantities, e.g. ``Resources.of({"cpu": "500m"})``."""
        if not values:
            return EMPTY
        return cls(tuple((k, parse_resource(k, v)) for k, v in values.items()))

    @classmethod
    def milli(cls, values: Mapping[str, int]) -> Resources:
        """Build from values already in milli-units."""
        return cls(tuple(values.items()))

    def __getitem__(self, key: str) -> int:
        for name, amount in self.items_:
            if name == key:
                return amount
        raise KeyError(key)

    def get_amount(self, key: str) -> int:
        """The amount of ``key`` in milli-units, zero when absent."""
        for name, amount in self.items_:
            if name == key:
                return amount
        return 0

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.items_)

    def __len__(self) -> int:
        return len(self.items_)

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.items_ + other.items_)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.items_ + tuple((k, -v) for k, v in other.items_))

    def scaled(self, factor: int) -> Resources:
        """Every amount multiplied by ``factor`` (``n`` identical pods)."""
        return Resources(tuple((k, v * factor) for k, v in self.items_))

    def fits(self, available: Resources) -> bool:
        """True when every amount here is at most the same amount in ``available``."""
        return all(amount <= available.get_amount(name) for name, amount in self.items_)

    def exceeded(self, available: Resources) -> tuple[str, ...]:
        """Names whose amount here is larger than in ``available`` (sorted)."""
        return tuple(n for n, a in self.items_ if a > available.get_amount(n))

    def render(self) -> dict[str, str]:
        """Human quantities keyed by resource name (for tables, JSON and messages)."""
        return {name: format_quantity(name, amount) for name, amount in self.items_}


EMPTY: Final = Resources()
