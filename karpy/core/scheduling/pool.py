"""Per-NodePool instance-type indexes: the solver's fast path for "which types still fit".

Pure: built from the snapshot, and kept for the next solves over the same NodePool, catalog,
DaemonSets and resource space (``pool_index``): a controller solves against one catalog again
and again, and indexing it (sorting, the frontier, the memoised narrowing) was a fifth of a
1,000-pod solve. Everything an index holds is a function of those inputs, so a kept index
answers exactly as a fresh one. Instance types are numbered and sets of them are
Python ints used as bitsets, so narrowing a NodeClaim is a few ANDs instead of a scan: for each
resource the types are sorted by allocatable and a suffix bitset answers "types with at least x",
and requirement sets map (memoised) to the bitset of types with a compatible available offering.
"""

from __future__ import annotations

import copy
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.requirements import Requirements
from karpy.core.resources import Resources
from karpy.core.scheduling.cost import COST, dearest_milli
from karpy.core.scheduling.preferences import PreferencePolicy, pod_requirements, start
from karpy.core.snapshot import NODES_LIMIT, DaemonSet, NodePool
from karpy.core.taints import Taint, untolerated

Vector = tuple[int, ...]
_INF = float("inf")


@attrs.frozen
class ResourceSpace:
    """A fixed order of resource names so requests become int tuples."""

    names: tuple[str, ...]

    def vector(self, resources: Resources) -> Vector:
        """``resources`` in this space's order (names outside it are dropped)."""
        return tuple(resources.get_amount(n) for n in self.names)

    def resources(self, vector: Sequence[int]) -> Resources:
        """Back to a resource list (zero amounts left out)."""
        return Resources.milli({n: v for n, v in zip(self.names, vector, strict=True) if v})


@attrs.frozen
class PoolFilter:
    """How many of the provider's instance types a NodePool's own requirements removed."""

    offered: int
    removed_by_requirements: int
    removed_by_offerings: int
    first_conflict: str | None


def popcount(mask: int) -> int:
    """Number of types in a bitset."""
    return mask.bit_count()


def bits(mask: int) -> list[int]:
    """Indices set in ``mask``, ascending."""
    out: list[int] = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def daemon_overhead(
    daemonsets: Sequence[DaemonSet],
    template: Requirements,
    taints: Sequence[Taint],
    allow_undefined: frozenset[str],
) -> Resources:
    """Summed requests of the DaemonSets that would run on a node of this template.

    A DaemonSet counts when it tolerates the taints and its nodeSelector plus *any* one of its
    required node-affinity terms (they are ORed) is compatible with the template (which need not
    define the hostname or the labels in `allow_undefined`).
    """
    allowed = allow_undefined | {wk.LABEL_HOSTNAME}
    total = Resources()
    for ds in sorted(daemonsets, key=lambda d: (d.namespace, d.name)):
        if untolerated(taints, ds.pod.tolerations) is not None:
            continue
        first = start(ds.pod, PreferencePolicy.IGNORE)
        rungs = [
            attrs.evolve(first, node_term=i)
            for i in range(max(len(ds.pod.required_node_affinity), 1))
        ]
        if all(
            template.compatible(pod_requirements(ds.pod, rung), allow_undefined=allowed) is not None
            for rung in rungs
        ):
            continue
        total = total + ds.pod.requests()
    return total


# Indexes kept between solves (least recently used first), and how many memoised requirement
# sets one may hold before it is built afresh (its memos would otherwise grow with every new
# pod shape a long-running controller sees).
_KEPT: dict[tuple[object, ...], tuple[tuple[InstanceType, ...], PoolIndex]] = {}
KEPT_INDEXES = 8
KEPT_MEMO_LIMIT = 4096


def pool_index(
    pool: NodePool,
    offered: tuple[InstanceType, ...],
    *,
    space: ResourceSpace,
    daemonsets: tuple[DaemonSet, ...],
    allow_undefined: frozenset[str],
) -> PoolIndex:
    """``PoolIndex(...)`` for these inputs, the one kept from an earlier solve when there is."""
    # The catalog by the identity of its types (hashing 400 of them by value cost as much as
    # the rest of the lookup); the entry holds them, so no identity is reused meanwhile.
    types = tuple(offered)
    key = (pool, tuple(map(id, types)), space, tuple(daemonsets), allow_undefined)
    try:
        entry = _KEPT.pop(key, None)
    except TypeError:  # an unhashable field somewhere: index afresh, keep nothing
        return PoolIndex(
            pool, types, space=space, daemonsets=daemonsets, allow_undefined=allow_undefined
        )
    if entry is None or entry[1].memo_size() > KEPT_MEMO_LIMIT:
        index = PoolIndex(
            pool, types, space=space, daemonsets=daemonsets, allow_undefined=allow_undefined
        )
        entry = (types, index)
    _KEPT[key] = entry  # most recently used last
    while len(_KEPT) > KEPT_INDEXES:
        del _KEPT[next(iter(_KEPT))]
    return entry[1]


def forget_indexes() -> None:
    """Drop every kept index (tests compare a kept index with a fresh one)."""
    _KEPT.clear()


class PoolIndex:
    """One NodePool with its usable instance types, indexed for narrowing."""

    def __init__(
        self,
        pool: NodePool,
        offered: Sequence[InstanceType],
        *,
        space: ResourceSpace,
        daemonsets: Sequence[DaemonSet],
        allow_undefined: frozenset[str],
    ) -> None:
        self.pool = pool
        self.space = space
        self.template = pool.template_requirements()
        self.taints = pool.taints
        self.allow_undefined = allow_undefined
        kept: list[InstanceType] = []
        by_req = by_offer = 0
        first_conflict: str | None = None
        for it in sorted(offered, key=lambda t: t.name):
            conflict = self.template.conflict(it.requirements)
            if conflict is not None:
                by_req += 1
                first_conflict = first_conflict or conflict.message()
                continue
            if it.cheapest(self.template) is None:
                by_offer += 1
                continue
            kept.append(it)
        self.filter = PoolFilter(len(offered), by_req, by_offer, first_conflict)
        cheapest = {it.name: it.cheapest(self.template) for it in kept}
        kept.sort(key=lambda t: (_price(cheapest[t.name]), t.name))
        self.types: tuple[InstanceType, ...] = tuple(kept)
        self.full: int = (1 << len(kept)) - 1
        self.overhead = daemon_overhead(daemonsets, self.template, pool.taints, allow_undefined)
        self.overhead_vec = space.vector(self.overhead)
        self.alloc: list[Vector] = [space.vector(t.allocatable) for t in kept]
        self.cap: list[Vector] = [space.vector(t.capacity) for t in kept]
        if COST in space.names:
            # A cost limit is charged what a NodeClaim of the type could cost at most.
            r = space.names.index(COST)
            self.cap = [
                (*v[:r], dearest_milli(t, self.template), *v[r + 1 :])
                for v, t in zip(self.cap, kept, strict=True)
            ]
        self._sorted: list[list[int]] = []
        self._suffix: list[list[int]] = []
        for r in range(len(space.names)):
            order = _order([v[r] for v in self.alloc])
            values = [self.alloc[i][r] for i in order]
            suffix = [0] * (len(order) + 1)
            for pos in range(len(order) - 1, -1, -1):
                suffix[pos] = suffix[pos + 1] | (1 << order[pos])
            self._sorted.append(values)
            self._suffix.append(suffix)
        self._cap_sorted: list[list[int]] = []
        self._cap_prefix: list[list[int]] = []
        for r in range(len(space.names)):
            order = _order([v[r] for v in self.cap])
            values = [self.cap[i][r] for i in order]
            prefix = [0] * (len(order) + 1)
            for pos, i in enumerate(order):
                prefix[pos + 1] = prefix[pos] | (1 << i)
            self._cap_sorted.append(values)
            self._cap_prefix.append(prefix)
        self._req_cache: dict[Requirements, int] = {self.template: self.full}
        self._price_cache: dict[
            Requirements, tuple[list[tuple[int, float]], list[float] | None]
        ] = {}
        self._offer_cache: dict[
            Requirements, list[tuple[frozenset[str], frozenset[str]] | None]
        ] = {}
        self._union_cache: dict[Requirements, tuple[frozenset[str], frozenset[str]]] = {}
        self._frontier: dict[Requirements, tuple[int, ...]] = {}
        self.position = {it.name: i for i, it in enumerate(self.types)}
        self.min_values: tuple[tuple[str, int], ...] = tuple(
            (r.key, r.min_values) for r in self.template if r.min_values is not None
        )
        self.node_limit: int | None = None
        self.limit_vec: Vector | None = None
        self.limit_names: tuple[str, ...] = ()
        self._set_limits(pool.limits)

    def frontier(self) -> tuple[int, ...]:
        """Types no other type beats: none is at most as dear and holds at least as much of
        every resource (less DaemonSet overhead). A fractional optimum never needs the others
        (any row scaling keeps the order), so the LP prices only these — a few hundred of
        EC2's 1,400 types. Memoised; shared with ``with_limits`` copies."""
        found = self._frontier.get(self.template)
        if found is None:
            # Type j beats type i when it comes first in (price, index) order and holds at
            # least as much of everything: ``fits_mask`` of i's allocatable (the overhead is the
            # same for every type, so it drops out) against the types already passed. Beaten by
            # any earlier type means beaten by a kept one (dominance is transitive), so this is
            # the pairwise scan over kept types done with bitsets, in one pass.
            rows = sorted(
                (self.cheapest_price(1 << i, self.template), i) for i in range(len(self.alloc))
            )
            passed = 0
            kept: list[int] = []
            for _, i in rows:
                if not self.fits_mask(self.alloc[i]) & passed:
                    kept.append(i)
                passed |= 1 << i
            found = tuple(sorted(kept))
            self._frontier[self.template] = found
        return found

    def memo_size(self) -> int:
        """How many requirement sets the memoised narrowing holds."""
        return len(self._req_cache) + len(self._price_cache) + len(self._offer_cache)

    def _set_limits(self, limits: Resources) -> None:
        self.node_limit = limits.get_amount(NODES_LIMIT) // 1000 if NODES_LIMIT in limits else None
        self.limit_vec = (
            self.space.vector(limits) if any(n != NODES_LIMIT for n in limits) else None
        )
        self.limit_names = tuple(n for n in limits if n != NODES_LIMIT)

    def with_limits(self, pool: NodePool) -> PoolIndex:
        """This index for ``pool``, the same NodePool with other limits: the types, vectors and
        memoised narrowing are shared (they depend on the types and the template only)."""
        if pool.template_requirements() != self.template or pool.taints != self.taints:
            raise ValueError(f"NodePool {pool.name} differs from {self.pool.name} beyond limits")
        clone = copy.copy(self)
        clone.pool = pool
        clone._set_limits(pool.limits)
        return clone

    # ------------------------------------------------------------------ masks
    def fits_mask(self, need: Vector) -> int:
        """Types whose allocatable covers ``need`` in every resource."""
        mask = self.full
        for r, amount in enumerate(need):
            if amount > 0:
                values = self._sorted[r]
                mask &= self._suffix[r][bisect_left(values, amount)]
                if not mask:
                    return 0
        return mask

    def within_mask(self, remaining: Vector) -> int:
        """Types whose capacity stays within ``remaining`` for every limited resource."""
        mask = self.full
        for r, name in enumerate(self.space.names):
            if name in self.limit_names:
                mask &= self._cap_prefix[r][bisect_right(self._cap_sorted[r], remaining[r])]
        return mask

    def req_mask(self, reqs: Requirements) -> int:
        """Types compatible with ``reqs`` that keep an available compatible offering."""
        cached = self._req_cache.get(reqs)
        if cached is not None:
            return cached
        mask = 0
        for i, it in enumerate(self.types):
            if reqs.conflict(it.requirements) is None and it.cheapest(reqs) is not None:
                mask |= 1 << i
        self._req_cache[reqs] = mask
        return mask

    def min_values_short(self, mask: int) -> tuple[str, int, int] | None:
        """The first minValues requirement the types in ``mask`` cannot meet: (key, need, have)."""
        for key, need in self.min_values:
            if key == wk.LABEL_INSTANCE_TYPE:
                have = popcount(mask)
            else:
                seen: set[str] = set()
                for i in bits(mask):
                    req = self.types[i].requirements.get(key)
                    if req is not None and not req.complement:
                        seen |= req.values
                have = len(seen)
            if have < need:
                return (key, need, have)
        return None

    def max_capacity(self, mask: int) -> Vector:
        """Element-wise largest capacity among ``mask``'s types (limits are charged this)."""
        best = [0] * len(self.space.names)
        for i in bits(mask):
            for r, amount in enumerate(self.cap[i]):
                if amount > best[r]:
                    best[r] = amount
        return tuple(best)

    def price_order(self, reqs: Requirements) -> tuple[list[tuple[int, float]], list[float] | None]:
        """``(type index, cheapest compatible price)`` under ``reqs``, cheapest first (memoised);
        types without a compatible available offering are left out. The second value is the price
        per type index when that order is the index order (types are numbered by their price
        under the NodePool's own requirements, so it usually is): then the cheapest type of a
        bitset is its lowest usable bit."""
        cached = self._price_cache.get(reqs)
        if cached is None:
            priced: list[tuple[float, str, int]] = []
            for i, it in enumerate(self.types):
                offering = it.cheapest(reqs)
                if offering is not None:
                    priced.append((offering.price, it.name, i))
            priced.sort()
            order = [(i, price) for price, _, i in priced]
            positions = [i for i, _ in order]
            by_index: list[float] | None = None
            if positions == sorted(positions):
                by_index = [_INF] * len(self.types)
                for i, price in order:
                    by_index[i] = price
            cached = (order, by_index)
            self._price_cache[reqs] = cached
        return cached

    def offered_in(self, i: int, reqs: Requirements) -> tuple[frozenset[str], frozenset[str]]:
        """Zones and capacity types of type ``i``'s available offerings under ``reqs``."""
        per_type = self._offer_cache.get(reqs)
        if per_type is None:
            per_type = [None for _ in self.types]
            self._offer_cache[reqs] = per_type
        cached = per_type[i]
        if cached is None:
            offers = [o for o in self.types[i].offerings if o.available and o.matches(reqs)]
            cached = (
                frozenset(o.zone for o in offers),
                frozenset(o.capacity_type for o in offers),
            )
            per_type[i] = cached
        return cached

    def offer_union(self, reqs: Requirements) -> tuple[frozenset[str], frozenset[str]]:
        """Zones and capacity types offered by any type under ``reqs`` (memoised)."""
        found = self._union_cache.get(reqs)
        if found is None:
            zones: set[str] = set()
            kinds: set[str] = set()
            for i in range(len(self.types)):
                z, k = self.offered_in(i, reqs)
                zones |= z
                kinds |= k
            found = (frozenset(zones), frozenset(kinds))
            self._union_cache[reqs] = found
        return found

    def cheapest_index(self, mask: int, reqs: Requirements) -> int | None:
        """The index of the cheapest type in ``mask`` under ``reqs`` (None if none is sold)."""
        order, by_index = self.price_order(reqs)
        if by_index is not None:
            while mask:
                low = mask & -mask
                i = low.bit_length() - 1
                if by_index[i] != _INF:
                    return i
                mask ^= low
            return None
        for i, _ in order:
            if mask >> i & 1:
                return i
        return None

    def cheapest_price(self, mask: int, reqs: Requirements) -> float:
        """The lowest price among ``mask``'s types under ``reqs``."""
        order, by_index = self.price_order(reqs)
        if by_index is not None:
            while mask:
                low = mask & -mask
                price = by_index[low.bit_length() - 1]
                if price != _INF:
                    return price
                mask ^= low
            return _INF
        for i, price in order:
            if mask >> i & 1:
                return price
        return _INF

    def ordered(
        self, mask: int, reqs: Requirements, limit: int
    ) -> list[tuple[float, InstanceType]]:
        """Up to ``limit`` of ``mask``'s types with their price under ``reqs``, cheapest first."""
        out: list[tuple[float, InstanceType]] = []
        order, by_index = self.price_order(reqs)
        if by_index is not None:
            while mask and len(out) < limit:
                low = mask & -mask
                i = low.bit_length() - 1
                if by_index[i] != _INF:
                    out.append((by_index[i], self.types[i]))
                mask ^= low
            return out
        for i, price in order:
            if mask >> i & 1:
                out.append((price, self.types[i]))
                if len(out) >= limit:
                    break
        return out


def _price(offering: Offering | None) -> float:
    return float("inf") if offering is None else offering.price


def _order(values: list[int]) -> list[int]:
    """Positions of ``values`` sorted by value (stable)."""
    return sorted(range(len(values)), key=values.__getitem__)


def build_space(names: Mapping[str, None] | Sequence[str]) -> ResourceSpace:
    """A resource space over ``names`` (sorted)."""
    return ResourceSpace(tuple(sorted(set(names))))
