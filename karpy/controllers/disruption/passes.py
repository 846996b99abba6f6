"""One disruption pass over one read of the cluster: what the controller acts on and what
`karpy explain node` reports, computed by the same two functions.

`read` takes one consistent read of cluster state through the ClusterView and translates it for
the pure core (karpy.controllers.disruption.facts); `decide` asks the provider for instance types
when a candidate needs them, prices the NodeClaims, builds the scheduling simulation over the
same read (karpy.controllers.disruption.simulation) and runs the core's pass
(karpy.core.disruption.decision.disrupt) off the event loop. The controller then acts on the
result (events, validation, the orchestration queue); `karpy explain node` prints it.

The two differ only in what the running controller knows and a one-off command does not: which
NodeClaims the orchestration queue is starting a command for right now, the provisioner's live
nominations, and what earlier passes found (`Memo`, Karpenter's "consolidated" mark).

CapacityBuffers' virtual pods enter the read bound to the nodes whose room they hold
(karpy.state.buffers.hold_room): such a node is not empty, and removing it must find that room
elsewhere, exactly as for its real pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

import attrs
from opentelemetry.trace import Tracer

from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.errors import CloudProviderError
from karpy.cloudprovider.protocol import CloudProvider
from karpy.controllers.disruption import facts
from karpy.controllers.disruption.simulation import simulators
from karpy.core.disruption.candidates import Candidate, NodeFacts, PoolDisruption, priced, select
from karpy.core.disruption.decision import Memo, PassResult, disrupt, fingerprint
from karpy.core.disruption.methods import Method, Reason
from karpy.core.instancetypes import InstanceType
from karpy.core.scheduling.options import SchedulerOptions
from karpy.kube.kinds import PODDISRUPTIONBUDGETS
from karpy.state.buffers import hold_room
from karpy.state.snapshot import ClusterObjects, SnapshotKinds, read_cluster
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class Read:
    """One read of cluster state at `now` (UTC epoch seconds), translated for the core:
    every NodeClaim's facts (not yet priced), the live NodePools' disruption settings, and the
    live NodePools themselves (replacements are built from them)."""

    now: float
    objects: ClusterObjects
    claims: tuple[NodeClaim, ...]
    facts: tuple[NodeFacts, ...]
    pools: Mapping[str, PoolDisruption]
    live: Mapping[str, NodePool]


def _never(_name: str) -> bool:
    return False


async def read(
    view: ClusterView,
    *,
    now: float,
    nomination_window: float,
    min_improvement: float = 0.0,
    snapshot_kinds: SnapshotKinds | None = None,
    busy: Collection[str] = (),
    nominated: Callable[[str], bool] = _never,
    virtual: Sequence[Pod] = (),
    scheduler: SchedulerOptions | None = None,
) -> Read:
    """One read of cluster state through `view`. `busy` names the NodeClaims the orchestration
    queue is starting a command for; `nominated(name)` asks the provisioner's nominations;
    `virtual` are the CapacityBuffers' pods, bound where their room is (`scheduler` places
    them: a solve, run off the event loop over the objects read at one instant)."""
    objects = read_cluster(view, optional=snapshot_kinds)
    pdbs = view.objects(PODDISRUPTIONBUDGETS) if view.informs(PODDISRUPTIONBUDGETS) else []
    if virtual:
        objects = await asyncio.to_thread(hold_room, objects, virtual, scheduler)
    claims = tuple(objects.nodeclaims)
    node_facts = facts.node_facts(
        claims,
        objects.nodes,
        objects.pods,
        pdbs,
        now=now,
        nomination_window=nomination_window,
        busy=busy,
        nominated=nominated,
    )
    return Read(
        now=now,
        objects=objects,
        claims=claims,
        facts=tuple(node_facts),
        pools=facts.pools(objects.nodepools, min_improvement=min_improvement),
        live={p.metadata.name or "": p for p in objects.nodepools},
    )


@attrs.frozen(kw_only=True)
class Decided:
    """A pass decided over a read: the core's result, and the instance types it was priced and
    simulated with (validation reuses them)."""

    result: PassResult
    instance_types: Mapping[str, Sequence[InstanceType]]


async def decide(
    state: Read,
    *,
    cloudprovider: CloudProvider | None,
    methods: Sequence[Method],
    scheduler: SchedulerOptions,
    provider_timeout: float,
    memo: Memo | None = None,
    tracer: Tracer | None = None,
) -> Decided:
    """The pass over `state`: decided, not acted on. With `memo`, consolidation is skipped on a
    cluster it already found nothing in, candidates it already simulated are not simulated
    again, and what this pass found is remembered; `tracer` traces the decision."""
    selection = select(state.facts, state.pools, now=state.now)
    types = await instance_types(
        cloudprovider, selection.candidates, state.live, per_call=provider_timeout
    )
    node_facts = priced(state.facts, types)
    simulate, relaxed = simulators(state.objects, types, scheduler)
    settled = False
    if memo is not None:
        current = fingerprint(node_facts, state.pools, selection, now=state.now)
        settled = memo.settled(hash((current, _inputs(state.objects))), state.now)
        if settled:
            log.debug("skipping consolidation: cluster unchanged since it found nothing")
            methods = tuple(m for m in methods if m.reason is not Reason.UNDERUTILIZED)
    span = (
        tracer.start_as_current_span("disruption pass")
        if tracer is not None
        else contextlib.nullcontext()
    )
    with span as traced:
        result = await asyncio.to_thread(
            disrupt,
            node_facts,
            state.pools,
            now=state.now,
            simulate=simulate,
            methods=methods,
            relaxed=relaxed,
            cleared=memo.cleared if memo is not None else frozenset(),
        )
        outcome = result.outcome
        if traced is not None:
            traced.set_attribute("karpy.candidates", len(result.selection.candidates))
            traced.set_attribute("karpy.method", str(outcome.method or ""))
            traced.set_attribute("karpy.commands", len(outcome.commands))
            traced.set_attribute("karpy.consolidation_skipped", settled)
    if memo is not None and not settled:
        memo.record(outcome, state.now)
    return Decided(result=result, instance_types=types)


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
