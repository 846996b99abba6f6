"""The orchestration queue on the real local cluster: replace before remove, roll back on a lost
replacement, and after a restart finish or roll back every command recorded on the API server —
no orphaned taint, no orphaned replacement, no candidate deleted before its replacement is
Initialized. Nothing launches NodeClaims here: the tests play the lifecycle controller's part
by marking replacements Initialized (or deleting them, as a failed launch does).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.nodepool import Budget, Disruption, NodePool
from karpy.controllers.disruption import commands
from karpy.controllers.disruption.queue import OrchestrationQueue
from karpy.core.disruption.candidates import Candidate, NodeFacts, PoolDisruption
from karpy.core.disruption.methods import Command, Kind, Reason
from karpy.core.requirements import Operator, Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.scheduling.results import NodeClaimPlan
from karpy.kube.errors import ConflictError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES
from karpy.kube.resources import ResourceKind
from karpy.localcluster import ClusterInfo
from karpy.manager import Manager
from karpy.runtime.options import ReconcileOptions
from karpy.state.conditions import get_condition
from karpy.state.view import ClusterView
from tests.cluster.disruption.harness import Env, environment
from tests.support.metrics import total
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

HELD = Disruption(consolidate_after="Never", budgets=(Budget(nodes="100%"),))
"""No pass of the env's controller acts on these pools: the tests drive the queue directly."""
DISRUPTED = {"key": wk.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}


def _plan(pool: str) -> NodeClaimPlan:
    return NodeClaimPlan(
        name="replacement",
        nodepool=pool,
        requirements=Requirements((Requirement.new(wk.LABEL_OS, Operator.IN, (wk.OS_LINUX,)),)),
        instance_types=("small",),
        zones=(),
        capacity_types=(),
        requests=Resources(),
        pods=(),
        price=0.1,
    )


def _command(env: Env, claim: str, pool: str, *, replacements: int = 1) -> Command:
    stored = env.state.store(NODECLAIMS).get(claim)
    assert stored is not None
    facts = NodeFacts(nodeclaim=claim, node=stored.status.node_name, nodepool=pool, created_at=0)
    candidate = Candidate(facts=facts, pool=PoolDisruption(consolidate_after=None), cost=1.0)
    return Command(
        method=Kind.DRIFT,
        reason=Reason.DRIFTED,
        candidates=(candidate,),
        replacements=tuple(_plan(pool) for _ in range(replacements)),
    )


async def _nodepools(env: Env) -> dict[str, NodePool]:
    return {p.metadata.name or "": p for p in env.state.store(NODEPOOLS).objects()}


async def _replacement(env: Env) -> NodeClaim:
    """The replacement NodeClaim the queue made, once cluster state shows it."""

    async def made() -> list[NodeClaim]:
        return [c for c in env.state.store(NODECLAIMS).objects() if commands.replacement_for(c)]

    (found,) = await eventually(made, within=10, interval=0.05, what="a replacement nodeclaim")
    return found


async def _tainted(env: Env, node: str) -> bool:
    stored = await env.kube.get(NODES, node)
    return any(t.key == wk.TAINT_DISRUPTED_KEY for t in stored.spec.taints)


async def test_candidates_are_deleted_only_after_their_replacement_initializes(
    cluster_info: ClusterInfo,
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        claim, node = await env.node_with_claim(pool)
        command_id = await env.queue.submit(_command(env, claim, pool), await _nodepools(env))
        made = await _replacement(env)
        assert commands.replacement_for(made) == command_id
        # A taint write that conflicts at the start is made by the command's first reconcile.
        assert await eventually(lambda: _tainted(env, node), within=10, interval=0.05)
        marked = await env.kube.get(NODECLAIMS, claim)
        assert commands.command_of(marked) == command_id
        reason = get_condition(marked, ConditionType.DISRUPTION_REASON)
        assert reason is not None
        assert reason.status is ConditionStatus.TRUE
        assert reason.reason == "Drifted"
        await _checked_twice(env)  # while the replacement is not ready
        assert await env.exists(claim)

        await env.initialize(made.metadata.name or "", "replacement-node")

        async def candidate_gone() -> bool:
            return not await env.exists(claim)

        await eventually(candidate_gone, within=15, interval=0.1)


async def test_a_conflicting_taint_keeps_the_command_and_its_reconcile_taints_the_node(
    cluster_info: ClusterInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Node that changed since the view's copy (a heartbeat, say) makes the taint write
    conflict: the command is not rolled back for it, and its reconcile taints the node."""
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        claim, node = await env.node_with_claim(pool)
        write = env.kube.merge_patch
        conflicts: list[str] = []

        async def conflicting_once(
            kind: ResourceKind[Any], name: str, patch: Mapping[str, Any], **kwargs: Any
        ) -> Any:
            if kind is NODES and not conflicts:
                conflicts.append(name)
                raise ConflictError(409, "Conflict", "the object has been modified")
            return await write(kind, name, patch, **kwargs)

        monkeypatch.setattr(env.kube, "merge_patch", conflicting_once)
        command_id = await env.queue.submit(_command(env, claim, pool), await _nodepools(env))
        assert conflicts == [node]
        made = await _replacement(env)
        assert commands.replacement_for(made) == command_id
        marked = await env.kube.get(NODECLAIMS, claim)
        assert commands.command_of(marked) == command_id

        async def tainted() -> bool:
            return await _tainted(env, node)

        await eventually(tainted, within=15, interval=0.1)


async def test_a_conflicting_mark_is_written_again_on_a_fresh_read(
    cluster_info: ClusterInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NodeClaim some other controller wrote since the pass read it makes the command's mark
    conflict: the queue reads it again and marks that, instead of rolling the command back
    (under load most marks conflicted, and each rollback wasted a launched replacement)."""
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        claim, _ = await env.node_with_claim(pool)
        write = env.kube.patch
        conflicts: list[str] = []

        async def conflicting_once(kind: ResourceKind[Any], *args: Any, **kwargs: Any) -> Any:
            if kind is NODECLAIMS and not conflicts:
                conflicts.append(claim)
                raise ConflictError(409, "Conflict", "the object has been modified")
            return await write(kind, *args, **kwargs)

        monkeypatch.setattr(env.kube, "patch", conflicting_once)
        command_id = await env.queue.submit(_command(env, claim, pool), await _nodepools(env))
        assert conflicts == [claim]
        made = await _replacement(env)
        assert commands.replacement_for(made) == command_id
        marked = await env.kube.get(NODECLAIMS, claim)
        assert commands.command_of(marked) == command_id


async def test_a_replacement_that_goes_away_rolls_the_command_back(
    cluster_info: ClusterInfo,
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        claim, node = await env.node_with_claim(pool)
        await env.queue.submit(_command(env, claim, pool), await _nodepools(env))
        made = await _replacement(env)
        await env.kube.delete(NODECLAIMS, made.metadata.name or "")  # a failed launch

        async def unmarked() -> bool:
            stored = await env.kube.get(NODECLAIMS, claim)
            return (
                commands.command_of(stored) is None
                and get_condition(stored, ConditionType.DISRUPTION_REASON) is None
                and not await _tainted(env, node)
            )

        await eventually(unmarked, within=15, interval=0.1)
        assert await env.exists(claim)
        # Karpenter's count of commands the queue failed.
        failed = (
            "karpenter_voluntary_disruption_queue_failures_total"
            '{consolidation_type="",decision="replace",reason="drifted"} 1.0'
        )
        assert failed in env.telemetry.prometheus_text()


@contextlib.asynccontextmanager
async def _restarted(env: Env) -> AsyncIterator[OrchestrationQueue]:
    """A second queue, as a restarted process builds it, over the same cluster state."""
    queue = OrchestrationQueue(
        env.kube,
        ClusterView(env.state),
        clock=env.clock,
        recorder=Recorder(env.kube, env.clock),
        telemetry=env.telemetry,
    )
    loop = Manager(
        telemetry=env.telemetry, backoff=ReconcileOptions().backoff, synced=env.state.wait_synced
    ).loop(queue.spec())
    task = asyncio.create_task(loop.run())
    try:
        yield queue
    finally:
        loop.stop()
        await task


async def _checked_twice(env: Env) -> None:
    """Wait until the queue has looked at its commands twice more (a restarted queue shares
    `env`'s telemetry): what it would do with them, it has done."""
    name = "controller_runtime_reconcile_total"
    start = total(env.telemetry, name, controller=OrchestrationQueue.name)

    async def checked() -> bool:
        return total(env.telemetry, name, controller=OrchestrationQueue.name) >= start + 2

    await eventually(checked, within=30, interval=0.05)


def _record(command_id: str, replacements: int, env: Env) -> dict[str, str]:
    return commands.record(command_id, replacements=replacements, started=env.clock.now())


async def test_after_a_restart_a_command_with_its_replacement_is_finished(
    cluster_info: ClusterInfo,
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        claim, _ = await env.node_with_claim(
            pool, annotations=_record("c-finish", 1, env), taints=[DISRUPTED]
        )
        replacement = await env.claim(pool, annotations={wk.ANNOTATION_REPLACEMENT_FOR: "c-finish"})
        async with _restarted(env):
            await _checked_twice(env)
            assert await env.exists(claim), "not before the replacement is Initialized"
            await env.initialize(replacement, "replacement-node")

            async def candidate_gone() -> bool:
                return not await env.exists(claim)

            await eventually(candidate_gone, within=15, interval=0.1)
        assert await env.exists(replacement)


async def test_after_a_restart_a_command_missing_a_replacement_is_rolled_back(
    cluster_info: ClusterInfo,
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        claim, node = await env.node_with_claim(
            pool, annotations=_record("c-undo", 2, env), taints=[DISRUPTED]
        )
        half = await env.claim(pool, annotations={wk.ANNOTATION_REPLACEMENT_FOR: "c-undo"})
        async with _restarted(env):

            async def undone() -> bool:
                stored = await env.kube.get(NODECLAIMS, claim)
                return (
                    commands.command_of(stored) is None
                    and not await _tainted(env, node)
                    and not await env.exists(half)
                )

            await eventually(undone, within=15, interval=0.1)
        assert await env.exists(claim)


async def test_a_stale_disrupted_taint_is_removed_and_a_finished_replacement_unmarked(
    cluster_info: ClusterInfo,
) -> None:
    async with environment(cluster_info) as env:
        pool = await env.pool(HELD)
        _, node = await env.node_with_claim(pool, taints=[DISRUPTED])
        done, _ = await env.node_with_claim(
            pool, annotations={wk.ANNOTATION_REPLACEMENT_FOR: "long-gone"}
        )
        env.clock.step(datetime.timedelta(seconds=1))
        await env.controller.reconcile_once()
        assert not await _tainted(env, node)
        stored = await env.kube.get(NODECLAIMS, done)
        assert commands.replacement_for(stored) is None
