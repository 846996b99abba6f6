"""solve(): which pods go where, on which instance types, at what cost.

Pure: a ``ClusterSnapshot`` and pending pods in, ``Results`` out — no I/O, clock, logging or
randomness, and the same input always gives the same output. The loop follows Karpenter: pods
(grouped into classes of identical pods) are taken largest first; each goes to an existing node,
else an in-flight NodeClaim of this solve, else a new NodeClaim from the first NodePool by weight
that can hold it; a pod that fits nowhere is relaxed one preference and queued again, and the
loop ends when a full pass makes no progress. Each (shape, bin) refusal that can never turn into a
yes is remembered, so a class never rechecks a bin that is full for it.
"""

from __future__ import annotations

from collections import deque

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.pods import Pod, PodUID
from karpy.core.requirements import Requirement
from karpy.core.resources import Resources
from karpy.core.scheduling import explain as explain_mod
from karpy.core.scheduling import preferences
from karpy.core.scheduling.existingnode import ExistingNode, Placement
from karpy.core.scheduling.improve import improve, peel
from karpy.core.scheduling.nodeclaim import MergeCache, NodeClaim, finalize, pool_verdict
from karpy.core.scheduling.pool import PoolIndex, ResourceSpace, build_space
from karpy.core.scheduling.queue import PodClass, ShapeContext, classify
from karpy.core.scheduling.results import (
    Explanation,
    NodeClaimPlan,
    Nomination,
    Reject,
    RelaxedPod,
    Results,
)
from karpy.core.scheduling.topology import HOSTNAME, ShapeTopology, Topology, domain_universe
from karpy.core.snapshot import ClusterSnapshot
from karpy.core.taints import Taint

ALLOW_UNDEFINED = frozenset(wk.WELL_KNOWN_LABELS | wk.AWS_WELL_KNOWN_LABELS)
_EPSILON = 1e-9


@attrs.frozen
class SchedulerOptions:
    """Solver settings.

    ``max_instance_types`` caps each NodeClaim's instance-type options (the AWS launch limit);
    ``min_values_policy`` BestEffort lets a pod that fits nowhere else break minValues (last
    rung of the relaxation ladder), and lets the cut to the maximum do so too;
    ``lookahead`` is how many more bins a pod looks at, after the first that would take it at a
    price, for one that takes it for free (in the slack of its cheapest type);
    ``improve`` runs the cost-lowering pass after the greedy one, trying at most
    ``improve_budget_per_pod`` checks per pending pod (at least 10,000) for each of its two
    steps; a budget fixed by the input keeps the result deterministic.
    """

    max_instance_types: int = 60
    preference_policy: preferences.PreferencePolicy = attrs.field(
        default=preferences.PreferencePolicy.RESPECT, converter=preferences.PreferencePolicy
    )
    min_values_policy: preferences.MinValuesPolicy = attrs.field(
        default=preferences.MinValuesPolicy.STRICT, converter=preferences.MinValuesPolicy
    )
    improve: bool = True
    improve_budget_per_pod: int = 8
    lookahead: int = 8


Bin = ExistingNode | NodeClaim


class Solver:
    """One solve's mutable working state (never shared, never reused)."""

    def __init__(self, snapshot: ClusterSnapshot, pods: list[Pod], options: SchedulerOptions):
        self.snapshot = snapshot
        self.options = options
        self.classes: list[PodClass] = []
        for rep, members in classify(pods):
            state = preferences.start(rep, options.preference_policy)
            self.classes.append(PodClass(rep, members, rep.requests(), state))
        self.space = _space(snapshot, [c.requests for c in self.classes])
        self.pools: list[PoolIndex] = [
            PoolIndex(
                pool,
                snapshot.types_for(pool),
                space=self.space,
                daemonsets=snapshot.daemonsets,
                allow_undefined=ALLOW_UNDEFINED,
            )
            for pool in snapshot.ordered_nodepools()
        ]
        self.topology = Topology(
            universe=domain_universe(snapshot, self.pools), namespaces=snapshot.namespaces
        )
        self.merges = MergeCache()
        # Register every constraint group the pending pods may use, at any relaxation rung.
        for cls in self.classes:
            full = preferences.shape(cls.representative, preferences.Relaxation(), cls.requests)
            self.topology.register(full)
        startup: dict[str, tuple[Taint, ...]] = {
            p.name: p.startup_taints for p in snapshot.nodepools
        }
        self.existing: list[ExistingNode] = []
        nodes = sorted(snapshot.nodes, key=lambda n: (not n.initialized, n.in_flight, n.name))
        for node in nodes:
            for pod in node.pods:
                self.topology.register_existing(pod)
        for node in nodes:
            for pod in node.pods:
                self.topology.seed(pod, node.label_map())
            self.existing.append(
                ExistingNode(
                    node,
                    space=self.space,
                    topology=self.topology,
                    startup_taints=startup.get(node.nodepool or "", ()),
                )
            )
        self.bins: list[Bin] = list(self.existing)
        self.claims: list[NodeClaim] = []
        self.contexts: dict[preferences.Shape, ShapeContext] = {}
        self.pool_nodes: dict[str, int] = {}
        self.pool_charged: dict[str, list[int]] = {}
        for index in self.pools:
            self.pool_nodes[index.pool.name] = 0
            self.pool_charged[index.pool.name] = [0] * len(self.space.names)
        for node in snapshot.nodes:
            if node.nodepool in self.pool_nodes:
                self.pool_nodes[node.nodepool] += 1
                charged = self.pool_charged[node.nodepool]
                for r, amount in enumerate(self.space.vector(node.capacity)):
                    charged[r] += amount
        self.placed_on: dict[str, Bin] = {}
        self.pod_context: dict[str, ShapeContext] = {}
        self.relaxed: dict[PodUID, tuple[str, ...]] = {}
        self.pinned: dict[tuple[preferences.Shape, tuple[tuple[str, str], ...]], ShapeContext] = {}

    # ------------------------------------------------------------------ contexts
    def context(self, cls: PodClass) -> ShapeContext:
        """The cached context of ``cls`` at its current rung."""
        if cls.context is not None and cls.context_state == cls.state:
            return cls.context
        shape = preferences.shape(cls.representative, cls.state, cls.requests)
        ctx = self.contexts.get(shape)
        if ctx is None:
            st = self.topology.for_shape(shape)
            ctx = ShapeContext(
                shape=shape,
                vector=self.space.vector(cls.requests),
                topology=st,
                host_blockers=host_blockers(st),
            )
            self.contexts[shape] = ctx
        cls.context, cls.context_state = ctx, cls.state
        return ctx

    # ------------------------------------------------------------------ placement
    def place_one(self, pod: Pod, ctx: ShapeContext) -> bool:
        """Place ``pod`` on the first bin that takes it for free (an existing node, or a
        NodeClaim whose cheapest type still holds it), looking at most ``lookahead`` bins past
        the first that takes it at a price; else on that first one; else on a new NodeClaim."""
        alive = self.refresh(ctx)
        dead: set[int] | None = None
        chosen: tuple[Bin, Placement] | None = None
        first: tuple[Bin, Placement] | None = None
        lookahead = self.options.lookahead
        for pos, bin_ in enumerate(alive):
            verdict = bin_.try_add(ctx)
            if isinstance(verdict, Placement):
                if isinstance(bin_, ExistingNode) or _free(bin_, verdict):
                    chosen = (bin_, verdict)
                    break
                if first is None:
                    first = (bin_, verdict)
            elif verdict.permanent:
                if dead is None:
                    dead = set()
                dead.add(pos)
            if first is not None:
                lookahead -= 1
                if lookahead < 0:
                    break
        if chosen is None:
            chosen = first
        if dead:
            for pos in sorted(dead, reverse=True):
                del alive[pos]
        if chosen is None:
            chosen = self.new_claim(ctx)
            if chosen is None:
                return False
        bin_, placement = chosen
        bin_.commit(placement, pod, ctx)
        self.placed_on[pod.uid] = bin_
        return True

    def pinned_context(self, ctx: ShapeContext, home: dict[str, str]) -> ShapeContext:
        """``ctx``'s shape pinned to the domains in ``home``, without topology rules.

        For the improvement step: a pod moving to another bin in exactly the domains it leaves
        changes no topology count, so every spread, affinity and anti-affinity rule that held
        still holds; only requirements, taints, ports and room need checking.
        """
        key = (ctx.shape, tuple(sorted(home.items())))
        found = self.pinned.get(key)
        if found is None:
            pins = tuple(Requirement(k, False, frozenset({v})) for k, v in sorted(home.items()))
            shape = attrs.evolve(
                ctx.shape,
                requirements=ctx.shape.requirements.add(*pins),
                spreads=(),
                affinity=(),
                anti_affinity=(),
                required_anti_affinity=0,
            )
            found = ShapeContext(
                shape=shape, vector=ctx.vector, topology=self.topology.for_shape(shape)
            )
            self.pinned[key] = found
        return found

    def refresh(self, ctx: ShapeContext) -> list[Bin]:
        """``ctx``'s candidate bins, with the bins opened since it last looked appended."""
        if ctx.scanned < len(self.bins):
            fresh = self.bins[ctx.scanned :]
            for counts, level in ctx.host_blockers:
                fresh = [b for b in fresh if counts.get(b.hostname, 0) < level]
            ctx.alive.extend(fresh)
            ctx.scanned = len(self.bins)
        return ctx.alive

    def new_claim(self, ctx: ShapeContext) -> tuple[Bin, Placement] | None:
        """Open a NodeClaim from the first NodePool (by weight) that can take the shape."""
        found = self.probe_claim(ctx)
        if found is None:
            return None
        claim, placement = found
        self.open(claim, placement)
        return claim, placement

    def probe_claim(self, ctx: ShapeContext) -> tuple[NodeClaim, Placement] | None:
        """The NodeClaim ``new_claim`` would open for ``ctx``, without opening it."""
        for index in self.pools:
            if not index.types or pool_verdict(index, ctx) is not None:
                continue
            mask = self.limit_mask(index)
            if not mask:
                continue
            claim = NodeClaim(
                index,
                max_types=self.options.max_instance_types,
                name=f"{index.pool.name}-{len(self.claims) + 1:05d}",
                mask=mask,
                topology=self.topology,
                merges=self.merges,
            )
            verdict = claim.try_add(ctx)
            if isinstance(verdict, Placement):
                return claim, verdict
        return None

    def limit_mask(self, index: PoolIndex) -> int:
        """Types a new NodeClaim of ``index`` may use without breaking the pool's limits."""
        name = index.pool.name
        if index.node_limit is not None and self.pool_nodes[name] >= index.node_limit:
            return 0
        if index.limit_vec is None:
            return index.full
        charged = self.pool_charged[name]
        remaining = tuple(
            limit - used for limit, used in zip(index.limit_vec, charged, strict=True)
        )
        return index.within_mask(remaining)

    def open(self, claim: NodeClaim, placement: Placement) -> None:
        """Count a new NodeClaim against its pool, about to take its first pod (``placement``).

        Resource limits are charged the largest capacity among the instance types that pod
        leaves it (Karpenter subtracts the largest of the narrowed options), and the charge then
        follows the NodeClaim as later pods narrow it (``NodeClaim.track_limits``).
        """
        self.claims.append(claim)
        self.bins.append(claim)
        name = claim.index.pool.name
        self.pool_nodes[name] += 1
        if claim.index.limit_vec is not None:
            claim.track_limits(self.pool_charged[name], placement.mask)

    @property
    def improve_budget(self) -> int:
        """Checks each improvement step may spend."""
        pods = sum(len(c.pods) for c in self.claims) + sum(len(n.pods) for n in self.existing)
        return max(10_000, self.options.improve_budget_per_pod * pods)

    def retire(self, claim: NodeClaim) -> None:
        """Drop an emptied NodeClaim (its pods moved elsewhere) and refund its pool."""
        claim.pods.clear()
        self.pool_nodes[claim.index.pool.name] -= 1
        claim.release()

    def run(self) -> None:
        """Interleaved first pass, then the queue loop for whatever failed."""
        self.first_pass()
        self.retry_loop()

    def first_pass(self) -> None:
        """Place pods class by class, interleaved in proportion to class size.

        Classes keep Karpenter's order (largest first) within every round, but each round takes
        a slice of every class, so each NodeClaim fills with a sample of the whole mix: its
        CPU-to-memory balance then follows the mix instead of one class, which is what keeps the
        cost near the lower bound. A class that fails stops taking part and goes to the retry
        loop with its remaining pods.
        """
        order: list[tuple[float, int]] = []
        for ci, cls in enumerate(self.classes):
            n = len(cls.pods)
            order.extend(((k + 0.5) / n, ci) for k in range(n))
        order.sort()
        taken = [0] * len(self.classes)
        failed = [False] * len(self.classes)
        for _, ci in order:
            if failed[ci]:
                continue
            cls = self.classes[ci]
            pod = cls.pods[taken[ci]]
            ctx = self.context(cls)
            if self.place_one(pod, ctx):
                self.pod_context[pod.uid] = ctx
                taken[ci] += 1
            else:
                failed[ci] = True
        for ci, cls in enumerate(self.classes):
            del cls.pods[: taken[ci]]
            if cls.pods:
                self.relax(cls)

    def relax(self, cls: PodClass) -> bool:
        """Move ``cls`` one rung down the ladder; False when nothing is left to relax."""
        relaxed = preferences.relax(
            cls.representative, cls.state, min_values=self.options.min_values_policy
        )
        if relaxed is None:
            return False
        cls.relaxations.append(preferences.describe_step(cls.state, relaxed))
        cls.state = relaxed
        return True

    def retry_loop(self) -> None:
        """The queue loop: place classes, relax on failure, stop after a pass with no progress."""
        queue: deque[PodClass] = deque(c for c in self.classes if c.pods)
        stalled = 0
        while queue and stalled <= len(queue):
            cls = queue.popleft()
            ctx = self.context(cls)
            placed = 0
            for pod in cls.pods:
                if not self.place_one(pod, ctx):
                    break
                self.pod_context[pod.uid] = ctx
                if cls.relaxations:
                    self.relaxed[pod.uid] = tuple(cls.relaxations)
                placed += 1
            del cls.pods[:placed]
            if not cls.pods:
                stalled = 0
                continue
            relaxed = self.relax(cls)
            stalled = 0 if placed or relaxed else stalled + 1
            queue.append(cls)

    # ------------------------------------------------------------------ output
    def results(self, greedy_price: float) -> Results:
        """Freeze the working state into ``Results``."""
        plans: list[NodeClaimPlan] = []
        failed: list[tuple[Pod, NodeClaim, Reject]] = []
        for claim in self.claims:
            if not claim.pods:
                continue
            plan = finalize(
                claim,
                self.options.max_instance_types,
                self.space,
                best_effort=self.options.min_values_policy
                is preferences.MinValuesPolicy.BEST_EFFORT,
            )
            if isinstance(plan, Reject):
                failed.extend((pod, claim, plan) for pod in claim.pods)
            else:
                plans.append(plan)
        nominations = tuple(
            Nomination(pod.uid, node.name)
            for node in self.existing
            for pod in sorted(node.pods, key=lambda p: (p.creation, p.uid))
        )
        unplaced: list[Explanation] = []
        for cls in self.classes:
            if not cls.pods:
                continue
            ctx = self.context(cls)
            first = explain_mod.explain(self, cls.pods[0], ctx, tuple(cls.relaxations))
            unplaced.append(first)
            # Identical pods share the explanation; only the names differ.
            unplaced.extend(explain_mod.rename(first, pod) for pod in cls.pods[1:])
        for pod, claim, reject in failed:
            steps = self.relaxed.get(pod.uid, ())
            unplaced.append(explain_mod.finalize_failure(pod, claim, reject, steps))
        unplaced.sort(key=lambda e: (e.pod, e.uid))
        failed_uids = {pod.uid for pod, _, _ in failed}
        relaxed = tuple(
            RelaxedPod(uid, steps)
            for uid, steps in sorted(self.relaxed.items())
            if uid not in failed_uids
        )
        return Results(tuple(plans), nominations, tuple(unplaced), greedy_price, relaxed)


def _free(claim: NodeClaim, placement: Placement) -> bool:
    """Does adding the pod leave the NodeClaim's price unchanged (it fits in the slack)?"""
    index = claim.index
    after = index.cheapest_price(placement.mask, placement.requirements)
    return after <= claim.price() + _EPSILON


def host_blockers(st: ShapeTopology) -> tuple[tuple[dict[str, int], int], ...]:
    """Hostname counts that, once at the level given, close a bin to a shape for good."""
    out: list[tuple[dict[str, int], int]] = []
    for rule in st.rules:
        grp = rule.group
        if grp.id.key != HOSTNAME:
            continue
        if rule.role == "anti-affinity":
            out.append((grp.counts, 1))
        elif rule.role == "inverse-anti-affinity":
            out.append((grp.owners, 1))
        elif rule.role == "spread":
            out.append((grp.counts, grp.id.max_skew))
    return tuple(out)


def _space(snapshot: ClusterSnapshot, requests: list[Resources]) -> ResourceSpace:
    names: set[str] = set()
    for request in requests:
        names.update(request)
    for types in snapshot.instance_types.values():
        for it in types:
            names.update(it.capacity)
    for pool in snapshot.nodepools:
        names.update(n for n in pool.limits if n != "nodes")
    for ds in snapshot.daemonsets:
        names.update(ds.pod.requests())
    return build_space(sorted(names))


def solve(
    snapshot: ClusterSnapshot, pods: list[Pod], options: SchedulerOptions | None = None
) -> Results:
    """Plan where ``pods`` go. Pure and deterministic."""
    opts = options or SchedulerOptions()
    solver = Solver(snapshot, pods, opts)
    solver.run()
    greedy = sum(c.price() for c in solver.claims if c.pods)
    if opts.improve:
        improve(solver)
        peel(solver)
    return solver.results(greedy)
