"""After the greedy pass: lower the plan's price without breaking any constraint.

Pure and deterministic. Two steps, both moving pods only through the bins' own ``try_add``
checks, so no constraint can break, and both bounded by a fixed budget of checks:

* ``dissolve`` dissolves NodeClaims whose pods all fit elsewhere (existing nodes, other
  NodeClaims), emptiest first, keeping a move only when the total price drops and otherwise
  restoring every touched bin exactly;
* ``peel`` takes single pods off NodeClaims they tipped onto a bigger instance type and puts them
  where they cost less than the saving.

Dissolving moves only "simple" pods (no topology count, no host port), which makes every undo
exact; peeling also moves pods with zonal (non-hostname) topology, but only into the same
domains, so no count changes.

Both work on the solve's ``Fleet`` (its bins, and the NodePool accounting that opening and
retiring NodeClaims keeps) and read, per placed pod, the ``ShapeContext`` it was placed with.
"""

from __future__ import annotations

from collections.abc import Mapping

from karpy.core.pods import Pod
from karpy.core.scheduling.existingnode import ExistingNode, Placement, SavedState
from karpy.core.scheduling.fleet import Fleet
from karpy.core.scheduling.nodeclaim import NodeClaim
from karpy.core.scheduling.pool import Vector
from karpy.core.scheduling.queue import ShapeContext

Contexts = Mapping[str, ShapeContext]
"""Per placed pod's uid, the context it was placed with."""

_EPSILON = 1e-6  # prices are quoted to six decimals; smaller "gains" are rounding
# NodeClaims fully checked as a new home for one peeled pod at a price, and NodeClaims cheaply
# scanned for room in their cheapest type (a free home).
PEEL_TARGETS = 16
PEEL_SCAN = 512
# Most pods of one shape moved together to drop a NodeClaim to a cheaper type.
PEEL_BATCH = 8


def dissolve(fleet: Fleet, contexts: Contexts, budget: int) -> int:
    """Dissolve NodeClaims where that lowers the total price, spending at most ``budget``
    checks; returns how many were removed."""
    removed = 0
    order = sorted(
        (c for c in fleet.claims if c.pods), key=lambda c: (len(c.pods), c.price(), c.name)
    )
    for source in order:
        if budget <= 0:
            break
        found = [contexts[p.uid] for p in source.pods if p.uid in contexts]
        if len(found) != len(source.pods) or not all(ctx.simple for ctx in found):
            continue
        old_price = source.price()
        touched: dict[int, tuple[ExistingNode | NodeClaim, SavedState, float]] = {}
        # A bin without room for the smallest of the source's pods in every resource takes none
        # of them while they move (bins only fill up meanwhile): leave it out of the scan
        # instead of refusing every pod there (full NodeClaims were most of the step's checks;
        # the budget below is still charged for them).
        floor = (
            tuple(map(min, *(ctx.vector for ctx in found))) if len(found) > 1 else found[0].vector
        )
        candidates = [b for b in fleet.bins if b is not source and (b.pods or b.kind == "node")]
        targets = [(pos, b) for pos, b in enumerate(candidates) if _has_room(b, floor)]
        moved = True
        for pod, ctx in zip(source.pods, found, strict=True):
            for pos, target in targets:
                verdict = target.try_add(ctx)
                if isinstance(verdict, Placement):
                    # The budget is spent as if every bin before it had been checked, so the
                    # step tries the same sources and ends on the same plan as a full scan.
                    budget -= pos + 1
                    if id(target) not in touched:
                        price = target.price() if isinstance(target, NodeClaim) else 0.0
                        touched[id(target)] = (target, target.save(), price)
                    target.commit(verdict, pod, ctx)
                    break
            else:
                budget -= len(candidates)
                moved = False
                break
            if budget <= 0:
                moved = False
                break
        before = old_price + sum(p for _, _, p in touched.values())
        after = sum(t.price() for t, _, _ in touched.values() if isinstance(t, NodeClaim))
        if moved and after < before - _EPSILON:
            fleet.retire(source)
            removed += 1
            continue
        for target, saved, _ in touched.values():
            target.restore(saved)
    return removed


def _has_room(bin_: ExistingNode | NodeClaim, vector: Vector) -> bool:
    """Could ``bin_`` still take ``vector`` more on room alone (growing onto a larger type, for a
    NodeClaim)?"""
    if isinstance(bin_, ExistingNode):
        return not bin_.too_full(vector)
    need = tuple(u + v for u, v in zip(bin_.used, vector, strict=True))
    return bool(bin_.mask & bin_.index.fits_mask(need))


def peel(fleet: Fleet, contexts: Contexts, budget: int) -> int:
    """Move pods off NodeClaims they tipped onto a bigger, pricier instance type.

    Greedy NodeClaims grow one pod at a time, so the last few pods often push a NodeClaim past a
    type boundary. For each NodeClaim (most expensive first) and each movable shape on it (no
    host ports, no hostname topology), this finds the fewest pods of that shape (up to
    ``PEEL_BATCH``) whose departure drops the NodeClaim to a cheaper type, and moves them where
    they cost less in total than that saving — NodeClaims with room in their cheapest type
    first, else other NodeClaims, else a new NodeClaim chosen as the solver would (NodePool
    weight first). Pods with zonal topology only move within the domains they leave, so no count
    changes. A batch that does not pay is undone exactly. Spends at most ``budget`` checks;
    returns the number of pods moved.
    """
    moved = 0
    for claim in sorted(fleet.claims, key=lambda c: (-c.price(), c.name)):
        progress = True
        while progress and budget > 0 and claim.pods:
            progress = False
            for ctx, pods in _movable_groups(contexts, claim):
                found = {k: claim.requirements.single_value(k) for k in ctx.topology.keys}
                home = {k: v for k, v in found.items() if v is not None}
                budget -= 1
                if len(home) != len(found) or budget <= 0:
                    continue
                batch = _batch_to_shed(claim, ctx, len(pods))
                if batch is None:
                    continue
                count, gain = batch
                ok, spent = _move(fleet, claim, ctx, home, pods[:count], gain)
                budget -= spent
                if ok:
                    moved += count
                    progress = True
                    break
    return moved


def _movable_groups(contexts: Contexts, claim: NodeClaim) -> list[tuple[ShapeContext, list[Pod]]]:
    """The claim's movable pods grouped by shape, newest first (deterministic order)."""
    groups: dict[int, tuple[ShapeContext, list[Pod]]] = {}
    for pod in reversed(claim.pods):
        ctx = contexts.get(pod.uid)
        if ctx is None or not ctx.movable:
            continue
        groups.setdefault(id(ctx), (ctx, []))[1].append(pod)
    return list(groups.values())


def _batch_to_shed(claim: NodeClaim, ctx: ShapeContext, available: int) -> tuple[int, float] | None:
    """The fewest pods of ``ctx`` whose departure makes ``claim`` cheaper, and the saving."""
    before = claim.price()
    used = claim.used
    for count in range(1, min(available, PEEL_BATCH) + 1):
        used = tuple(u - v for u, v in zip(used, ctx.vector, strict=True))
        mask = claim.mask_for(used)
        if not mask:
            return None
        gain = before - claim.index.cheapest_price(mask, claim.requirements)
        if gain > _EPSILON:
            return count, gain
    return None


def _move(
    fleet: Fleet,
    source: NodeClaim,
    ctx: ShapeContext,
    home: dict[str, str],
    pods: list[Pod],
    gain: float,
) -> tuple[bool, int]:
    """Move ``pods`` off ``source``; keep the moves only if they cost less than ``gain``."""
    source_state = source.save()
    source_pods = list(source.pods)  # pods leave from the middle; save() only undoes appends
    saved: dict[int, tuple[NodeClaim, SavedState]] = {}
    opened: list[NodeClaim] = []
    done = 0
    spent = 0
    total = 0.0
    for pod in pods:
        # Each moving pod leaves its domains' counts and re-enters the same ones at its new
        # home, so counts end where they started (and need no undo).
        fleet.topology.record(ctx.topology, hostname=source.hostname, domains=home, weight=-1)
        used, mask = source.without(pod, ctx)
        source.remove(pod, used, mask)
        best, cost = _best_home(fleet, source, ctx, home)
        spent += cost
        if best is None:
            fleet.topology.record(ctx.topology, hostname=source.hostname, domains=home)
            break
        delta, target, placement, is_new = best
        if is_new:
            fleet.open(target, placement)
            ctx.alive.append(target)
            opened.append(target)
        elif id(target) not in saved:
            saved[id(target)] = (target, target.save())
        placement.domains = dict(home)
        target.commit(placement, pod, ctx)
        total += delta
        done += 1
    if done == len(pods) and total < gain - _EPSILON:
        return True, spent
    for target, state in saved.values():
        target.restore(state)
    for target in opened:
        fleet.retire(target)
    source.restore(source_state)
    source.pods[:] = source_pods
    return False, spent


def _best_home(
    fleet: Fleet, source: NodeClaim, ctx: ShapeContext, home: dict[str, str]
) -> tuple[tuple[float, NodeClaim, Placement, bool] | None, int]:
    """Where one peeled pod would cost least, in exactly the domains it leaves: a NodeClaim with
    room in its cheapest type (found by a cheap scan of up to ``PEEL_SCAN`` candidates), else
    one of the first ``PEEL_TARGETS`` that take it at a price, else a new NodeClaim. Returns
    (delta price, target, placement, is new) and the budget spent."""
    check = fleet.pinned_context(ctx, home) if home else ctx
    best: tuple[float, NodeClaim, Placement, bool] | None = None
    tried = scanned = 0
    for target in fleet.refresh(ctx):
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
        probe = fleet.probe_claim(check)
        if probe is not None and _same_domains(probe[1], home):
            fresh, placement = probe
            delta = fresh.index.cheapest_price(placement.mask, placement.requirements)
            if best is None or delta < best[0]:
                best = (delta, fresh, placement, True)
    return best, tried + scanned // 8 + 1


def _same_domains(placement: Placement, home: dict[str, str]) -> bool:
    """Would the pod land in exactly the domains it leaves?"""
    return all(placement.requirements.single_value(k) == v for k, v in home.items())
