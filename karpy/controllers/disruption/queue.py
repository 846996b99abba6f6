"""The orchestration queue: carry out a disruption command so that capacity is replaced before
it is removed, and so that a crash at any moment leaves nothing behind.

For each command (Karpenter's order):
1. record it on the candidates (annotations and the `DisruptionReason` condition, see
   `karpy.controllers.disruption.commands`), then taint their Nodes
   karpenter.sh/disrupted:NoSchedule so nothing new lands on them;
2. create the replacement NodeClaims, each annotated with the command's id;
3. wait until every replacement is Initialized — a replacement that goes away (a failed launch
   deletes its NodeClaim) or a wait longer than the command timeout rolls the command back;
4. delete the candidate NodeClaims: their finalizer and Node termination drain them (PDBs and
   do-not-disrupt pods respected), and the evicted pods land on the replacements.

Rolling back deletes the replacements that never initialized, removes the taint, the
annotations and the condition. Steps 3-4 are a keyed reconcile over the command's id that reads
only what the API server shows (through the ClusterView), so they run the same for a command
this process started and for one it found on start: `adopt()` queues every command recorded on
the API server. A command found missing a replacement (the process died between its first write
and its last create) is rolled back; the next disruption pass decides afresh.

The command timeout is 10 minutes, plus one minute for every other command in flight (a long
queue of replacements launches more slowly), capped at one hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import math
import secrets
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import ClassVar, Final

import attrs
from opentelemetry.context import Context
from opentelemetry.trace import Span

from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus, with_annotations
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.apis.v1.taints import DISRUPTED_TAINT
from karpy.controllers.disruption import commands, events
from karpy.core.disruption.consolidation import candidates_price
from karpy.core.disruption.methods import Command, Kind
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, KubeError, NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.kube.patch import taint_patch
from karpy.kube.watch import Event as WatchEvent
from karpy.manager import Controller, Keys, Watch
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry, current_link, remote_parent, traceparent
from karpy.state.conditions import claim_is_true, get_condition, set_condition
from karpy.state.plans import PlanError, nodeclaim_from_plan, nodeclaim_from_template
from karpy.state.series import created_labels, disrupted_labels
from karpy.state.tracecontext import with_origin
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

COMMAND_TIMEOUT: Final = 600.0
"""Seconds a command may wait for its replacements (Karpenter: 10 minutes)."""
TIMEOUT_PER_COMMAND: Final = 60.0
TIMEOUT_CAP: Final = 3600.0
WAIT_RECHECK: Final = 5.0
"""Seconds between checks of a waiting command when no NodeClaim event wakes it sooner."""
VISIBILITY_RECHECK: Final = 0.2
VISIBILITY_TIMEOUT: Final = 30.0
"""Seconds a command this process started waits for its own writes to show in cluster state
before it is judged on what the state shows."""
WORKERS: Final = 10
REASON_LAUNCHING: Final = "DisruptionLaunching"
REASON_WAITING: Final = "DisruptionWaitingReadiness"
REASON_TERMINATING: Final = "DisruptionTerminating"
REASON_ROLLBACK: Final = "DisruptionRolledBack"
MARK_ATTEMPTS: Final = 3
"""Writes of a command's mark on a candidate before a conflict rolls the command back."""


class CommandFailedError(Exception):
    """A command could not start; it was rolled back."""


@attrs.frozen(kw_only=True)
class _Meta:
    """What the queue remembers of a command it started (for logs, events and metrics)."""

    method: str
    reason: str
    decision: str
    nodepools: Mapping[str, str]
    savings: float | None = None
    """Dollars per hour the command takes off (None when a price is unknown)."""


class OrchestrationQueue:
    """Start commands (`submit`), finish or roll back every command recorded on the API server.

    `run()` works until `stop()`; on start it adopts the commands a previous process left.
    `starting()` names the NodeClaims of commands being started right now (the view may not
    show their annotations yet), so the disruption pass leaves them alone.
    """

    name: ClassVar[str] = "disruption.queue"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        recorder: Recorder,
        telemetry: Telemetry,
        command_timeout: float = COMMAND_TIMEOUT,
    ) -> None:
        self._client = client
        self._view = view
        self._clock = clock
        self._recorder = recorder
        self._telemetry = telemetry
        self._timeout = command_timeout
        self._meta: dict[str, _Meta] = {}
        # Commands this process started whose writes the view may not show yet: candidate and
        # replacement names, until the view shows them all.
        self._started: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._waited: dict[str, float] = {}
        self._starting: set[str] = set()
        # Commands whose start failed and whose rollback the runner finishes: why, and the
        # candidates and replacements this process wrote (the view may not show them yet).
        self._abandoned: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        self._busy: set[str] = set()
        self._keys = Keys(self.name)
        self._adopted = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    def spec(self) -> Controller:
        """Keyed by command id: the commands recorded on the API server once cluster state is
        synced (`adopt`), each command submitted, and each change to a NodeClaim of one (a
        candidate's or a replacement's)."""
        return Controller(
            name=self.name,
            reconcile=self.reconcile,
            watches=(Watch(kind=NODECLAIMS, keys=_commands_of_claim),),
            sources=(self._keys,),
            initial=self.adopt,
            reads=(NODES,),
            workers=WORKERS,
            requeue_on=(ConflictError,),
        )

    @property
    def ready(self) -> bool:
        """Whether the commands found on start are queued (the disruption pass waits for it)."""
        return self._adopted.is_set()

    async def wait_ready(self) -> None:
        """Wait until `ready`."""
        await self._adopted.wait()

    def adopt(self) -> list[str]:
        """Every command recorded on the API server (to be queued once cluster state is synced,
        whether this process is running it or a previous one left it); `ready` from then on."""
        found = list(commands.in_flight(self._view.nodeclaims()))
        self._adopted.set()
        return found

    def starting(self) -> frozenset[str]:
        """The NodeClaims of commands being started right now: the view may not show their
        annotations yet, so the disruption pass must not pick them again."""
        return frozenset(self._busy)

    def in_flight(self) -> int:
        return len(commands.in_flight(self._view.nodeclaims()))

    def timeout(self) -> float:
        """The command timeout now: longer when more commands are in flight."""
        others = max(0, self.in_flight() - 1)
        return min(TIMEOUT_CAP, self._timeout + TIMEOUT_PER_COMMAND * others)

    # ------------------------------------------------------------------ starting a command

    async def submit(self, command: Command, nodepools: Mapping[str, NodePool]) -> str:
        """Start `command`: record it, taint, create its replacements; then queue it.

        Returns the command's id. Raises CommandFailedError (after rolling back) when a write
        fails; nothing of the command is left behind then.
        """
        command_id = secrets.token_hex(6)
        names = command.names
        claims = [self._view.nodeclaim(n) for n in names]
        live = [c for c in claims if c is not None and c.metadata.deletion_timestamp is None]
        if len(live) != len(names):
            msg = f"disruption command {command_id}: a candidate is gone or being deleted"
            raise CommandFailedError(msg)
        try:
            replacements = self._replacements(command, nodepools, command_id)
        except PlanError as error:
            msg = f"disruption command {command_id}: {error}"
            raise CommandFailedError(msg) from error
        meta = _Meta(
            method=command.method,
            reason=command.reason.value,
            decision=command.decision.value,
            nodepools={c.name: c.nodepool for c in command.candidates},
            savings=_savings(command),
        )
        self._meta[command_id] = meta
        self._busy.update(names)
        # Until its last replacement is created, the command's own writes wake its key; the
        # reconcile must not judge a command that is still being written.
        self._starting.add(command_id)
        log.info(
            "disrupting node(s)",
            extra={
                "command-id": command_id,
                "method": command.method,
                "reason": meta.reason,
                "decision": meta.decision,
                "nodeclaims": ", ".join(names),
                "replacements": len(replacements),
            },
        )
        started = self._clock.now()
        created: list[str] = []
        try:
            # Each command is a trace of its own, linked to the disruption pass that chose it.
            with self._telemetry.tracer.start_as_current_span(
                "disruption command",
                context=Context(),
                links=current_link(),
                attributes={
                    "karpy.command_id": command_id,
                    "karpy.method": command.method,
                    "karpy.reason": meta.reason,
                    "karpy.decision": meta.decision,
                    "karpy.nodeclaims": list(names),
                    "karpy.replacements": len(replacements),
                    **(
                        {"karpy.savings_per_hour": meta.savings} if meta.savings is not None else {}
                    ),
                },
            ) as span:
                parent = traceparent(span)
                for claim in live:
                    await self._mark(claim, command_id, len(replacements), meta, started, parent)
                for claim in live:
                    try:
                        await self._taint(claim)
                    except ConflictError:
                        # The Node changed since the view's copy; the command's reconcile taints
                        # it before anything else, retried by the runner until it holds.
                        log.debug("disrupted taint conflicted", extra={"command-id": command_id})
                await self._create(
                    [with_origin(c, span) for c in replacements], created, meta.reason.lower()
                )
        except KubeError as error:
            log.error(
                "failed to start disruption command",
                extra={"command-id": command_id, "error": str(error)},
            )
            self._abandoned[command_id] = (str(error), names, tuple(created))
            try:
                await self._rollback(
                    command_id, why=str(error), candidates=names, replacements=created
                )
            except ConflictError:
                # A Node changed under the untaint: the runner finishes the rollback.
                self._keys.send(command_id)
            finally:
                self._busy.difference_update(names)
                self._starting.discard(command_id)
            msg = f"disruption command {command_id}: {error}"
            raise CommandFailedError(msg) from error
        self._started[command_id] = (frozenset(names), frozenset(created))
        self._starting.discard(command_id)
        if created:
            for claim in live:
                await self._event(
                    claim,
                    REASON_LAUNCHING,
                    f"Launching NodeClaim: {meta.reason}/{meta.decision.capitalize()}",
                )
        self._busy.difference_update(names)
        self._keys.send(command_id)
        return command_id

    def _replacements(
        self, command: Command, nodepools: Mapping[str, NodePool], command_id: str
    ) -> list[NodeClaim]:
        """The NodeClaims to create, annotated with the command's id; PlanError when one of
        them cannot be built (the command then does not start)."""
        made: list[NodeClaim] = []
        for plan in command.replacements:
            pool = nodepools.get(plan.nodepool)
            if pool is None:
                msg = f"NodePool {plan.nodepool} not found for a replacement"
                raise CommandFailedError(msg)
            made.append(nodeclaim_from_plan(plan, pool))
        # A static NodePool's replacement comes from the candidate's own pool template.
        for candidate in command.candidates[: command.from_template]:
            pool = nodepools.get(candidate.nodepool)
            if pool is None:
                msg = f"NodePool {candidate.nodepool} not found for a replacement"
                raise CommandFailedError(msg)
            made.append(nodeclaim_from_template(pool))
        return [_annotated(c, command_id) for c in made]

    async def _mark(
        self,
        claim: NodeClaim,
        command_id: str,
        replacements: int,
        meta: _Meta,
        started: datetime.datetime,
        parent: str | None,
    ) -> None:
        name = claim.metadata.name or ""
        record = commands.record(
            command_id, replacements=replacements, started=started, traceparent=parent
        )
        for attempt in range(MARK_ATTEMPTS):
            try:
                wanted = attrs.evolve(claim, metadata=with_annotations(claim.metadata, record))
                marked = await self._client.patch(NODECLAIMS, claim, wanted, optimistic=True)
                message = f"{meta.method}: {meta.decision}"
                updated = set_condition(
                    marked,
                    ConditionType.DISRUPTION_REASON,
                    ConditionStatus.TRUE,
                    reason=meta.reason,
                    message=message,
                    now=self._clock.now(),
                )
                if updated is not marked:
                    await self._client.patch_status(
                        NODECLAIMS,
                        name,
                        updated.status,
                        previous=marked.status,
                        resource_version=marked.metadata.resource_version,
                    )
                return
            except ConflictError:
                # Another controller wrote the NodeClaim since the pass read it (its status
                # conditions move often under load). The mark is still right for the same
                # NodeClaim unless it is going or another command holds it; otherwise the
                # conflict stands and the command is rolled back.
                fresh = await self._client.get(NODECLAIMS, name)
                same = fresh.metadata.uid == claim.metadata.uid
                held = commands.command_of(fresh) not in (None, command_id)
                if (
                    attempt == MARK_ATTEMPTS - 1
                    or not same
                    or held
                    or fresh.metadata.deletion_timestamp is not None
                ):
                    raise
                claim = fresh

    async def _taint(self, claim: NodeClaim) -> None:
        node = self._view.node(claim.status.node_name or "") if claim.status.node_name else None
        if node is None:
            return
        await _write_taint(self._client, node, present=True)

    async def _create(
        self, replacements: Sequence[NodeClaim], created: list[str], reason: str
    ) -> None:
        """Create `replacements`, appending each name to `created` as soon as it exists; they
        count as created for the command's disruption reason, as Karpenter's do."""
        for claim in replacements:
            stored = await self._client.create_once(NODECLAIMS, claim)
            name = stored.metadata.name or ""
            created.append(name)
            pool = stored.metadata.labels.get(wk.LABEL_NODEPOOL, "")
            self._telemetry.metrics.nodeclaims_created_total.add(1, created_labels(stored, reason))
            log.info("created nodeclaim", extra={"nodeclaim": name, "nodepool": pool})

    # ------------------------------------------------------------------ finishing a command

    async def reconcile(self, command_id: str) -> Result:
        """Finish, wait on, or roll back the command `command_id` as the API server shows it."""
        if command_id in self._starting:
            return Result(requeue_after=VISIBILITY_RECHECK)
        abandoned = self._abandoned.get(command_id)
        if abandoned is not None:
            why, candidates, replacements = abandoned
            await self._rollback(
                command_id, why=why, candidates=candidates, replacements=replacements
            )
            return Result()
        found = commands.in_flight(self._view.nodeclaims()).get(command_id)
        if not self._visible(command_id, found):
            return Result(requeue_after=VISIBILITY_RECHECK)
        if found is None or not found.candidates:
            self._forget(command_id)
            return Result()
        if not found.complete:
            with self._step("roll back disruption command", command_id, found):
                await self._rollback(
                    command_id,
                    why="a replacement nodeclaim is missing (never created, or its launch failed)",
                )
            return Result()
        for claim in found.candidates:
            await self._taint(claim)
        waiting = [c for c in found.replacements if not claim_is_true(c, ConditionType.INITIALIZED)]
        if waiting:
            started = found.started or self._clock.now()
            elapsed = (self._clock.now() - started).total_seconds()
            limit = self.timeout()
            if elapsed > limit:
                with self._step("roll back disruption command", command_id, found):
                    await self._rollback(
                        command_id, why=f"replacements not initialized within {limit:.0f}s"
                    )
                return Result()
            for claim in found.candidates:
                await self._event(
                    claim, REASON_WAITING, "Waiting on readiness to continue disruption"
                )
            return Result(requeue_after=WAIT_RECHECK)
        with self._step("delete disruption candidates", command_id, found):
            await self._delete(command_id, found.candidates)
        return Result()

    def _step(
        self, name: str, command_id: str, found: commands.InFlight
    ) -> AbstractContextManager[Span]:
        """A span for the end of command `command_id`, in the command's own trace (its
        candidates carry the command's traceparent, so this holds after a restart too), linked
        to the reconcile that runs it."""
        parent = remote_parent(found.traceparent)
        return self._telemetry.tracer.start_as_current_span(
            name,
            context=parent,
            links=current_link() if parent is not None else None,
            attributes={
                "karpy.command_id": command_id,
                "karpy.nodeclaims": [c.metadata.name or "" for c in found.candidates],
            },
        )

    def _visible(self, command_id: str, found: commands.InFlight | None) -> bool:
        """Whether the view shows every write this process made for `command_id` (always true
        for a command found on start). Gives up waiting after VISIBILITY_TIMEOUT seconds."""
        started = self._started.get(command_id)
        if started is None:
            return True
        candidates, replacements = started
        shown_candidates = (
            set()
            if found is None
            else {c.metadata.name or "" for c in (*found.candidates, *found.removed)}
        )
        shown_replacements = (
            set() if found is None else {c.metadata.name or "" for c in found.replacements}
        )
        if candidates <= shown_candidates and replacements <= shown_replacements:
            del self._started[command_id]
            return True
        waited = self._waited.get(command_id, 0.0) + VISIBILITY_RECHECK
        self._waited[command_id] = waited
        if waited >= VISIBILITY_TIMEOUT:
            del self._started[command_id]
            return True
        return False

    async def _delete(self, command_id: str, candidates: Iterable[NodeClaim]) -> None:
        meta = self._meta.get(command_id)
        for claim in candidates:
            name = claim.metadata.name or ""
            reason = _reason(claim) or (meta.reason if meta else "")
            decision = meta.decision.capitalize() if meta else ""
            await self._event(
                claim,
                REASON_TERMINATING,
                f"Disrupting NodeClaim: {reason}" + (f"/{decision}" if decision else ""),
            )
            try:
                await self._client.delete(NODECLAIMS, name)
            except NotFoundError:
                continue
            self._telemetry.metrics.nodeclaims_disrupted_total.add(
                1, disrupted_labels(claim, reason.lower())
            )
            log.info(
                "deleted nodeclaim",
                extra={"command-id": command_id, "nodeclaim": name, "reason": reason},
            )
        if meta is not None and meta.savings is not None:
            self._telemetry.metrics.disruption_savings_per_hour.add(
                meta.savings, {"reason": meta.reason.lower(), "decision": meta.decision}
            )
        self._forget(command_id)

    def _forget(self, command_id: str) -> None:
        self._meta.pop(command_id, None)
        self._abandoned.pop(command_id, None)
        self._started.pop(command_id, None)
        self._waited.pop(command_id, None)

    # ------------------------------------------------------------------ rolling back

    async def _rollback(
        self,
        command_id: str,
        *,
        why: str,
        candidates: Iterable[str] = (),
        replacements: Iterable[str] = (),
    ) -> None:
        """Undo `command_id`: delete its replacements that never initialized, untaint and
        unmark its candidates. `candidates` and `replacements` name objects this process wrote
        that the view may not show yet."""
        log.warning("rolling back disruption command", extra={"command-id": command_id, "why": why})
        meta = self._meta.get(command_id)  # None for a command a previous process started
        self._telemetry.metrics.disruption_queue_failures_total.add(
            1,
            {
                "decision": meta.decision if meta is not None else "replace",
                "reason": meta.reason.lower() if meta is not None else "",
                "consolidation_type": (
                    Kind(meta.method).consolidation_type if meta is not None else ""
                ),
            },
        )
        claims = self._view.nodeclaims()
        doomed = set(replacements)
        for claim in claims:
            if commands.replacement_for(claim) != command_id:
                continue
            if claim.metadata.deletion_timestamp is None and not claim_is_true(
                claim, ConditionType.INITIALIZED
            ):
                doomed.add(claim.metadata.name or "")
        for name in sorted(doomed):
            with contextlib.suppress(NotFoundError):
                await self._client.delete(NODECLAIMS, name)
        names = set(candidates)
        names.update(c.metadata.name or "" for c in claims if commands.command_of(c) == command_id)
        for name in sorted(names):
            await self._unmark(name, command_id, why)
        self._forget(command_id)

    async def _unmark(self, name: str, command_id: str, why: str) -> None:
        claim = self._view.nodeclaim(name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            return
        if claim.status.node_name:
            node = self._view.node(claim.status.node_name)
            if node is not None and node.metadata.deletion_timestamp is None:
                await _write_taint(self._client, node, present=False)
        if commands.command_of(claim) not in (None, command_id):
            return
        # Annotations are a map: a merge patch removes exactly these keys, no version needed.
        # The view may not show the marks yet, so the patch starts from a copy that has them
        # all and removes each one whether or not the view shows it.
        marks = {k: claim.metadata.annotations.get(k, "") for k in commands.CANDIDATE_ANNOTATIONS}
        marked = attrs.evolve(claim, metadata=with_annotations(claim.metadata, marks))
        cleared = dict.fromkeys(commands.CANDIDATE_ANNOTATIONS)
        without_marks = attrs.evolve(claim, metadata=with_annotations(claim.metadata, cleared))
        try:
            unmarked = await self._client.patch(NODECLAIMS, marked, without_marks)
        except NotFoundError:
            return
        if get_condition(unmarked, ConditionType.DISRUPTION_REASON) is not None:
            status = attrs.evolve(
                unmarked.status,
                conditions=tuple(
                    c
                    for c in unmarked.status.conditions
                    if c.type != ConditionType.DISRUPTION_REASON
                ),
            )
            await self._client.patch_status(
                NODECLAIMS,
                name,
                status,
                previous=unmarked.status,
                resource_version=unmarked.metadata.resource_version,
            )
        await self._event(unmarked, REASON_ROLLBACK, f"Disruption rolled back: {why}")

    async def _event(self, claim: NodeClaim, reason: str, message: str) -> None:
        now = asyncio.get_running_loop().time()
        await self._recorder.publish(events.on_nodeclaim(claim, reason, message), now=now)
        node = self._view.node(claim.status.node_name) if claim.status.node_name else None
        if node is not None:
            await self._recorder.publish(events.on_node(node, reason, message), now=now)

    # ------------------------------------------------------------------ tidying

    async def tidy(self) -> None:
        """Remove stale disrupted taints and finished replacement annotations, and adopt any
        recorded command that is not queued. Runs before every disruption pass."""
        claims = self._view.nodeclaims()
        for node in commands.stale_taints(self._view.nodes(), claims, self._busy):
            log.info("removing stale disrupted taint", extra={"node": node.metadata.name})
            await _write_taint(self._client, node, present=False)
        for claim in commands.finished_replacements(claims):
            finished = {wk.ANNOTATION_REPLACEMENT_FOR: None}
            done = attrs.evolve(claim, metadata=with_annotations(claim.metadata, finished))
            try:
                await self._client.patch(NODECLAIMS, claim, done)
            except NotFoundError:
                continue
        self.adopt()


def _savings(command: Command) -> float | None:
    """The price per hour `command` takes off: its candidates' (the offerings they run on)
    less its replacements' (the offerings they are planned at); None when a candidate's price
    is unknown or a replacement comes from a template, which has no price until it launches."""
    removed = candidates_price(command.candidates)
    if removed is None or command.from_template:
        return None
    return removed - math.fsum(plan.price for plan in command.replacements)


def _annotated(claim: NodeClaim, command_id: str) -> NodeClaim:
    annotations = {**claim.metadata.annotations, wk.ANNOTATION_REPLACEMENT_FOR: command_id}
    return attrs.evolve(claim, metadata=attrs.evolve(claim.metadata, annotations=annotations))


def _reason(claim: NodeClaim) -> str | None:
    condition = get_condition(claim, ConditionType.DISRUPTION_REASON)
    return condition.reason if condition is not None else None


async def _write_taint(client: KubeClient, node: Node, *, present: bool) -> None:
    """Put karpenter.sh/disrupted on (or take it off) `node`, optimistic on the version read.

    A Node's status changes often (heartbeats), so a conflict is likely now and then: it is
    raised, and the orchestration queue's runner reconciles the command again (`requeue_on`),
    against the view's newer copy; what the command wrote so far stays on the API server.
    """
    patch = taint_patch(node.spec.taints, DISRUPTED_TAINT, present=present)
    if not patch:
        return
    with contextlib.suppress(NotFoundError):
        await client.merge_patch(
            NODES, node.metadata.name or "", patch, resource_version=node.metadata.resource_version
        )


def _commands_of_claim(event: WatchEvent[NodeClaim]) -> Iterable[str]:
    """The commands a changed NodeClaim belongs to: as a candidate, or as a replacement."""
    claim = event.item.obj
    return [
        command
        for command in (commands.command_of(claim), commands.replacement_for(claim))
        if command is not None
    ]
