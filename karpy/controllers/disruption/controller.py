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

Steps 2-4 (less the acting) are `karpy.controllers.disruption.passes`, which `karpy explain node`
runs too (`explain_pass`): the explanation is the controller's own pass over the same read.

Methods that need to know where pods would go get a scheduling simulation over the same read
(karpy.controllers.disruption.simulation); instance types (which also price each NodeClaim) are
asked of the provider only when a drifted node with pods or a consolidation candidate makes them
necessary. The decision runs off the event loop: it is pure.
Candidates a user can unblock (a budget, do-not-disrupt, a PDB, pods that would not fit) get a
`DisruptionBlocked` event on their Node and NodeClaim, deduplicated by the recorder. Every node
consolidation looked at and left alone gets an `Unconsolidatable` event on its Node and NodeClaim
with the one reason the core gave (`PassResult.kept`), repeated at most every 15 minutes while the
reason stays the same (Karpenter's dedupe timeout) and at once when it changes. Two reasons are
not evented, as in Karpenter: a NodePool whose policy is WhenEmpty, and a node whose
consolidateAfter has not passed yet (its `Consolidatable` condition says so).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import ClassVar, Final

from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.protocol import CloudProvider
from karpy.controllers.disruption import events, passes
from karpy.controllers.disruption.queue import CommandFailedError, OrchestrationQueue
from karpy.controllers.disruption.rest import Rest, nomination_windows_end
from karpy.controllers.disruption.simulation import simulator
from karpy.controllers.disruption.timing import timed
from karpy.core.disruption.budgets import Allowance
from karpy.core.disruption.candidates import Candidate, Policy, Skip, SkipReason, priced
from karpy.core.disruption.consolidation import Settings
from karpy.core.disruption.decision import Memo, PassResult, disruption_methods, revalidate
from karpy.core.disruption.due import next_due
from karpy.core.disruption.methods import Command, Method, Reason
from karpy.core.instancetypes import InstanceType
from karpy.core.scheduling.options import SchedulerOptions
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.manager import Singleton, Watch
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.buffers import BufferPods
from karpy.state.podmoves import pod_moves
from karpy.state.snapshot import SnapshotKinds
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

POLLING_PERIOD: Final = 10.0
"""Seconds between passes (Karpenter's disruption pollingPeriod)."""
NOT_SYNCED_REQUEUE: Final = 1.0
NOMINATION_WINDOW: Final = 20.0
"""Seconds a freshly initialized node is kept for the pods it was launched for: Karpenter's
max(2 x batch max duration, 10 s) with the default 10 s batch max duration."""
SILENT: Final = frozenset({SkipReason.POLICY, SkipReason.NOT_CONSOLIDATABLE})
"""Reasons consolidation keeps a node that get no Unconsolidatable event."""
VALIDATION_DELAY: Final = 15.0
"""Seconds a consolidation command waits before it is re-checked (Karpenter's)."""


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
        buffers: BufferPods | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``sleep`` waits out the validation delay (asyncio's by default); tests inject one
        that returns when they have changed the cluster, instead of racing the delay."""
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
        evaluation = telemetry.metrics.disruption_evaluation_duration_seconds
        self._methods = tuple(
            timed(m, evaluation)
            for m in (methods if methods is not None else disruption_methods(consolidation))
        )
        self._memo = Memo()
        self._rest: Rest | None = None
        self._spot_to_spot = (consolidation or Settings()).spot_to_spot
        self._min_improvement = min_improvement
        self._validation_delay = validation_delay
        self._period = polling_period
        self._nomination_window = nomination_window
        self._provider_timeout = provider_timeout
        self._await_provisioning = await_provisioning
        self._buffers = buffers
        self._sleep = sleep

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
        """One disruption pass; comes back after the polling period, or sooner when the rest
        (karpy.controllers.disruption.rest) runs out before it. At rest, returns at once.

        Side effects: taint and annotation tidying, DisruptionBlocked events, commands started.
        """
        if not self._view.synced or not self._queue.ready:
            log.debug("waiting on cluster sync")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        generation = self._view.generation
        now = self._clock.now().timestamp()
        if self._rest is not None and self._rest.holds(generation, now):
            log.debug("skipping disruption pass: cluster unchanged since it found nothing")
            return Result(requeue_after=min(self._period, self._rest.until - now))
        self._rest = None
        if self._await_provisioning and not self._view.nominations_known():
            # Restarted with pods pending: which nodes they are headed for is known only once
            # the provisioner has passed; an empty-looking node may be one of them.
            log.debug("waiting on the first provisioning pass")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        await self._queue.tidy()
        state = await self._read()
        decided = await passes.decide(
            state,
            cloudprovider=self._provider,
            methods=self._methods,
            scheduler=self._scheduler,
            provider_timeout=self._provider_timeout,
            memo=self._memo,
            tracer=self._telemetry.tracer,
        )
        decision, types = decided.result, decided.instance_types
        outcome = decision.outcome
        self._record_allowances(decision.allowances, decision.selection.candidates)
        by_name = {c.metadata.name or "": c for c in state.claims}
        await self._report([*decision.selection.skipped, *outcome.skipped], by_name)
        await self._report_kept(decision.kept, by_name)
        for command in outcome.commands:
            if command.method.consolidation:
                checked = await self._validate(command, types)
                if checked is None:
                    continue
                command = checked
            self._telemetry.metrics.disruption_decisions_total.add(
                1,
                {
                    "decision": command.decision.value,
                    "reason": command.reason.value.lower(),
                    "consolidation_type": command.method.consolidation_type,
                },
            )
            try:
                await self._queue.submit(command, state.live)
            except CommandFailedError as error:
                log.error("failed to disrupt nodes", extra={"error": str(error)})
        if outcome.commands or self._queue.starting():
            return Result(requeue_after=self._period)
        return self._rest_after(state, generation)

    def _rest_after(self, state: passes.Read, generation: tuple[int, int]) -> Result:
        """After a pass that found nothing: at rest until the clock alone could change the
        answer, when consolidation is settled (a search cut short at its limit goes on)."""
        settled = self._memo.settled_until
        if settled is None:
            return Result(requeue_after=self._period)
        due = [
            settled,
            next_due(state.facts, state.pools, now=state.now),
            nomination_windows_end(state.facts, now=state.now, window=self._nomination_window),
            self._view.next_nomination_lapse(state.now),
        ]
        until = min(t for t in due if t is not None)
        self._rest = Rest(generation=generation, until=until)
        return Result(requeue_after=max(0.0, min(self._period, until - state.now)))

    async def _read(self) -> passes.Read:
        """One read of cluster state through the view, with what this process knows: the
        NodeClaims the queue is starting a command for and the provisioner's nominations."""
        now = self._clock.now().timestamp()
        return await passes.read(
            self._view,
            now=now,
            nomination_window=self._nomination_window,
            min_improvement=self._min_improvement,
            snapshot_kinds=self._kinds,
            busy=self._queue.starting(),
            nominated=lambda name: self._view.nominated(name, now),
            virtual=self._buffers.pods() if self._buffers is not None else (),
            scheduler=self._scheduler,
        )

    async def _validate(
        self, command: Command, types: Mapping[str, Sequence[InstanceType]]
    ) -> Command | None:
        """The consolidation command re-decided after the validation delay, or None (logged)
        when the cluster changed under it."""
        log.debug("validating consolidation command", extra={"nodeclaims": list(command.names)})
        await self._sleep(self._validation_delay)
        state = await self._read()
        node_facts = priced(state.facts, types)
        simulate = simulator(state.objects, types, self._scheduler, relax=True)
        with self._telemetry.tracer.start_as_current_span("disruption validation"):
            checked = await asyncio.to_thread(
                revalidate,
                command,
                node_facts,
                state.pools,
                now=state.now,
                simulate=simulate,
                spot_to_spot=self._spot_to_spot,
            )
        if isinstance(checked, str):
            log.info(
                "abandoning consolidation command",
                extra={"nodeclaims": list(command.names), "reason": checked},
            )
            self._telemetry.metrics.disruption_failed_validations_total.add(
                len(command.names), {"consolidation_type": command.method.consolidation_type}
            )
            return None
        return checked

    def _record_allowances(
        self, by_reason: Mapping[Reason, Mapping[str, Allowance]], candidates: Sequence[Candidate]
    ) -> None:
        metrics = self._telemetry.metrics
        consuming: dict[str, int] = {}
        for reason, pools in by_reason.items():
            for pool, grant in pools.items():
                metrics.nodepools_allowed_disruptions.set(
                    grant.allowed, {"nodepool": pool, "reason": reason.value.lower()}
                )
                consuming[pool] = max(consuming.get(pool, 0), grant.disrupting)
        for pool, count in consuming.items():
            metrics.nodepools_nodes_consuming_budgets.set(count, {"nodepool": pool})
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
                await self._recorder.publish(events.blocked_nodeclaim(claim, skip.message), now=now)
            node = self._view.node(skip.node) if skip.node else None
            if node is not None:
                await self._recorder.publish(events.blocked_node(node, skip.message), now=now)

    async def _report_kept(self, kept: Sequence[Skip], claims: Mapping[str, NodeClaim]) -> None:
        """An Unconsolidatable event per node consolidation left alone, with its reason."""
        now = asyncio.get_running_loop().time()
        for skip in kept:
            if skip.reason in SILENT:
                continue
            claim = claims.get(skip.nodeclaim)
            if claim is not None:
                await self._recorder.publish(
                    events.unconsolidatable_nodeclaim(claim, skip.message), now=now
                )
            node = self._view.node(skip.node) if skip.node else None
            if node is not None:
                await self._recorder.publish(
                    events.unconsolidatable_node(node, skip.message), now=now
                )


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
    virtual: Sequence[Pod] = (),
) -> PassResult:
    """The pass the controller would run now over `view`, decided and not acted on: what
    `karpy explain node` prints from a running cluster. Commands in flight are known from their
    NodeClaims' annotations; nominations only from the nomination window (the provisioner's
    live nominations are in the running controller's memory); `virtual` are the
    CapacityBuffers' pods."""
    state = await passes.read(
        view,
        now=now,
        nomination_window=nomination_window,
        min_improvement=min_improvement,
        snapshot_kinds=snapshot_kinds,
        virtual=virtual,
        scheduler=scheduler,
    )
    decided = await passes.decide(
        state,
        cloudprovider=cloudprovider,
        methods=disruption_methods(consolidation),
        scheduler=scheduler or SchedulerOptions(),
        provider_timeout=provider_timeout,
    )
    return decided.result
