"""Why a pod could not be placed: a structured account per NodePool, plus one readable line.

Pure: it replays, for one unplaced pod at the rung it ended on, the filters a new NodeClaim of
each NodePool applies — NodePool requirements, taints, requirement keys, offerings, volume
topology, resources, limits, topology, minValues — counting how many instance types each one
removed, and it tallies why every existing node and in-flight NodeClaim refused. Karpenter prints
one long line; this keeps the same facts as data and adds the line. It reads the solve's final
``Fleet`` (its bins, and what the NodePools' limits still allow) and changes nothing.
"""

from __future__ import annotations

from collections import Counter

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.pods import Pod
from karpy.core.requirements import Requirements
from karpy.core.resources import format_quantity
from karpy.core.scheduling.cost import COST
from karpy.core.scheduling.existingnode import Placement
from karpy.core.scheduling.fleet import Fleet
from karpy.core.scheduling.nodeclaim import NodeClaim, pool_verdict
from karpy.core.scheduling.pool import PoolIndex, bits, popcount
from karpy.core.scheduling.queue import ShapeContext
from karpy.core.scheduling.results import (
    BinSummary,
    Explanation,
    FilterStep,
    PoolExplanation,
    ReasonKind,
    Reject,
)


def explain(fleet: Fleet, pod: Pod, ctx: ShapeContext, relaxations: tuple[str, ...]) -> Explanation:
    """The explanation for ``pod`` given the solve's final fleet."""
    pools = tuple(_explain_pool(fleet, index, ctx) for index in fleet.pools)
    existing = _summarize([node.try_add(ctx) for node in fleet.existing])
    claims = _summarize([claim.try_add(ctx) for claim in fleet.claims if claim.pods])
    return Explanation(
        pod=pod.key,
        uid=pod.uid,
        nodepools=pools,
        existing_nodes=existing,
        nodeclaims=claims,
        relaxations=relaxations,
        message=_message(pod, pools, existing, claims),
    )


def finalize_failure(
    pod: Pod, claim: NodeClaim, reject: Reject, relaxations: tuple[str, ...]
) -> Explanation:
    """A pod whose NodeClaim failed at the end (its instance types could not be cut to the
    maximum without breaking minValues): the NodePool's own filters, then one step for the
    cut, which removes every type the NodeClaim had left."""
    index = claim.index
    steps = _pool_steps(index)
    kept, pods = popcount(claim.mask), len(claim.pods)
    detail = (
        f"nodeclaim {claim.name} ({pods} pod{'' if pods == 1 else 's'},"
        f" {kept} instance types left): {reject.detail}"
    )
    steps.append(FilterStep(reject.kind, detail, len(index.types), 0))
    pools = (PoolExplanation(index.pool.name, index.filter.offered, tuple(steps)),)
    return Explanation(
        pod=pod.key,
        uid=pod.uid,
        nodepools=pools,
        existing_nodes=(),
        nodeclaims=(),
        relaxations=relaxations,
        message=_message(pod, pools, (), ()),
    )


def _summarize(verdicts: list[Placement | Reject]) -> tuple[BinSummary, ...]:
    counts: Counter[tuple[ReasonKind, str]] = Counter()
    for verdict in verdicts:
        if isinstance(verdict, Reject):
            counts[(verdict.kind, verdict.detail)] += 1
    return tuple(
        BinSummary(kind, detail, n)
        for (kind, detail), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def _pool_steps(index: PoolIndex) -> list[FilterStep]:
    """What the NodePool's own requirements and offerings removed, before any pod."""
    steps: list[FilterStep] = []
    pf = index.filter
    remaining = pf.offered
    if pf.removed_by_requirements:
        remaining -= pf.removed_by_requirements
        detail = f"nodepool requirements: {pf.first_conflict}"
        steps.append(
            FilterStep(
                ReasonKind.INSTANCE_TYPE_REQUIREMENT, detail, pf.removed_by_requirements, remaining
            )
        )
    if pf.removed_by_offerings:
        remaining -= pf.removed_by_offerings
        steps.append(
            FilterStep(
                ReasonKind.OFFERING,
                "no available offering within the nodepool requirements",
                pf.removed_by_offerings,
                remaining,
            )
        )
    return steps


def _explain_pool(fleet: Fleet, index: PoolIndex, ctx: ShapeContext) -> PoolExplanation:
    steps = _pool_steps(index)
    offered = index.filter.offered
    start = remaining = len(index.types)
    result = PoolExplanation(index.pool.name, offered, tuple(steps))
    if offered == 0:
        detail = "no instance types are offered to this nodepool"
        return PoolExplanation(
            index.pool.name, 0, (FilterStep(ReasonKind.NO_INSTANCE_TYPES, detail, 0, 0),)
        )
    if remaining == 0:
        return result
    verdict = pool_verdict(index, ctx)
    if verdict is not None:
        steps.append(FilterStep(verdict.kind, verdict.detail, remaining, 0))
        return PoolExplanation(index.pool.name, offered, tuple(steps))
    shape = ctx.shape
    reqs = fleet.merges.merge(index.template, shape.requirements)
    if reqs is None:
        bad = index.template.conflict(shape.requirements)
        detail = bad.message() if bad else "requirements conflict"
        steps.append(FilterStep(ReasonKind.REQUIREMENT, detail, remaining, 0))
        return PoolExplanation(index.pool.name, offered, tuple(steps))
    mask = index.full
    keys: Counter[str] = Counter()
    for i in bits(mask):
        conflict = reqs.conflict(index.types[i].requirements)
        if conflict is not None:
            mask &= ~(1 << i)
            keys[conflict.key] += 1
    _step(steps, ReasonKind.INSTANCE_TYPE_REQUIREMENT, _keys_detail(keys), mask, start=start)
    mask &= index.req_mask(reqs)
    _step(steps, ReasonKind.OFFERING, _offering_detail(reqs), mask, start=start)
    if shape.volume_requirements and mask:
        for alt in shape.volume_requirements:
            merged = fleet.merges.merge(reqs, alt)
            if merged is not None and mask & index.req_mask(merged):
                mask &= index.req_mask(merged)
                break
        else:
            mask = 0
        detail = "volume topology (zone of the pod's volumes)"
        _step(steps, ReasonKind.VOLUME, detail, mask, start=start)
    need = tuple(o + r for o, r in zip(index.overhead_vec, ctx.vector, strict=True))
    if mask:
        short: Counter[str] = Counter()
        without: Counter[str] = Counter()
        for i in bits(mask):
            for r, name in enumerate(fleet.space.names):
                if index.alloc[i][r] < need[r]:
                    short[name] += 1
                    if index.alloc[i][r] <= 0:
                        without[name] += 1
        mask &= index.fits_mask(need)
        # A resource none of the short types has at all (an extended resource such as
        # vpc.amazonaws.com/pod-eni) is said so: no bigger type of the same kind would help.
        lacking = ", ".join(
            f"{name} (needs {format_quantity(name, need[fleet.space.names.index(name)])},"
            + (
                f" {count} types have none)"
                if without[name] == count
                else f" {count} types too small)"
            )
            for name, count in sorted(short.items())
        )
        overhead = "; needs include daemonset overhead" if any(index.overhead_vec) else ""
        detail = f"insufficient {lacking or 'resources'}{overhead}"
        _step(steps, ReasonKind.RESOURCES, detail, mask, start=start)
    if mask:
        mask &= fleet.limit_mask(index)
        _step(steps, ReasonKind.LIMIT, _limit_detail(fleet, index), mask, start=start)
    if mask:
        probe = NodeClaim(
            index,
            max_types=fleet.max_types,
            name="(new)",
            mask=mask,
            topology=fleet.topology,
            merges=fleet.merges,
        )
        verdict2 = probe.try_add(ctx)
        if isinstance(verdict2, Reject):
            steps.append(FilterStep(verdict2.kind, verdict2.detail, popcount(mask), 0))
        else:
            steps.append(
                FilterStep(
                    ReasonKind.TOPOLOGY,
                    "a new nodeclaim would fit now; the pod waited on pods placed after it",
                    0,
                    popcount(mask),
                )
            )
    return PoolExplanation(index.pool.name, offered, tuple(steps)) if steps else result


def _step(steps: list[FilterStep], kind: ReasonKind, detail: str, mask: int, *, start: int) -> None:
    remaining = popcount(mask)
    before = steps[-1].remaining if steps else start
    removed = max(before - remaining, 0)
    if removed:  # only steps that removed something: after the last type is gone, none does
        steps.append(FilterStep(kind, detail, removed, remaining))


def _keys_detail(keys: Counter[str]) -> str:
    if not keys:
        return "instance type requirements"
    parts = ", ".join(f"{k} ({n})" for k, n in sorted(keys.items()))
    return f"requirements on {parts}"


def _offering_detail(reqs: Requirements) -> str:
    parts = [
        r.describe() for r in reqs if r.key in (wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE)
    ]
    return "no available offering for " + ("; ".join(parts) if parts else "these requirements")


def _cheapest_charge(index: PoolIndex, r: int) -> int:
    """The least a new NodeClaim of the pool would be charged in limited resource `r`."""
    return min((cap[r] for cap in index.cap), default=0)


def _limit_detail(fleet: Fleet, index: PoolIndex) -> str:
    name = index.pool.name
    if index.node_limit is not None and fleet.nodes_in(name) >= index.node_limit:
        return f"nodepool limit nodes={index.node_limit} reached"
    charged = fleet.charged(name)
    parts = []
    for r, resource in enumerate(fleet.space.names):
        if resource in index.limit_names:
            limit = index.pool.limits.get_amount(resource)
            left = max(limit - charged[r], 0)
            if resource == COST:
                parts.append(
                    f"{resource}={limit / 1000:g} (${left / 1000:.3f}/h left, the cheapest"
                    f" launch needs ${_cheapest_charge(index, r) / 1000:.3f}/h)"
                )
                continue
            parts.append(
                f"{resource}={format_quantity(resource, limit)}"
                f" ({format_quantity(resource, left)} left)"
            )
    return "nodepool limits " + ", ".join(parts)


def _message(
    pod: Pod,
    pools: tuple[PoolExplanation, ...],
    existing: tuple[BinSummary, ...],
    claims: tuple[BinSummary, ...],
) -> str:
    parts: list[str] = []
    for pool in pools:
        block = pool.blocking()
        if block is None:
            last = pool.steps[-1] if pool.steps else None
            parts.append(f'nodepool "{pool.nodepool}": {last.detail if last else "fits"}')
        else:
            parts.append(
                f'nodepool "{pool.nodepool}": {block.detail}'
                f" ({block.removed} of {pool.instance_types} instance types removed)"
            )
    if not pools:
        parts.append("no nodepools")
    for label, summary in (("existing nodes", existing), ("new nodeclaims", claims)):
        total = sum(s.count for s in summary)
        if total:
            top = summary[0]
            parts.append(f"{label}: {total} refused (most: {top.detail})")
    return f"pod {pod.key} cannot be placed: " + "; ".join(parts)


def rename(explanation: Explanation, pod: Pod) -> Explanation:
    """The same explanation for an identical pod."""
    message = explanation.message.replace(explanation.pod, pod.key, 1)
    return attrs.evolve(explanation, pod=pod.key, uid=pod.uid, message=message)
