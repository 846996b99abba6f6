"""After the greedy pass: lower the plan's price without breaking any constraint.

Pure and deterministic. Two steps, both moving pods only through the solver's own ``try_add``
checks, so no constraint can break, and both bounded by a fixed budget of checks:

* ``improve`` dissolves NodeClaims whose pods all fit elsewhere (existing nodes, other
  NodeClaims), emptiest first, keeping a move only when the total price drops and otherwise
  restoring every touched bin exactly;
* ``peel`` takes single pods off NodeClaims they tipped onto a bigger instance type and puts them
  where they cost less than the saving.

Dissolving moves only "simple" pods (no topology count, no host port), which makes every undo
exact; peeling also moves pods with zonal (non-hostname) topology, but only into the same
domains, so no count changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from karpy.core.scheduling.existingnode import ExistingNode, Placement, SavedState
from karpy.core.scheduling.nodeclaim import NodeClaim
from karpy.core.scheduling.queue import ShapeContext

if TYPE_CHECKING:
    from karpy.core.scheduling.scheduler import Solver

_EPSILON = 1e-6  # prices are quoted to six decimals; smaller "gains" are rounding
# NodeClaims fully checked as a new home for one peeled pod at a price, and NodeClaims cheaply
# scanned for room in their cheapest type (a free home).
PEEL_TARGETS = 16
PEEL_SCAN = 1024


def improve(solver: Solver) -> int:
    """Dissolve NodeClaims where that lowers the total price; returns how many were removed."""
    budget = solver.options.improve_budget
    removed = 0
    order = sorted(
        (c for c in solver.claims if c.pods), key=lambda c: (len(c.pods), c.price(), c.name)
    )
    for source in order:
        if budget <= 0:
            break
        contexts = [solver.pod_context[p.uid] for p in source.pods if p.uid in solver.pod_context]
        if len(contexts) != len(source.pods) or not all(ctx.simple for ctx in contexts):
            continue
        old_price = source.price()
        touched: dict[int, tuple[ExistingNode | NodeClaim, SavedState, float]] = {}
        targets = [b for b in solver.bins if b is not source and (b.pods or b.kind == "node")]
        moved = True
        for pod, ctx in zip(source.pods, contexts, strict=True):
            for target in targets:
                budget -= 1
                verdict = target.try_add(ctx)
                if isinstance(verdict, Placement):
                    if id(target) not in touched:
                        price = target.price() if isinstance(target, NodeClaim) else 0.0
                        touched[id(target)] = (target, target.save(), price)
                    target.commit(verdict, pod, ctx)
                    break
            else:
                moved = False
                break
            if budget <= 0:
                moved = False
                break
        before = old_price + sum(p for _, _, p in touched.values())
        after = sum(t.price() for t, _, _ in touched.values() if isinstance(t, NodeClaim))
        if moved and after < before - _EPSILON:
            for pod in source.pods:
                owner = next(t for t, _, _ in touched.values() if pod in t.pods)
                solver.placed_on[pod.uid] = owner
            solver.retire(source)
            removed += 1
            continue
        for target, saved, _ in touched.values():
            target.restore(saved)
    return removed


def peel(solver: Solver) -> int:
    """Move single pods off NodeClaims that they push past a cheaper instance type.

    Greedy NodeClaims grow one pod at a time, so one pod often tips a NodeClaim onto a bigger,
    pricier type. For each NodeClaim (most expensive first) and each movable shape on it (no
    host ports, no hostname topology; a pod with zonal topology only moves to a NodeClaim in
    the same domains, so no count changes), this
    prices the NodeClaim without one such pod, and moves the pod where it costs less than that
    saving: onto another NodeClaim that still admits the shape, or onto a new NodeClaim chosen as
    the solver would choose it (NodePool weight first). At most ``PEEL_TARGETS`` NodeClaims are
    tried per pod, and the solver's improvement budget caps the whole pass. Returns the number of
    pods moved.
    """
    budget = solver.options.improve_budget
    moved = 0
    for claim in sorted(solver.claims, key=lambda c: (-c.price(), c.name)):
        progress = True
        while progress and budget > 0 and claim.pods:
            progress = False
            seen: set[int] = set()
            for pod in reversed(claim.pods):
                ctx = solver.pod_context.get(pod.uid)
                if ctx is None or not ctx.movable or id(ctx) in seen:
                    continue
                seen.add(id(ctx))
                found = {k: claim.requirements.single_value(k) for k in ctx.topology.keys}
                home = {k: v for k, v in found.items() if v is not None}
                if len(home) != len(found):
                    continue
                budget -= 1
                if budget <= 0:
                    break
                before = claim.price()
                used, mask = claim.without(pod, ctx)
                gain = before - claim.index.cheapest_price(mask, claim.requirements)
                if gain <= _EPSILON:
                    continue
                # Take the pod out of the counts while looking, so it does not crowd itself out
                # of its own domain; it goes back in (here or at its new home) either way.
                solver.topology.record(
                    ctx.topology, hostname=claim.hostname, domains=home, weight=-1
                )
                best, spent = _best_home(solver, claim, ctx, home)
                budget -= spent
                if best is None or best[0] >= gain - _EPSILON:
                    solver.topology.record(ctx.topology, hostname=claim.hostname, domains=home)
                    continue
                _, target, placement, is_new = best
                claim.remove(pod, used, mask)
                if is_new:
                    solver.open(target, target.index)
                    ctx.alive.append(target)
                placement.domains = dict(home)
                target.commit(placement, pod, ctx)
                solver.placed_on[pod.uid] = target
                moved += 1
                progress = True
                break
    return moved


def _best_home(
    solver: Solver, source: NodeClaim, ctx: ShapeContext, home: dict[str, str]
) -> tuple[tuple[float, NodeClaim, Placement, bool] | None, int]:
    """Where one peeled pod would cost least, in exactly the domains it leaves: a NodeClaim with
    room in its cheapest type (found by a cheap scan of up to ``PEEL_SCAN`` candidates), else
    one of the first ``PEEL_TARGETS`` that take it at a price, else a new NodeClaim. Returns
    (delta price, target, placement, is new) and the budget spent."""
    check = solver.pinned_context(ctx, home) if home else ctx
    best: tuple[float, NodeClaim, Placement, bool] | None = None
    tried = scanned = 0
    for target in solver.refresh(ctx):
        if target is source or not isinstance(target, NodeClaim) or not target.pods:
            continue
        scanned += 1
        if scanned > PEEL_SCAN:
            break
        if tried >= PEEL_TARGETS and not target.room_for(ctx.vector):
            continue
        tried += 1
        verdict = target.try_add(check)
        if isinstance(verdict, Placement) and _same_domains(verdict, home):
            delta = target.index.cheapest_price(verdict.mask, verdict.requirements)
            delta -= target.price()
            if best is None or delta < best[0]:
                best = (delta, target, verdict, False)
            if delta <= _EPSILON:
                break  # a free home: nothing can beat it
    if best is None or best[0] > _EPSILON:
        probe = solver.probe_claim(check)
        if probe is not None and _same_domains(probe[1], home):
            fresh, placement = probe
            delta = fresh.index.cheapest_price(placement.mask, placement.requirements)
            if best is None or delta < best[0]:
                best = (delta, fresh, placement, True)
    return best, tried + scanned // 16 + 1


def _same_domains(placement: Placement, home: dict[str, str]) -> bool:
    """Would the pod land in exactly the domains it leaves?"""
    return all(placement.requirements.single_value(k) == v for k, v in home.items())
