"""The disruption singleton: one loop that removes nodes karpy no longer needs as they are.

Every polling period (10 s, as Karpenter's) and whenever a pod is bound to or removed from a node,
once cluster state is synced, the orchestration queue has adopted the commands a previous
process left and (with `await_provisioning`, as the operator runs it) the provisioner has passed
at least once since start when pods are pending (nominations are rebuilt by that pass), one pass:
1. tidy: stale `karpenter.sh/disrupted` taints off, finished replacements unmarked;
2. read NodeClaims, Nodes, pods, PodDisruptionBudgets and NodePools through the ClusterView into
   the pure core's facts (karpy.controllers.disruption.facts);
3. select candidates and compute each NodePool's budget allowance per reason;
4. ask the methods in Karpenter's order — Emptiness, StaticDrift, Drift, multi-node and
   single-node consolidation — and hand the commands of the first that yields any to the
   orchestration queue, which replaces before it removes. A consolidation command is validated
   first: after `validation_delay` (Karpenter's 15 s) the cluster is read again and the command
   re-decided (karpy.core.disruption.decision.revalidate); a different result drops it.

Methods that need to know where pods would go get a scheduling simulation over the same read
(karpy.controllers.disruption.simulation); instance types (which also price each NodeClaim) are
asked of the provider only when a drifted node with pods or a consolidation candidate makes them
necessary. The decision runs off the event loop: it is pure.
Candidates a user can unblock (a budget, do-not-disrupt, a PDB, pods that would not fit) get a
`DisruptionBlocked` event on their Node and NodeClaim, deduplicated by the recorder. Every node
consolidation looked at and left alone gets an `Unconsolidatable` event on its Node and NodeClaim
with the one reason the core gave (`Decision.kept`), repeated at most every 15 minutes while the
reason stays the same (Karpenter's dedupe timeout) and at once when it changes. Two reasons are
not evented, as in Karpenter: a NodePool whose policy is WhenEmpty, and a node whose
consolidateAfter has not passed yet (its `Consolidatable` condition says so).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import API_VERSION as NODECLAIM_API_VERSION
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.errors import CloudProviderError
from karpy.cloudprovider.protocol import CloudProvider
from karpy.controllers.disruption import facts
from karpy.controllers.disruption.queue import CommandFailedError, OrchestrationQueue
from karpy.controllers.disruption.simulation import simulator, simulators
from karpy.core.disruption.budgets import Allowance
from karpy.core.disruption.candidates import (
    Candidate,
    NodeFacts,
    Policy,
    PoolDisruption,
    Skip,
    SkipReason,
    select,
)
from karpy.core.disruption.consolidation import Settings, consolidation_methods
from karpy.core.disruption.decision import Decision, disrupt, fingerprint, revalidate
from karpy.core.disruption.methods import (
    Command,
    Drift,
    Emptiness,
    Method,
    Pass,
    Reason,
    StaticDrift,
)
from karpy.core.instancetypes import InstanceType
from karpy.core.scheduling.scheduler import SchedulerOptions
from karpy.kube.events import Event, EventType, InvolvedObject, Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODDISRUPTIONBUDGETS, PODS
from karpy.manager import Singleton, Watch
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.podmoves import pod_moves
from karpy.state.snapshot import ClusterObjects, SnapshotKinds, read_cluster
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

POLLING_PERIOD: Final = 10.0
"""Seconds between passes (Karpenter's disruption pollingPeriod)."""
NOT_SYNCED_REQUEUE: Final = 1.0
NOMINATION_WINDOW: Final = 20.0
"""Seconds a freshly initialized node is kept for the pods it was launched for: Karpenter's
max(2 x batch max duration, 10 s) with the default 10 s batch max duration."""
REASON_BLOCKED: Final = "DisruptionBlocked"
REASON_UNCONSOLIDATABLE: Final = "Unconsolidatable"
UNCONSOLIDATABLE_DEDUPE: Final = 900.0
"""Seconds an identical Unconsolidatable event is suppressed (Karpenter's 15 minutes)."""
SILENT: Final = frozenset({SkipReason.POLICY, SkipReason.NOT_CONSOLIDATABLE})
"""Reasons consolidation keeps a node that get no Unconsolidatable event."""
VALIDATION_DELAY: Final = 15.0
"""Seconds a consolidation command waits before it is re-checked (Karpenter's)."""
CONSOLIDATION: Final = frozenset({"multi-node-consolidation", "single-node-consolidation"})


class DisruptionController:
    """Decide what to disrupt, within budgets, and hand it to the orchestration queue."""

    name: ClassVar[str] = "disruption"

    def __init__(
        self,
        view: ClusterView,
        queue: OrchestrationQueue,
        *,
        clock: Clock,
        recorder: Recorder,
        telemetry: Telemetry,
        cloudprovider: CloudProvider | None = None,
        scheduler: SchedulerOptions | None = None,
        snapshot_kinds: SnapshotKinds | None = None,
        methods: Sequence[Method] | None = None,
        consolidation: Settings | None = None,
        min_improvement: float = 0.0,
        validation_delay: float = VALIDATION_DELAY,
        polling_period: float = POLLING_PERIOD,
        nomination_window: float = NOMINATION_WINDOW,
        provider_timeout: float = 60.0,
        await_provisioning: bool = False,
    ) -> None:
        if polling_period <= 0:
            msg = f"DisruptionController: polling_period must be > 0 seconds, got {polling_period}"
            raise ValueError(msg)
        self._view = view
        self._queue = queue
        self._clock = clock
        self._recorder = recorder
        self._telemetry = telemetry
        self._provider = cloudprovider
        self._scheduler = scheduler or SchedulerOptions()
        self._kinds = snapshot_kinds
        self._methods = (
            tuple(methods)
            if methods is not None
            else (
                Emptiness(),
                StaticDrift(),
                Drift(),
                *consolidation_methods(consolidation or Settings()),
            )
        )
        self._quiet_methods = tuple(
            m for m in self._methods if m.reason is not Reason.UNDERUTILIZED
        )
        self._memo = _Memo()
        self._spot_to_spot = (consolidation or Settings()).spot_to_spot
        self._min_improvement = min_improvement
        self._validation_delay = validation_delay
        self._period = polling_period
        self._nomination_window = nomination_window
        self._provider_timeout = provider_timeout
        self._await_provisioning = await_provisioning

    def spec(self) -> Singleton:
        """A pass at start, each polling period (the pass asks for it) and whenever a pod is
        bound to or removed from a node (a node may just have emptied)."""
        return Singleton(
            name=self.name,
            reconcile=self.reconcile_once,
            watches=(Watch(kind=PODS, keys=pod_moves(lambda: self._view.informers_synced)),),
            reads=(NODES, NODECLAIMS, NODEPOOLS),
        )

    async def reconcile_once(self) -> Result:
        """One disruption pass; always comes back after the polling period.

        Side effects: taint and annotation tidying, DisruptionBlocked events, commands started.
        """
        if not self._view.synced or not self._queue.ready:
            log.debug("waiting on cluster sync")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        if self._await_provisioning and not self._view.nominations_known():
            # Restarted with pods pending: which nodes they are headed for is known only once
            # the provisioner has passed; an empty-looking node may be one of them.
            log.debug("waiting on the first provisioning pass")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        await self._queue.tidy()
        now, objects, claims, node_facts, pools, live = self._read()
        selection = select(node_facts, pools, now=now)
        types = await self._instance_types(selection.candidates, live)
        node_facts = facts.priced(node_facts, types)
        simulate, relaxed = simulators(objects, types, self._scheduler)
        state = hash((fingerprint(node_facts, pools, selection, now=now), _inputs(objects)))
        settled = self._memo.settled(state, now)
        if settled:
            log.debug("skipping consolidation: cluster unchanged since it found nothing")
        with self._telemetry.tracer.start_as_current_span("disruption pass") as span:
            decision = await asyncio.to_thread(
                disrupt,
                node_facts,
                pools,
                now=now,
                simulate=simulate,
                methods=self._quiet_methods if settled else self._methods,
                relaxed=relaxed,
                cleared=self._memo.cleared,
            )
            outcome = decision.outcome
            span.set_attribute("karpy.candidates", len(decision.selection.candidates))
            span.set_attribute("karpy.method", outcome.method or "")
            span.set_attribute("karpy.commands", len(outcome.commands))
            span.set_attribute("karpy.consolidation_skipped", settled)
        if not settled:
            self._memo.record(outcome, now)
        self._record_allowances(decision.allowances, decision.selection.candidates)
        by_name = {c.metadata.name or "": c for c in claims}
        await self._report([*decision.selection.skipped, *outcome.skipped], by_name)
        await self._report_kept(decision.kept, by_name)
        for command in outcome.commands:
            if command.method in CONSOLIDATION:
                checked = await self._validate(command, types)
                if checked is None:
                    continue
                command = checked
            self._telemetry.metrics.disruption_decisions_total.add(
                1,
                {
                    "decision": command.decision.value,
                    "reason": command.reason.value.lower(),
                    "consolidation_type": _consolidation_type(command.method),
                },
            )
            try:
                await self._queue.submit(command, live)
            except CommandFailedError as error:
                log.error("failed to disrupt nodes", extra={"error": str(error)})
        return Result(requeue_after=self._period)

    def _read(
        self,
    ) -> tuple[
        float,
        ClusterObjects,
        list[NodeClaim],
        list[NodeFacts],
        dict[str, PoolDisruption],
        dict[str, NodePool],
    ]:
        """One read of cluster state through the view, translated for the core."""
        objects = read_cluster(self._view, optional=self._kinds)
        pdbs = (
            self._view.objects(PODDISRUPTIONBUDGETS)
            if self._view.informs(PODDISRUPTIONBUDGETS)
            else []
        )
        now = self._clock.now().timestamp()
        claims = list(objects.nodeclaims)
        node_facts = facts.node_facts(
            claims,
            objects.nodes,
            objects.pods,
            pdbs,
            now=now,
            nomination_window=self._nomination_window,
            busy=self._queue.busy,
            nominated=lambda name: self._view.nominated(name, now),
        )
        pools = facts.pools(objects.nodepools, min_improvement=self._min_improvement)
        live = {p.metadata.name or "": p for p in objects.nodepools}
        return now, objects, claims, node_facts, pools, live

    async def _validate(
        self, command: Command, types: Mapping[str, Sequence[InstanceType]]
    ) -> Command | None:
        """The consolidation command re-decided after the validation delay, or None (logged)
        when the cluster changed under it."""
        await asyncio.sleep(self._validation_delay)
        now, objects, _, node_facts, pools, _ = self._read()
        node_facts = facts.priced(node_facts, types)
        simulate = simulator(objects, types, self._scheduler, relax=True)
        with self._telemetry.tracer.start_as_current_span("disruption validation"):
            checked = await asyncio.to_thread(
                revalidate,
                command,
                node_facts,
                pools,
                now=now,
                simulate=simulate,
                spot_to_spot=self._spot_to_spot,
            )
        if isinstance(checked, str):
            log.info(
                "abandoning consolidation command",
                extra={"nodeclaims": list(command.names), "reason": checked},
            )
            return None
        return checked

    async def _instance_types(
        self, candidates: Sequence[Candidate], pools: Mapping[str, NodePool]
    ) -> dict[str, Sequence[InstanceType]]:
        return await instance_types(
            self._provider, candidates, pools, per_call=self._provider_timeout
        )

    def _record_allowances(
        self, by_reason: Mapping[Reason, Mapping[str, Allowance]], candidates: Sequence[Candidate]
    ) -> None:
        metrics = self._telemetry.metrics
        for reason, pools in by_reason.items():
            for pool, grant in pools.items():
                metrics.nodepools_allowed_disruptions.set(
                    grant.allowed, {"nodepool": pool, "reason": reason.value.lower()}
                )
        eligible: dict[str, int] = {}
        for candidate in candidates:
            key = (
                "drifted"
                if candidate.facts.drifted
                else "empty"
                if candidate.facts.empty
                else "underutilized"
                if candidate.pool.policy is not Policy.WHEN_EMPTY and not candidate.pool.static
                else ""
            )
            if key:
                eligible[key] = eligible.get(key, 0) + 1
        for reason in Reason:
            metrics.disruption_eligible_nodes.set(
                eligible.get(reason.value.lower(), 0), {"reason": reason.value.lower()}
            )

    async def _report(self, skipped: Sequence[Skip], claims: Mapping[str, NodeClaim]) -> None:
        now = asyncio.get_running_loop().time()
        for skip in skipped:
            log.debug(
                "skipping disruption candidate",
                extra={"nodeclaim": skip.nodeclaim, "reason": skip.reason.value},
            )
            if not skip.blocked:
                continue
            claim = claims.get(skip.nodeclaim)
            if claim is not None:
                await self._recorder.publish(_claim_event(claim, skip.message), now=now)
            node = self._view.node(skip.node) if skip.node else None
            if node is not None:
                await self._recorder.publish(_node_event(node, skip.message), now=now)

    async def _report_kept(self, kept: Sequence[Skip], claims: Mapping[str, NodeClaim]) -> None:
        """An Unconsolidatable event per node consolidation left alone, with its reason."""
        now = asyncio.get_running_loop().time()
        for skip in kept:
            if skip.reason in SILENT:
                continue
            claim = claims.get(skip.nodeclaim)
            if claim is not None:
                await self._recorder.publish(
                    _event(_claim_ref(claim), REASON_UNCONSOLIDATABLE, skip.message), now=now
                )
            node = self._view.node(skip.node) if skip.node else None
            if node is not None:
                await self._recorder.publish(
                    _event(_node_ref(node), REASON_UNCONSOLIDATABLE, skip.message), now=now
                )


CONSOLIDATED_TTL: Final = 300.0
"""How long a pass that found nothing to consolidate stands while the cluster is unchanged
(Karpenter re-checks a consolidated cluster every five minutes; prices may move meanwhile)."""


class _Memo:
    """What consolidation already found on the current cluster state (Karpenter's
    "consolidated" mark): candidates single-node consolidation simulated without a command
    (`cleared`, not simulated again), and whether a whole pass found nothing (`settled`:
    consolidation is skipped until the state changes or `CONSOLIDATED_TTL` passes). A large
    fleet whose single-node search stops at its simulation limit clears its candidates over
    several passes, then settles."""

    def __init__(self) -> None:
        self._state: int | None = None
        self.cleared: frozenset[str] = frozenset()
        self._settled_at: float | None = None

    def settled(self, state: int, now: float) -> bool:
        """Whether this pass may skip consolidation: a complete pass found nothing on this same
        `state` less than `CONSOLIDATED_TTL` ago. A new state forgets everything; so does the
        TTL running out, so that the pass after it simulates every candidate again."""
        expired = self._settled_at is not None and now - self._settled_at >= CONSOLIDATED_TTL
        if state != self._state or expired:
            self._state, self.cleared, self._settled_at = state, frozenset(), None
        return self._settled_at is not None

    def record(self, outcome: Pass, now: float) -> None:
        """What a pass that ran consolidation found: a command forgets everything (the cluster
        is about to change); nothing adds the candidates it simulated to `cleared`, and settles
        when the pass saw every candidate."""
        if outcome.commands:
            self._state, self.cleared, self._settled_at = None, frozenset(), None
            return
        self.cleared = self.cleared | outcome.examined
        self._settled_at = now if outcome.complete else None


def _inputs(objects: ClusterObjects) -> int:
    """A hash of the simulation's inputs facts do not carry: where every pod is (pending pods
    are placed first), the nodes' labels, taints and allocatable, and the NodePools' specs."""
    pods = tuple(sorted((p.metadata.uid or "", p.spec.node_name or "") for p in objects.pods))
    nodes = tuple(
        sorted(
            (
                n.metadata.name or "",
                tuple(sorted((n.metadata.labels or {}).items())),
                n.spec.taints,
                n.spec.unschedulable,
                tuple(sorted((k, str(v)) for k, v in n.status.allocatable.items())),
            )
            for n in objects.nodes
        )
    )
    pools = tuple(sorted((p.metadata.name or "", repr(p.spec)) for p in objects.nodepools))
    return hash((pods, nodes, pools))


async def instance_types(
    provider: CloudProvider | None,
    candidates: Sequence[Candidate],
    pools: Mapping[str, NodePool],
    *,
    per_call: float,
) -> dict[str, Sequence[InstanceType]]:
    """Instance types per live NodePool, asked of the provider only when there is a candidate:
    a replacement must be planned and priced for one with pods, and an empty one's price is what
    removing it saves (karpy_voluntary_disruption_savings_per_hour)."""
    if provider is None or not candidates:
        return {}
    found: dict[str, Sequence[InstanceType]] = {}
    for name, pool in sorted(pools.items()):
        if pool.metadata.deletion_timestamp is not None:
            continue
        try:
            async with asyncio.timeout(per_call):
                found[name] = await provider.get_instance_types(pool)
        except (CloudProviderError, TimeoutError) as error:
            log.warning(
                "failed to get instance types", extra={"nodepool": name, "error": str(error)}
            )
            found[name] = ()
    return found


async def explain_pass(
    view: ClusterView,
    *,
    now: float,
    cloudprovider: CloudProvider | None,
    scheduler: SchedulerOptions | None = None,
    consolidation: Settings | None = None,
    min_improvement: float = 0.0,
    nomination_window: float = NOMINATION_WINDOW,
    provider_timeout: float = 60.0,
    snapshot_kinds: SnapshotKinds | None = None,
) -> Decision:
    """The pass the controller would run now over `view`, decided and not acted on: what
    `karpy explain node` prints from a running cluster. Commands in flight are known from their
    NodeClaims' annotations; nominations only from the nomination window (the provisioner's
    live nominations are in the running controller's memory)."""
    objects = read_cluster(view, optional=snapshot_kinds)
    pdbs = view.objects(PODDISRUPTIONBUDGETS) if view.informs(PODDISRUPTIONBUDGETS) else []
    node_facts = facts.node_facts(
        list(objects.nodeclaims),
        objects.nodes,
        objects.pods,
        pdbs,
        now=now,
        nomination_window=nomination_window,
    )
    pools = facts.pools(objects.nodepools, min_improvement=min_improvement)
    live = {p.metadata.name or "": p for p in objects.nodepools}
    prospects = select(node_facts, pools, now=now).candidates
    types = await instance_types(cloudprovider, prospects, live, per_call=provider_timeout)
    node_facts = facts.priced(node_facts, types)
    options = scheduler or SchedulerOptions()
    methods = (
        Emptiness(),
        StaticDrift(),
        Drift(),
        *consolidation_methods(consolidation or Settings()),
    )
    simulate, relaxed = simulators(objects, types, options)
    return await asyncio.to_thread(
        disrupt,
        node_facts,
        pools,
        now=now,
        simulate=simulate,
        methods=methods,
        relaxed=relaxed,
    )


def _consolidation_type(method: str) -> str:
    """Karpenter's consolidation_type label: "multi", "single" or "" for other methods."""
    if method in CONSOLIDATION:
        return method.split("-", 1)[0]
    return ""


def _claim_ref(claim: NodeClaim) -> InvolvedObject:
    return InvolvedObject(
        api_version=NODECLAIM_API_VERSION,
        kind=NodeClaim.KIND,
        name=claim.metadata.name or "",
        uid=claim.metadata.uid or "",
    )


def _node_ref(node: Node) -> InvolvedObject:
    return InvolvedObject(
        api_version=Node.API_VERSION,
        kind=Node.KIND,
        name=node.metadata.name or "",
        uid=node.metadata.uid or "",
    )


def _event(involved: InvolvedObject, reason: str, message: str) -> Event:
    return Event(
        involved=involved,
        type=EventType.NORMAL,
        reason=reason,
        message=message,
        dedupe_window=UNCONSOLIDATABLE_DEDUPE if reason == REASON_UNCONSOLIDATABLE else None,
    )


def _claim_event(claim: NodeClaim, message: str) -> Event:
    return _event(_claim_ref(claim), REASON_BLOCKED, f"Cannot disrupt NodeClaim: {message}")


def _node_event(node: Node, message: str) -> Event:
    return _event(_node_ref(node), REASON_BLOCKED, f"Cannot disrupt Node: {message}")
