"""The bins one solve places pods into, and the NodePools that open new ones.

A solve's fleet is its existing nodes, the NodeClaims it has opened so far (after the nodes, in
opening order), and per NodePool how many nodes it holds and how much of its resource limits
they have been charged. The greedy pass (``scheduler``), the improvement steps (``improve``) and
the explanations (``explain``) all go through this one object — open a NodeClaim, retire one,
probe what a new one would be, ask what the limits still allow — so the NodePool accounting is
kept in one place and every step sees the same bins.

Each pod shape sees the fleet through its ``ShapeContext`` (built and cached here): the bins that
may still take it, extended by ``refresh`` as NodeClaims open. Pure, and mutable only within one
solve.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from karpy.core.requirements import Requirement
from karpy.core.resources import Resources
from karpy.core.scheduling import preferences
from karpy.core.scheduling.cost import COST, node_milli
from karpy.core.scheduling.existingnode import ExistingNode, Placement
from karpy.core.scheduling.nodeclaim import MergeCache, NodeClaim, pool_verdict
from karpy.core.scheduling.pool import PoolIndex, ResourceSpace
from karpy.core.scheduling.queue import ShapeContext
from karpy.core.scheduling.topology import HOSTNAME, ShapeTopology, Topology
from karpy.core.snapshot import ClusterSnapshot
from karpy.core.taints import Taint

Bin = ExistingNode | NodeClaim


class Fleet:
    """Existing nodes and new NodeClaims of one solve, with per-NodePool node counts and limit
    charges.

    ``bins`` holds every bin in the order pods try them (existing nodes first: initialized, then
    not, then in flight; then NodeClaims as they open); ``claims`` the NodeClaims alone,
    including emptied ones (``retire``). ``topology`` must already know every constraint group
    the pending pods may use; the existing nodes' pods are counted into it here.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        *,
        space: ResourceSpace,
        pools: Sequence[PoolIndex],
        topology: Topology,
        max_types: int,
    ) -> None:
        self.space = space
        self.pools = pools
        self.topology = topology
        self.max_types = max_types
        self.merges = MergeCache()
        startup: dict[str, tuple[Taint, ...]] = {
            p.name: p.startup_taints for p in snapshot.nodepools
        }
        self.existing: list[ExistingNode] = []
        nodes = sorted(snapshot.nodes, key=lambda n: (not n.initialized, n.in_flight, n.name))
        for node in nodes:
            for pod in node.pods:
                topology.register_existing(pod)
        for node in nodes:
            node_labels = node.labels_dict
            for pod in node.pods:
                topology.seed(pod, node_labels)
            self.existing.append(
                ExistingNode(
                    node,
                    space=space,
                    topology=topology,
                    startup_taints=startup.get(node.nodepool or "", ()),
                )
            )
        self.bins: list[Bin] = list(self.existing)
        self.claims: list[NodeClaim] = []
        self._contexts: dict[preferences.Shape, ShapeContext] = {}
        self._pinned: dict[tuple[preferences.Shape, tuple[tuple[str, str], ...]], ShapeContext] = {}
        self._nodes: dict[str, int] = {}
        self._charged: dict[str, list[int]] = {}
        for index in pools:
            self._nodes[index.pool.name] = 0
            self._charged[index.pool.name] = [0] * len(space.names)
        cost = space.names.index(COST) if COST in space.names else None
        for node in snapshot.nodes:
            if node.nodepool in self._nodes:
                self._nodes[node.nodepool] += 1
                charged = self._charged[node.nodepool]
                for r, amount in enumerate(space.vector(node.capacity)):
                    charged[r] += amount
                if cost is not None:
                    types = snapshot.instance_types.get(node.nodepool, ())
                    charged[cost] += node_milli(node, types)

    # ------------------------------------------------------------------ shapes
    def context(self, shape: preferences.Shape, requests: Resources) -> ShapeContext:
        """The one context of ``shape`` (pods of ``requests``), built on first use."""
        ctx = self._contexts.get(shape)
        if ctx is None:
            st = self.topology.for_shape(shape)
            ctx = ShapeContext(
                shape=shape,
                vector=self.space.vector(requests),
                topology=st,
                host_blockers=host_blockers(st),
            )
            self._contexts[shape] = ctx
        return ctx

    def pinned_context(self, ctx: ShapeContext, home: dict[str, str]) -> ShapeContext:
        """``ctx``'s shape pinned to the domains in ``home``, without topology rules.

        For the improvement step: a pod moving to another bin in exactly the domains it leaves
        changes no topology count, so every spread, affinity and anti-affinity rule that held
        still holds; only requirements, taints, ports and room need checking.
        """
        key = (ctx.shape, tuple(sorted(home.items())))
        found = self._pinned.get(key)
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
            self._pinned[key] = found
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

    # ------------------------------------------------------------------ NodeClaims
    def new_claim(
        self, ctx: ShapeContext, only: int | None = None
    ) -> tuple[NodeClaim, Placement] | None:
        """Open a NodeClaim from the first NodePool (by weight) that can take the shape (with
        ``only``: see ``probe_claim``)."""
        found = self.probe_claim(ctx, only)
        if found is None:
            return None
        claim, placement = found
        self.open(claim, placement)
        return claim, placement

    def probe_claim(
        self, ctx: ShapeContext, only: int | None = None
    ) -> tuple[NodeClaim, Placement] | None:
        """The NodeClaim ``new_claim`` would open for ``ctx``, without opening it; with
        ``only``, of the first pool's types in that bitset (the claim may widen again to the
        pool's other types once it holds its pods: ``NodeClaim.mask_for``)."""
        for index in self.pools if only is None else self.pools[:1]:
            if not index.types or pool_verdict(index, ctx) is not None:
                continue
            mask = self.limit_mask(index)
            if not mask:
                continue
            claim = NodeClaim(
                index,
                max_types=self.max_types,
                name=f"{index.pool.name}-{len(self.claims) + 1:05d}",
                mask=mask,
                topology=self.topology,
                merges=self.merges,
            )
            if only is not None:
                claim.mask &= only
            verdict = claim.try_add(ctx)
            if isinstance(verdict, Placement):
                return claim, verdict
        return None

    def open(self, claim: NodeClaim, placement: Placement) -> None:
        """Count a new NodeClaim against its pool, about to take its first pod (``placement``).

        Resource limits are charged the largest capacity among the instance types that pod
        leaves it (Karpenter subtracts the largest of the narrowed options), and the charge then
        follows the NodeClaim as later pods narrow it (``NodeClaim.track_limits``).
        """
        self.claims.append(claim)
        self.bins.append(claim)
        name = claim.index.pool.name
        self._nodes[name] += 1
        if claim.index.limit_vec is not None:
            claim.track_limits(self._charged[name], placement.mask)

    def retire(self, claim: NodeClaim) -> None:
        """Drop an emptied NodeClaim (its pods moved elsewhere) and refund its pool."""
        claim.pods.clear()
        self._nodes[claim.index.pool.name] -= 1
        claim.release()

    # ------------------------------------------------------------------ limits
    def limit_mask(self, index: PoolIndex) -> int:
        """Types a new NodeClaim of ``index`` may use without breaking the pool's limits."""
        name = index.pool.name
        if index.node_limit is not None and self._nodes[name] >= index.node_limit:
            return 0
        if index.limit_vec is None:
            return index.full
        charged = self._charged[name]
        remaining = tuple(
            limit - used for limit, used in zip(index.limit_vec, charged, strict=True)
        )
        return index.within_mask(remaining)

    def nodes_in(self, pool: str) -> int:
        """Nodes NodePool ``pool`` holds now: its existing nodes and open NodeClaims."""
        return self._nodes[pool]

    def charged(self, pool: str) -> Sequence[int]:
        """What NodePool ``pool``'s limits have been charged, per resource of ``space``."""
        return self._charged[pool]

    def pod_count(self) -> int:
        """Pods placed on the fleet by this solve (on existing nodes and NodeClaims)."""
        return sum(len(c.pods) for c in self.claims) + sum(len(n.pods) for n in self.existing)


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
