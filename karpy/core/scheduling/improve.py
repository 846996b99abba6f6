"""After the greedy pass: lower the plan's price without breaking any constraint.

Pure and deterministic. Two steps, both moving pods only through the solver's own ``try_add``
checks, so no constraint can break, and both bounded by a fixed budget of checks:

* ``improve`` dissolves NodeClaims whose pods all fit elsewhere (existing nodes, other
  NodeClaims), emptiest first, keeping a move only when the total price drops and otherwise
  restoring every touched bin exactly;
* ``peel`` takes single pods off NodeClaims they tipped onto a bigger instance type and puts them
  where they cost less than the saving.

Only "simple" pods move — pods whose placement touches no topology count and binds no host
port — which is what makes every undo exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from karpy.core.scheduling.existingnode import ExistingNode, Placement, SavedState
from karpy.core.scheduling.nodeclaim import NodeClaim

if TYPE_CHECKING:
    from karpy.core.scheduling.scheduler import Solver

_EPSILON = 1e-9
# NodeClaims tried as a new home for one peeled pod (the first ones that may still admit it).
PEEL_TARGETS = 16


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
    pricier type. For each NodeClaim (most expensive first) and each simple shape on it, this
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
                if ctx is None or not ctx.simple or id(ctx) in seen:
                    continue
                seen.add(id(ctx))
                budget -= 1
                if budget <= 0:
                    break
                before = claim.price()
                used, mask = claim.without(pod, ctx)
                gain = before - claim.index.cheapest_price(mask, claim.requirements)
                if gain <= _EPSILON:
                    continue
                best: tuple[float, NodeClaim, Placement, bool] | None = None
                tried = 0
                for target in ctx.alive:
                    if target is claim or not isinstance(target, NodeClaim) or not target.pods:
                        continue
                    tried += 1
                    if tried > PEEL_TARGETS:
                        break
                    budget -= 1
                    verdict = target.try_add(ctx)
                    if isinstance(verdict, Placement):
                        delta = target.index.cheapest_price(verdict.mask, verdict.requirements)
                        delta -= target.price()
                        if best is None or delta < best[0]:
                            best = (delta, target, verdict, False)
                probe = solver.probe_claim(ctx)
                if probe is not None:
                    fresh, placement = probe
                    delta = fresh.index.cheapest_price(placement.mask, placement.requirements)
                    if best is None or delta < best[0]:
                        best = (delta, fresh, placement, True)
                if best is None or best[0] >= gain - _EPSILON:
                    continue
                _, target, placement, is_new = best
                claim.remove(pod, used, mask)
                if is_new:
                    solver.open(target, target.index)
                    ctx.alive.append(target)
                target.commit(placement, pod, ctx)
                solver.placed_on[pod.uid] = target
                moved += 1
                progress = True
                break
    return moved
