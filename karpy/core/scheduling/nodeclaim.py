"""A NodeClaim being packed: requirements and instance types that only narrow as pods join.

Pure and mutable only within one solve. ``try_add`` checks one pod against Karpenter's
filters — taints, host ports, room in some remaining instance type (checked early because it
is cheap), requirements, volume topology, topology domains, offerings, minValues — and returns
the narrowed state without changing anything; ``commit`` applies it. Instance-type sets are
bitsets over the NodePool's index, so narrowing costs a handful of integer ANDs.
"""

from __future__ import annotations

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import HostPort, Pod
from karpy.core.requirements import Requirement, Requirements
from karpy.core.scheduling.existingnode import Placement, SavedState
from karpy.core.scheduling.pool import PoolIndex, ResourceSpace, Vector, popcount
from karpy.core.scheduling.queue import ShapeContext
from karpy.core.scheduling.results import NodeClaimPlan, ReasonKind, Reject
from karpy.core.scheduling.topology import Topology, TopologyReject
from karpy.core.taints import untolerated


def pool_verdict(index: PoolIndex, ctx: ShapeContext) -> Reject | None:
    """The checks that depend only on the NodePool template (cached per shape)."""
    if index.pool.name in ctx.pool_verdicts:
        return ctx.pool_verdicts[index.pool.name]
    shape = ctx.shape
    verdict: Reject | None = None
    taint = untolerated(index.taints, shape.tolerations)
    if taint is not None:
        verdict = Reject(ReasonKind.TAINT, f"untolerated taint {taint.describe()}")
    else:
        bad = index.template.compatible(shape.requirements, allow_undefined=index.allow_undefined)
        if bad is not None:
            verdict = Reject(ReasonKind.REQUIREMENT, bad.message())
        elif shape.volume_requirements and not any(
            index.template.conflict(alt) is None for alt in shape.volume_requirements
        ):
            verdict = Reject(ReasonKind.VOLUME, "no volume topology term matches the nodepool")
    ctx.pool_verdicts[index.pool.name] = verdict
    return verdict


class NodeClaim:
    """A NodeClaim under construction."""

    kind = "nodeclaim"

    def __init__(
        self,
        index: PoolIndex,
        *,
        name: str,
        mask: int,
        topology: Topology,
        merges: MergeCache,
        max_types: int,
    ) -> None:
        self.index = index
        self.max_types = max_types
        self._room_key: tuple[int, Vector] | None = None
        self._room: Vector | None = None
        self.name = name
        self.hostname = name
        self.requirements: Requirements = index.template
        self.mask = mask
        self.used: Vector = index.overhead_vec
        self.pods: list[Pod] = []
        self.ports: list[HostPort] = []
        self.topology = topology
        self.merges = merges
        self.charge: Vector = ()
        self.ledger: list[int] | None = None
        self.min_values_relaxed = False
        self.base_mask = mask

    def try_add(self, ctx: ShapeContext) -> Placement | Reject:
        """Would one pod of ``ctx`` fit here now? Nothing changes."""
        index = self.index
        verdict = pool_verdict(index, ctx)
        if verdict is not None:
            return verdict
        shape = ctx.shape
        for port in shape.host_ports:
            if any(port.conflicts(p) for p in self.ports):
                return Reject(ReasonKind.HOST_PORT, f"host port {port.port}/{port.protocol} in use")
        # Room first: it is the cheapest check and, once failed, fails for good.
        need = tuple(u + r for u, r in zip(self.used, ctx.vector, strict=True))
        mask = self.mask & index.fits_mask(need)
        if not mask:
            return Reject(ReasonKind.RESOURCES, "no remaining instance type has room")
        reqs = self.requirements
        if shape.requirements:
            merged = self.merges.merge(reqs, shape.requirements)
            if merged is None:
                return Reject(ReasonKind.REQUIREMENT, "requirements conflict with the nodeclaim")
            reqs = merged
        if shape.volume_requirements:
            for alt in shape.volume_requirements:
                merged = self.merges.merge(reqs, alt)
                if merged is not None and index.req_mask(merged) & self.mask:
                    reqs = merged
                    break
            else:
                return Reject(ReasonKind.VOLUME, "no volume topology term fits the nodeclaim")
        choices: dict[str, list[str]] = {}
        if not ctx.topology.empty:
            verdict_t = self.topology.admit(
                ctx.topology, hostname=self.hostname, fixed=None, requirements=reqs
            )
            if isinstance(verdict_t, TopologyReject):
                return Reject(
                    ReasonKind.TOPOLOGY,
                    f"{verdict_t.kind} on {verdict_t.key}: {verdict_t.detail}",
                    verdict_t.permanent,
                )
            choices = verdict_t
        if reqs is not self.requirements:
            mask &= index.req_mask(reqs)
            if not mask:
                return Reject(ReasonKind.OFFERING, "no instance type offers these requirements")
        domains: dict[str, str] = {}
        for key, candidates in choices.items():
            for domain in candidates:
                if reqs.single_value(key) == domain:
                    domains[key] = domain
                    break
                pinned = self.merges.merge(reqs, _pin(key, domain))
                if pinned is None:
                    continue
                pinned_mask = mask & index.req_mask(pinned)
                if pinned_mask:
                    reqs, mask = pinned, pinned_mask
                    domains[key] = domain
                    break
            else:
                return Reject(
                    ReasonKind.TOPOLOGY, f"no instance type offered in an allowed {key}", False
                )
        relaxed = False
        if index.min_values:
            short = index.min_values_short(mask) or self._short_after_cut(mask, reqs)
            if short is not None:
                if not ctx.shape.relax_min_values:
                    key, want, have = short
                    detail = f"{key} needs {want} values, {have} remain"
                    return Reject(ReasonKind.MIN_VALUES, detail)
                relaxed = True
        return Placement(reqs, mask, need, domains, relaxed)

    def commit(self, placement: Placement, pod: Pod, ctx: ShapeContext) -> None:
        """Apply a placement from ``try_add``."""
        self.requirements = placement.requirements
        self.min_values_relaxed |= placement.min_values_relaxed
        self.set_mask(placement.mask)
        self.used = placement.used
        self.pods.append(pod)
        self.ports.extend(ctx.shape.host_ports)
        if not ctx.topology.empty:
            self.topology.record(ctx.topology, hostname=self.hostname, domains=placement.domains)

    def save(self) -> SavedState:
        """State for ``restore`` (the improvement step moves simple pods only)."""
        return (
            self.requirements,
            self.mask,
            self.used,
            len(self.pods),
            len(self.ports),
            self.min_values_relaxed,
        )

    def restore(self, saved: SavedState) -> None:
        """Undo commits made since ``save``."""
        self.requirements, mask, self.used, npods, nports, relaxed = saved
        self.set_mask(mask)
        self.min_values_relaxed = relaxed
        del self.pods[npods:]
        del self.ports[nports:]

    def without(self, pod: Pod, ctx: ShapeContext) -> tuple[Vector, int]:
        """(used, mask) if one simple pod left: instance types may widen again, but never beyond
        what the NodeClaim could hold when it was opened, nor past its limits charge."""
        used = tuple(u - r for u, r in zip(self.used, ctx.vector, strict=True))
        mask = self.mask_for(used)
        if not mask:
            return self.used, self.mask
        return used, mask

    def mask_for(self, used: Vector) -> int:
        """The instance types this NodeClaim could use if it held only ``used`` (0 when that
        would break minValues)."""
        index = self.index
        mask = self.base_mask & index.req_mask(self.requirements) & index.fits_mask(used)
        if self.ledger is not None:
            mask &= index.within_mask(self.charge)  # widening must not raise the charge
        if index.min_values and index.min_values_short(mask) is not None:
            return 0
        return mask

    def remove(self, pod: Pod, used: Vector, mask: int) -> None:
        """Take a simple pod out (see ``without``).

        Found by identity from the end: the pods peeled are the newest, and comparing pods by
        value (every field) along a NodeClaim of hundreds was most of the peel step's time."""
        pods = self.pods
        for i in range(len(pods) - 1, -1, -1):
            if pods[i] is pod:
                del pods[i]
                break
        else:
            raise ValueError(f"pod {pod.uid} is not on NodeClaim {self.name}")
        self.used = used
        self.set_mask(mask)

    # ------------------------------------------------------------------ limits
    def track_limits(self, ledger: list[int], mask: int) -> None:
        """Charge this NodeClaim to its NodePool's resource-limit ``ledger``: the largest
        capacity among ``mask``'s types (those its first pod leaves it), since the provider may
        launch any of them. From then on the charge follows the mask: narrowing refunds the
        difference, and ``mask_for`` never widens past the charge."""
        self.ledger = ledger
        self.charge = (0,) * len(ledger)
        self._recharge(mask)

    def release(self) -> None:
        """Refund the whole charge (the NodeClaim was dropped)."""
        if self.ledger is not None:
            for r, amount in enumerate(self.charge):
                self.ledger[r] -= amount
        self.ledger = None
        self.charge = ()

    def set_mask(self, mask: int) -> None:
        """Replace the instance-type set, moving the limits charge with it."""
        if mask != self.mask:
            self.mask = mask
            if self.ledger is not None:
                self._recharge(mask)

    def _recharge(self, mask: int) -> None:
        ledger = self.ledger
        if ledger is None:
            return
        charge = self.index.max_capacity(mask)
        for r, (new, old) in enumerate(zip(charge, self.charge, strict=True)):
            ledger[r] += new - old
        self.charge = charge

    def _short_after_cut(self, mask: int, reqs: Requirements) -> tuple[str, int, int] | None:
        """Would minValues still hold once the types are cut to ``max_types``?"""
        if popcount(mask) <= self.max_types:
            return None
        ordered = truncate_keeping_min_values(
            self.index.ordered(mask, reqs, popcount(mask)), self.max_types, self.index.min_values
        )
        kept = 0
        for _, it in ordered:
            kept |= 1 << self.index.position[it.name]
        return self.index.min_values_short(kept)

    def room_for(self, vector: Vector) -> bool:
        """Does the cheapest remaining type still hold ``vector`` more (a free fit, if the other
        checks pass)? The spare room is cached until the NodeClaim changes."""
        key = (self.mask, self.used)
        if self._room_key != key:
            i = self.index.cheapest_index(self.mask, self.requirements)
            alloc = self.index.alloc[i] if i is not None else None
            self._room = (
                None
                if alloc is None
                else tuple(a - u for a, u in zip(alloc, self.used, strict=True))
            )
            self._room_key = key
        room = self._room
        return room is not None and all(v <= r for v, r in zip(vector, room, strict=True))

    def price(self) -> float:
        """Cheapest compatible offering among the remaining instance types."""
        return self.index.cheapest_price(self.mask, self.requirements)

    def ordered_types(self, limit: int) -> list[tuple[float, InstanceType]]:
        """Up to ``limit`` remaining types with their cheapest compatible price, cheapest first."""
        return self.index.ordered(self.mask, self.requirements, limit)


def _pin(key: str, domain: str) -> Requirements:
    return Requirements((Requirement(key, False, frozenset({domain})),))


class MergeCache:
    """Memoised requirement intersections (None when they conflict)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Requirements, Requirements], Requirements | None] = {}

    def merge(self, base: Requirements, extra: Requirements) -> Requirements | None:
        """``base`` ∩ ``extra``, or None when some key cannot be met by both."""
        key = (base, extra)
        if key in self._cache:
            return self._cache[key]
        result: Requirements | None
        if base.conflict(extra) is not None:
            result = None
        else:
            result = base.merge(extra)
            if any(r.is_empty() and r.key in _MUST_EXIST for r in result):
                result = None
        self._cache[key] = result
        return result


_MUST_EXIST = frozenset({wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE, wk.LABEL_INSTANCE_TYPE})


def finalize(
    claim: NodeClaim, limit: int, space: ResourceSpace, *, best_effort: bool = False
) -> NodeClaimPlan | Reject:
    """Order the claim's types by price, cut them to ``limit`` (keeping minValues when it can),
    and inject instance-type, capacity-type and zone requirements from what remains."""
    index = claim.index
    relaxed = claim.min_values_relaxed
    if index.min_values:
        ordered = truncate_keeping_min_values(
            claim.ordered_types(len(index.types)), limit, index.min_values
        )
        kept = 0
        for _, it in ordered:
            kept |= 1 << index.position[it.name]
        short = index.min_values_short(kept)
        if short is not None and best_effort:
            relaxed = True
        elif short is not None:
            key, want, have = short
            detail = f"{key} needs {want} values, {have} remain after cutting to {limit}"
            return Reject(ReasonKind.MIN_VALUES, detail)
    else:
        ordered = claim.ordered_types(limit)
    if not ordered:
        return Reject(ReasonKind.NO_INSTANCE_TYPES, "no instance type left")
    zones: set[str] = set()
    capacity_types: set[str] = set()
    all_zones, all_types = index.offer_union(claim.requirements)
    for _, it in ordered:
        offered_zones, offered_types = index.offered_in(index.position[it.name], claim.requirements)
        zones |= offered_zones
        capacity_types |= offered_types
        if len(zones) == len(all_zones) and len(capacity_types) == len(all_types):
            break  # nothing more to learn from the rest
    reqs = claim.requirements.add(
        Requirement(wk.LABEL_INSTANCE_TYPE, False, frozenset(it.name for _, it in ordered)),
        Requirement(wk.LABEL_CAPACITY_TYPE, False, frozenset(capacity_types)),
        Requirement(wk.LABEL_TOPOLOGY_ZONE, False, frozenset(zones)),
    )
    return NodeClaimPlan(
        name=claim.name,
        nodepool=index.pool.name,
        requirements=reqs,
        instance_types=tuple(it.name for _, it in ordered),
        zones=tuple(sorted(zones)),
        capacity_types=tuple(sorted(capacity_types)),
        requests=space.resources(claim.used),
        pods=tuple(p.uid for p in claim.pods),
        min_values_relaxed=relaxed,
        price=ordered[0][0],
    )


def _values(it: InstanceType, key: str) -> frozenset[str]:
    if key == wk.LABEL_INSTANCE_TYPE:
        return frozenset({it.name})
    req = it.requirements.get(key)
    return frozenset() if req is None or req.complement else req.values


def truncate_keeping_min_values(
    ordered: list[tuple[float, InstanceType]],
    limit: int,
    min_values: tuple[tuple[str, int], ...],
) -> list[tuple[float, InstanceType]]:
    """The ``limit`` cheapest types, except that for every minValues key the cheapest type of
    each new value is taken first until the key has enough values (then price order fills the
    rest). If minValues cannot fit in ``limit`` types the result falls short and the caller
    reports it."""
    chosen: set[int] = set()
    for key, need in min_values:
        seen: set[str] = set()
        for pos in sorted(chosen):
            seen |= _values(ordered[pos][1], key)
        for pos, (_, it) in enumerate(ordered):
            if len(seen) >= need:
                break
            new = _values(it, key) - seen
            if new and pos not in chosen:
                chosen.add(pos)
                seen |= new
    for pos in range(len(ordered)):
        if len(chosen) >= limit:
            break
        chosen.add(pos)
    return [ordered[pos] for pos in sorted(chosen)][: max(limit, 0)]
