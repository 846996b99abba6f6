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

import enum
from collections import deque

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.pods import Pod, PodUID
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import CPU, MEMORY, Resources
from karpy.core.scheduling import explain as explain_mod
from karpy.core.scheduling import preferences
from karpy.core.scheduling import repack as repack_mod
from karpy.core.scheduling.existingnode import ExistingNode, Placement
from karpy.core.scheduling.improve import improve, peel
from karpy.core.scheduling.lp import covering_lp
from karpy.core.scheduling.nodeclaim import MergeCache, NodeClaim, finalize, pool_verdict
from karpy.core.scheduling.pool import PoolIndex, ResourceSpace, build_space
from karpy.core.scheduling.queue import PodClass, ShapeContext, classify
from karpy.core.scheduling.results import (
    Explanation,
    NodeClaimPlan,
    Nomination,
    ReasonKind,
    Reject,
    RelaxedPod,
    Results,
)
from karpy.core.scheduling.topology import (
    HOSTNAME,
    DomainSource,
    ShapeTopology,
    Topology,
    domain_universe,
)
from karpy.core.snapshot import ClusterSnapshot
from karpy.core.taints import Taint

# How much more than the LP's unit prices say a type is worth for a NodeClaim's mix of pods it
# may charge before the claim stops growing onto it (see ``Solver.efficient``).
EFFICIENCY_SLACK = 0.2
# How close to a type the LP buys a larger type must be for a claim to grow towards it through
# a poorly fitting cheaper one (``Solver.efficient``).
REACH_SLACK = 0.02
ALLOW_UNDEFINED = frozenset(wk.WELL_KNOWN_LABELS)
_EPSILON = 1e-9


@attrs.frozen
class Variant:
    """One way of running the greedy pass: ``ordered`` runs the first pass in an interleaved
    order (else Karpenter's queue alone), ``balanced`` makes that order balance memory against
    CPU (``balanced_order``, else ``interleaved_order``), ``steer`` keeps NodeClaims on the
    types the LP buys (``Solver.efficient``)."""

    ordered: bool
    balanced: bool
    steer: bool


class Packing(enum.StrEnum):
    """How the first pass orders pods and chooses bins.

    ``balanced`` (default) orders pods so every NodeClaim fills in the batch's memory:CPU shape
    (``balanced_order``), lets a NodeClaim grow only onto types the LP would buy for its pods
    (``Solver.efficient``), prefers free fits and ends with the improvement step;
    ``karpenter`` is Karpenter's own algorithm — CPU then memory descending, first fit, no
    improvement — kept as the baseline to compare against (docs/scheduling.md, *Packing*).
    """

    BALANCED = "balanced"
    KARPENTER = "karpenter"


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
    steps; a budget fixed by the input keeps the result deterministic;
    ``provider_labels`` are the cloud provider's well-known labels (karpy.cloudprovider's
    ``CloudProvider.well_known_labels``): like karpy's own, a pod may require one that its
    NodePool does not mention, and the instance types decide.
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
    packing: Packing = attrs.field(default=Packing.BALANCED, converter=Packing)
    provider_labels: frozenset[str] = frozenset()


Bin = ExistingNode | NodeClaim


class Solver:
    """One solve's mutable working state (never shared, never reused)."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        pods: list[Pod],
        options: SchedulerOptions,
        variant: Variant | None = None,
        base: Solver | None = None,
    ):
        """``base``: a solver over the same NodePools and instance types (limits may differ)
        whose resource space, indexes and domains this one reuses — a repack window."""
        self.snapshot = snapshot
        self.options = options
        karpenter = options.packing is Packing.KARPENTER
        self.variant = variant or Variant(ordered=not karpenter, balanced=False, steer=False)
        self.lookahead = 0 if karpenter else options.lookahead
        self.classes: list[PodClass] = []
        for rep, members in classify(pods):
            state = preferences.start(rep, options.preference_policy)
            self.classes.append(PodClass(rep, members, rep.requests(), state))
        if base is None:
            self.space = _space(snapshot, [c.requests for c in self.classes])
            self.pools: list[PoolIndex] = [
                PoolIndex(
                    pool,
                    snapshot.types_for(pool),
                    space=self.space,
                    daemonsets=snapshot.daemonsets,
                    allow_undefined=ALLOW_UNDEFINED | options.provider_labels,
                )
                for pool in snapshot.ordered_nodepools()
            ]
        else:
            self.space = base.space
            indexes = {index.pool.name: index for index in base.pools}
            self.pools = [indexes[p.name].with_limits(p) for p in snapshot.ordered_nodepools()]
        self.weights: dict[str, list[list[float]]] = {}
        if self.variant.steer:
            self.weights = unit_weights(self.pools, self.classes)
        self.universe: dict[str, tuple[DomainSource, ...]] = (
            base.universe if base else domain_universe(snapshot, self.pools)
        )
        self.topology = Topology(universe=self.universe, namespaces=snapshot.namespaces)
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
            node_labels = node.labels_dict
            for pod in node.pods:
                self.topology.seed(pod, node_labels)
            self.existing.append(
                ExistingNode(
                    node,
                    space=self.space,
                    topology=self.topology,
                    startup_taints=startup.get(node.nodepool or "", ()),
                )
            )
        self.bins: list[Bin] = list(self.existing)
        self.prefer_no_schedule = snapshot.prefer_no_schedule()
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
        self.reach: dict[tuple[int, int], bool] = {}

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
        lookahead = self.lookahead
        steer = bool(self.weights)
        vector = ctx.vector
        for pos, bin_ in enumerate(alive):
            if isinstance(bin_, ExistingNode) and bin_.too_full(vector):
                # Too full for this shape: try_add would refuse it for good, after its other
                # checks; over thousands of nodes those checks are most of a solve's time.
                verdict: Placement | Reject = _TOO_FULL
            else:
                verdict = bin_.try_add(ctx)
            if isinstance(verdict, Placement):
                if isinstance(bin_, ExistingNode) or _free(bin_, verdict):
                    chosen = (bin_, verdict)
                    break
                if not steer or self.efficient(bin_, verdict):
                    if first is None:
                        first = (bin_, verdict)
                else:
                    # The claim only grows, so it will not become efficient for this shape.
                    if dead is None:
                        dead = set()
                    dead.add(pos)
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

    def efficient(self, claim: NodeClaim, placement: Placement) -> bool:
        """May ``claim`` take a pod at a price (onto the type ``placement`` leaves cheapest)?

        The LP's unit prices (``unit_weights``) give the claim's pods a worth, and every type a
        *shape ratio* for them: its price over the worth of the largest scaled copy of those
        pods it holds (``shape_ratio``; 1 is a type the LP would buy for that mix). The claim
        may move onto the new type when its ratio is at most 1 + ``EFFICIENCY_SLACK`` or no
        worse than the ratio of the type it is on now. The slack absorbs how spot prices differ
        between sizes of one family; a dearer family is further off: a CPU-shaped claim does not
        grow onto a memory-optimised type when its compute-optimised one runs out of memory,
        nor onto amd64 because arm64 has no type that large. The pod opens a new NodeClaim
        instead, which can land on a cheap type again.
        """
        weights = self.weights.get(claim.index.pool.name)
        if weights is None:
            return True
        index = claim.index
        base = index.overhead_vec
        content = [u - o for u, o in zip(placement.used, base, strict=True)]
        worth = _worth(weights, content)
        if worth <= 0:
            return True
        after = index.cheapest_index(placement.mask, placement.requirements)
        if after is None:
            return True
        ratio = self.shape_ratio(index, after, placement.requirements, content, worth)
        if ratio <= 1 + EFFICIENCY_SLACK:
            return True
        now = index.cheapest_index(claim.mask, claim.requirements)
        if now is None:
            return True
        if ratio <= self.shape_ratio(index, now, claim.requirements, content, worth):
            return True
        # The cheapest type that holds the pods now may be a poor fit while a larger one the
        # LP would buy still holds them (a CPU-shaped claim past the largest general-purpose
        # size, on its way to the compute-optimised one twice as large): grow towards it.
        # Only frontier types can score best (``PoolIndex.frontier``).
        # Answers are kept per claim and type set: a claim's mask changes only when it grows,
        # and its shape barely moves with one more pod.
        key = (id(claim), placement.mask)
        found = self.reach.get(key)
        if found is None:
            limit = 1 + REACH_SLACK
            reqs = placement.requirements
            found = any(
                placement.mask >> i & 1
                and self.shape_ratio(index, i, reqs, content, worth) <= limit
                for i in index.frontier()
            )
            self.reach[key] = found
        return found

    @staticmethod
    def shape_ratio(
        index: PoolIndex, i: int, reqs: Requirements, content: list[int], worth: float
    ) -> float:
        """Type ``i``'s price over what it is worth for pods shaped like ``content``: the
        largest scaled copy of ``content`` it holds, at the LP's prices (``worth`` is
        ``content``'s). 1 is a type the LP would buy for that mix; a memory-optimised type
        holding a CPU-shaped mix scores its whole idle memory against it."""
        base = index.overhead_vec
        copies = min(
            ((a - o) / c for a, o, c in zip(index.alloc[i], base, content, strict=True) if c > 0),
            default=0.0,
        )
        if copies <= 0:
            return float("inf")
        return index.cheapest_price(1 << i, reqs) / (copies * worth)

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
        """Interleaved first pass, then the queue loop for whatever failed (Karpenter's
        baseline: the queue loop alone, first fit)."""
        if self.variant.ordered:
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
        if self.variant.balanced:
            order = balanced_order(self.classes)
        else:
            order = interleaved_order(self.classes)
        taken = [0] * len(self.classes)
        failed = [False] * len(self.classes)
        for ci in order:
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
            cls.representative,
            cls.state,
            min_values=self.options.min_values_policy,
            prefer_no_schedule=self.prefer_no_schedule,
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


def interleaved_order(classes: list[PodClass]) -> list[int]:
    """Classes interleaved in proportion to their size, queue order within each round."""
    keyed: list[tuple[float, int]] = []
    for ci, cls in enumerate(classes):
        n = len(cls.pods)
        keyed.extend(((k + 0.5) / n, ci) for k in range(n))
    keyed.sort()
    return [ci for _, ci in keyed]


def balanced_order(classes: list[PodClass]) -> list[int]:
    """The first pass's order of pods, as class indices: large pods first, and CPU-heavy and
    memory-heavy pods interleaved so that every prefix of the order asks for memory and CPU in
    about the ratio of the whole batch.

    Pods whose memory:CPU ratio is at most the batch's go on one pile and the rest on the other,
    each pile largest first (size: the larger of CPU and memory over the batch ratio); the order
    takes from the memory pile while what it has taken so far leans to CPU, and from the CPU pile
    otherwise. A NodeClaim filled from this stream ends with its requests in the batch's shape,
    the shape the LP's cheapest types are chosen for, instead of holding only CPU-heavy pods
    (a compute-optimised type with idle memory) or only memory-heavy ones. Classes interleave
    pod by pod, so identical pods spread over NodeClaims too. Pure and deterministic.
    """
    cpu_total = mem_total = 0
    shapes: list[tuple[int, int, int]] = []
    for ci, cls in enumerate(classes):
        cpu, mem = cls.requests.get_amount(CPU), cls.requests.get_amount(MEMORY)
        cpu_total += cpu * len(cls.pods)
        mem_total += mem * len(cls.pods)
        shapes.append((cpu, mem, ci))
    if cpu_total == 0 or mem_total == 0:
        return [ci for ci, cls in enumerate(classes) for _ in cls.pods]
    tau = mem_total / cpu_total

    def size(shape: tuple[int, int, int]) -> tuple[float, int]:
        return (-max(shape[0] * tau, shape[1]), shape[2])

    cpu_pile = sorted((s for s in shapes if s[1] <= s[0] * tau), key=size)
    mem_pile = sorted((s for s in shapes if s[1] > s[0] * tau), key=size)
    left = [len(c.pods) for c in classes]
    order: list[int] = []
    lean = 0.0  # memory taken minus tau times CPU taken
    i = j = 0
    while i < len(cpu_pile) or j < len(mem_pile):
        if i >= len(cpu_pile) or j >= len(mem_pile):
            take_mem = i >= len(cpu_pile)
        elif lean == 0:  # at the start (or exactly balanced) the larger pod goes first
            take_mem = size(mem_pile[j]) < size(cpu_pile[i])
        else:
            take_mem = lean < 0
        cpu, mem, ci = mem_pile[j] if take_mem else cpu_pile[i]
        order.append(ci)
        lean += mem - tau * cpu
        left[ci] -= 1
        if not left[ci]:
            if take_mem:
                j += 1
            else:
                i += 1
    return order


def unit_weights(pools: list[PoolIndex], classes: list[PodClass]) -> dict[str, list[list[float]]]:
    """Per NodePool, the LP's prices per unit of each resource (``lp.covering_lp``: buy
    fractional nodes of the pool's types, each less its DaemonSet overhead, to hold every
    pending pod's requests); pools whose LP has no solution are left out (no steering there).

    When the optimum fills its types in CPU and memory at once, the dual prices are not
    unique: any split of a type's price between its CPU and its memory is optimal, and one that
    puts it all on memory would call a memory-optimised type as cheap as the compute-optimised
    one the LP buys. So the LP is solved once with CPU and once with memory demand raised by
    1 %, which makes each dual unique, and a type is worth the *smaller* of its two valuations
    (``Solver.excess``): what it is surely worth, whichever resource turns out scarce."""
    if not classes or not pools:
        return {}
    space = pools[0].space
    size = len(space.names)
    demand = [0] * size
    for cls in classes:
        vec = space.vector(cls.requests)
        for r in range(size):
            demand[r] += vec[r] * len(cls.pods)
    rows = [r for r in range(size) if demand[r] > 0]
    bumps = [k for k, r in enumerate(rows) if space.names[r] in (CPU, MEMORY)] or [-1]
    out: dict[str, list[list[float]]] = {}
    for index in pools:
        if not index.types:
            continue
        frontier = index.frontier()
        columns = [
            [max(0, index.alloc[i][r] - index.overhead_vec[r]) / demand[r] for r in rows]
            for i in frontier
        ]
        prices = [index.cheapest_price(1 << i, index.template) for i in frontier]
        found_all: list[list[float]] = []
        for bump in bumps:
            want = [1.01 if k == bump else 1.0 for k in range(len(rows))]
            found = covering_lp(columns, prices, want)
            if found is None:
                break
            weights = [0.0] * size
            for k, r in enumerate(rows):
                weights[r] = found.duals[k] / demand[r]
            found_all.append(weights)
        else:
            out[index.pool.name] = found_all
    return out


def _worth(weights: list[list[float]], content: list[int]) -> float:
    """What ``content`` is surely worth at the LP's prices (the smaller valuation)."""
    return min(sum(w * c for w, c in zip(ws, content, strict=True)) for ws in weights)


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
    if opts.packing is Packing.KARPENTER:
        solver = Solver(snapshot, pods, opts)
        solver.run()
        return solver.results(sum(c.price() for c in solver.claims if c.pods))
    results, solver = _solve_balanced(snapshot, pods, opts)
    if not opts.improve or not solver.weights:
        return results
    movable = frozenset(
        PodUID(uid)
        for uid, ctx in solver.pod_context.items()
        if ctx.simple and PodUID(uid) not in solver.relaxed
    )
    shape = repack_mod.Shape(solver.space, solver.weights, movable)

    def window(sub: ClusterSnapshot, moving: list[Pod]) -> Results:
        return _solve_balanced(sub, moving, opts, base=solver)[0]

    return repack_mod.repack(snapshot, pods, results, shape, window)


def _solve_balanced(
    snapshot: ClusterSnapshot, pods: list[Pod], opts: SchedulerOptions, base: Solver | None = None
) -> tuple[Results, Solver]:
    """The cheapest plan of the greedy variants (each improved), and the solver that made it."""
    best: tuple[tuple[int, float], Results, Solver] | None = None
    variants = (BALANCED, INTERLEAVED) if len(pods) <= SMALL_BATCH else (BALANCED,)
    for variant in variants:
        solver = Solver(snapshot, pods, opts, variant, base)
        solver.run()
        greedy = sum(c.price() for c in solver.claims if c.pods)
        if opts.improve:
            improve(solver)
            peel(solver)
        results = solver.results(greedy)
        score = (len(results.unplaced), round(results.price, 6))
        if best is None or score < best[0]:
            best = (score, results, solver)
        if score == (0, 0.0):
            break  # every pod on existing capacity: no variant can do better (ties keep the first)
    if best is None:
        raise ValueError("no packing variant ran")
    return best[1], best[2]


_TOO_FULL = Reject(ReasonKind.RESOURCES, "insufficient resources")
"""An existing node's refusal found before try_add (place_one only needs that it is for good)."""

BALANCED = Variant(ordered=True, balanced=True, steer=True)
INTERLEAVED = Variant(ordered=True, balanced=False, steer=False)
# Batches up to this many pods are also solved with the class-interleaved order, unsteered, and
# the cheaper plan kept: with few NodeClaims rounding to whole instance types decides the cost,
# and either order may round better; a second solve of a small batch costs milliseconds.
SMALL_BATCH = 200
