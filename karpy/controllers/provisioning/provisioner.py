"""Karpenter's provisioner: turn a batch of pending pods into NodeClaims.

A singleton loop. The Batcher says a burst of provisionable pods has settled; the provisioner
then refuses to act until ClusterState is synced (deciding from a partial picture would launch
capacity that already exists), reads the cluster in one synchronous step (nodes, NodeClaims and
pending pods at the same instant), asks the CloudProvider for each live NodePool's instance
types, and lets the pure scheduling core solve. Pods the core put on existing or in-flight
capacity get a `Nominated` event; pods it could not place get a `FailedScheduling` event with
the core's one-line explanation (deduplicated, so a pod is not told the same thing every
batch); the new NodeClaims are created in parallel. Launching them is the NodeClaim lifecycle
controller's job.

Pods placed on a NodeClaim created here are held back from later batches until that NodeClaim
launches (from then on it is in-flight capacity in the snapshot), is deleted, or, if the
informer has not shown it yet, until the nomination window passes: otherwise the next batch,
before launch, would create a second NodeClaim for the same pods. That memory dies with the
process, so it is only a shortcut: cluster state is not synced while any NodeClaim is still
launching (the provisioner waits), and an in-flight NodeClaim is capacity in the snapshot, so a
pass after a restart places pods on the capacity already asked for instead of asking again.

A static NodePool (spec.replicas) keeps its own count (karpy.controllers.static): pending pods
may be placed on its nodes, launched or in flight, but the solve never plans a NodeClaim on it.

Pods placed on existing or in-flight nodes are recorded as that node's nomination in cluster
state (karpy.state.nominations), which disruption reads: such a node is not empty while its pods
wait for kube-scheduler. While any pod is pending the provisioner passes again every
PENDING_RECHECK seconds, so a nomination is renewed as long as its pods are pending and still fit;
each pass that looked at the pending pods is counted (`NodeNominations.passed`), and a nomination
outlives its window until a later pass has looked again (the provisioner may be held up waiting
for cluster state to sync, after an apiserver outage, while disruption is about to resume).

CapacityBuffers (FEATURE_GATES=CapacityBuffer=true) add their virtual pods to every pass
(karpy.state.buffers): solved behind the real pending pods (karpy.core.buffers), so a real pod
takes free room first, and placed like them — on free room, else on new NodeClaims that are held
from later passes as real pods' are — but never nominated, evented or counted as pending. While
any buffer holds room the provisioner passes every PENDING_RECHECK seconds, so room a real pod
took is launched again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Final

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from karpy.apis.autoscaling.capacitybuffer import CapacityBuffer
from karpy.apis.kube.pod import Pod as KubePod
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import ConditionType as NodePoolCondition
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.errors import CloudProviderError
from karpy.cloudprovider.protocol import CloudProvider
from karpy.controllers.provisioning import events
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.deleting import (
    deleted_nodeclaim,
    deleting_node,
    pods_of_deleting_nodes,
)
from karpy.controllers.provisioning.latency import DecisionLatency
from karpy.controllers.provisioning.trigger import provisionable_pods
from karpy.core.buffers import solve_with_buffers
from karpy.core.instancetypes import InstanceType
from karpy.core.scheduling.options import SchedulerOptions
from karpy.core.scheduling.results import NodeClaimPlan, Results
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, KubeError
from karpy.kube.events import Event, Recorder
from karpy.kube.kinds import CAPACITYBUFFERS, NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.kube.watch import Event as WatchEvent
from karpy.manager import Singleton, Watch
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.buffers import BufferPods, is_virtual
from karpy.state.nominations import NodeNominations
from karpy.state.plans import (
    PlanError,
    nodeclaim_from_plan,
    summarize_instance_types,
)
from karpy.state.pods import is_provisionable
from karpy.state.schedulable import SchedulableTimes
from karpy.state.series import PROVISIONED_REASON, created_labels
from karpy.state.snapshot import ClusterObjects, SnapshotKinds, build_snapshot, read_cluster
from karpy.state.tracecontext import with_origin
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

NOT_SYNCED_REQUEUE: Final = 1.0
"""Seconds before a batch that found cluster state unsynced is tried again."""
PENDING_RECHECK: Final = 10.0
"""Seconds before pods a pass could not place are tried again although nothing they watch has
changed (Karpenter requeues provisionable pods until they are placed): what held them back may
be outside cluster state, such as a NodeClass becoming Ready or capacity coming back."""
LOGGED_PODS: Final = 5
SPAN_PODS: Final = 500
"""Pods named on a provisioning batch's span (attribute `karpy.pod_names`); the count is exact."""
"""The NodePool event when its provider cannot list instance types (once per distinct error)."""


class Nominations:
    """Pods placed on NodeClaims this provisioner created that have not launched yet."""

    def __init__(self, window: float) -> None:
        self._window = window
        self._held: dict[str, tuple[str, float]] = {}

    def nominate(self, uids: Iterable[str], nodeclaim: str, *, now: float) -> None:
        for uid in uids:
            self._held[uid] = (nodeclaim, now)

    def holds(self, uid: str, claims: Mapping[str, NodeClaim], *, now: float) -> bool:
        """Whether `uid` waits for its NodeClaim; forgets the nomination once it no longer does."""
        entry = self._held.get(uid)
        if entry is None:
            return False
        name, since = entry
        claim = claims.get(name)
        waiting = (
            now - since < self._window
            if claim is None
            else claim.metadata.deletion_timestamp is None and not claim.status.allocatable
        )
        if not waiting:
            del self._held[uid]
        return waiting

    def retain(self, uids: Iterable[str]) -> None:
        """Forget pods not in `uids` (bound, deleted, or no longer pending)."""
        keep = set(uids)
        for uid in [u for u in self._held if u not in keep]:
            del self._held[uid]


class Provisioner:
    """The provisioning singleton: batch → snapshot → solve → events → create NodeClaims.

    Declared (`spec()`) as a singleton whose passes wait on the Batcher's window: the manager
    runs `reconcile_once()` (span, log fields, backoff on error) each time a window closes.
    """

    name: ClassVar[str] = "provisioning.provisioner"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        cloudprovider: CloudProvider,
        batcher: Batcher,
        recorder: Recorder,
        telemetry: Telemetry,
        scheduler: SchedulerOptions | None = None,
        snapshot_kinds: SnapshotKinds | None = None,
        nomination_window: float = 20.0,
        provider_timeout: float = 60.0,
        node_nominations: NodeNominations | None = None,
        schedulable: SchedulableTimes | None = None,
        clock: Clock | None = None,
        buffers: BufferPods | None = None,
    ) -> None:
        self._client = client
        self._buffers = buffers
        self._view = view
        self._provider = cloudprovider
        self._batcher = batcher
        self._recorder = recorder
        self._telemetry = telemetry
        self._scheduler = scheduler or SchedulerOptions()
        self._kinds = snapshot_kinds
        self._provider_timeout = provider_timeout
        self.nominations = Nominations(nomination_window)
        self.node_nominations = (
            node_nominations if node_nominations is not None else NodeNominations()
        )
        # A node nomination outlives the gap between two rechecks, so it lapses only once a
        # pass no longer places the pods there.
        self._node_window = max(nomination_window, 2 * PENDING_RECHECK)
        self._clock = clock or SystemClock()
        self._type_errors: dict[str, str] = {}
        self._latency = DecisionLatency(
            view,
            telemetry,
            self._clock,
            schedulable if schedulable is not None else SchedulableTimes(),
        )

    def spec(self) -> Singleton:
        """One pass each time the batch window closes; the window opens on a provisionable
        pod, a Node starting to delete (its pods need a home) or a NodeClaim gone (its
        nominated pods are pending again)."""
        return Singleton(
            name=self.name,
            reconcile=self.reconcile_once,
            watches=(
                Watch(kind=PODS, keys=provisionable_pods()),
                Watch(kind=NODES, keys=deleting_node),
                Watch(kind=NODECLAIMS, keys=deleted_nodeclaim),
                *(
                    (Watch(kind=CAPACITYBUFFERS, keys=_buffer_key),)
                    if self._buffers is not None
                    else ()
                ),
            ),
            gate=self._batcher,
            at_start=False,
            reads=(NODEPOOLS,),
            requeue_on=(ConflictError,),
        )

    async def reconcile_once(self) -> Result:
        """Provision once for every provisionable pod in cluster state.

        Side effects: Events on pods, NodeClaims created. Raises ProvisioningError when some
        NodeClaim could not be created (the Runner backs off; the pods are tried again).
        """
        if not self._view.synced:
            log.debug("waiting on cluster sync")
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        tracer = self._telemetry.tracer
        with tracer.start_as_current_span("provisioning batch") as span:
            with tracer.start_as_current_span("snapshot"):
                objects = read_cluster(self._view, optional=self._kinds)
                pending, waiting = self._pending(objects)
                virtual_uids = {p.metadata.uid for p in pending if is_virtual(p)}
                span.set_attribute("karpy.pods", len(pending) - len(virtual_uids))
                span.set_attribute("karpy.pod_names", _span_pod_names(pending))
                span.set_attribute("karpy.pod_uids", _span_pod_uids(pending))
                if not pending:
                    self.node_nominations.passed()
                    return _recheck(waiting)
                real = [p for p in pending if p.metadata.uid not in virtual_uids]
                if real:
                    log.info(
                        "found provisionable pod(s)",
                        extra={"pods": _pod_names(real), "count": len(real)},
                    )
                pools = [
                    p
                    for p in objects.nodepools
                    if p.metadata.deletion_timestamp is None and not _not_ready(p)
                ]
                types = await self._instance_types(pools)
                span.set_attribute("karpy.nodepools", sorted(types))
                span.set_attribute("karpy.instance_types", sum(len(t) for t in types.values()))
                build = build_snapshot(objects, pending=pending, instance_types=types)
            by_uid = {
                p.metadata.uid or "": p for p in pending if p.metadata.uid not in virtual_uids
            }
            refused: list[Event] = []
            for error in build.errors:
                if error.kind == "Pod" and error.uid in by_uid:
                    refused.append(events.failed_scheduling(by_uid[error.uid], error.message))
                else:
                    log.warning(
                        "ignoring object the scheduler cannot represent",
                        extra={"kind": error.kind, "object": error.name, "error": error.message},
                    )
            await self._publish(refused)
            self._telemetry.metrics.provisioner_ignored_pods.set(
                sum(1 for e in build.errors if e.kind == "Pod" and e.uid in by_uid)
            )
            if not build.pods:
                self.node_nominations.passed()
                span.set_attribute("karpy.unschedulable", len(refused))
                return _recheck(waiting)
            with tracer.start_as_current_span("solve") as solve_span:
                # A pass for buffers alone runs every PENDING_RECHECK: not worth an info line.
                log.log(
                    logging.INFO if len(build.pods) > len(virtual_uids) else logging.DEBUG,
                    "computing scheduling decision for provisionable pod(s)",
                    extra={
                        "pods": len(build.pods) - len(virtual_uids),
                        "buffer-pods": len(virtual_uids),
                        "nodepools": len(pools),
                    },
                )
                started = asyncio.get_running_loop().time()
                depth = self._telemetry.metrics.provisioner_queue_depth
                depth.set(len(build.pods))
                self._latency.solving(by_uid[p.uid] for p in build.pods if p.uid in by_uid)
                try:
                    results = await asyncio.to_thread(
                        solve_with_buffers,
                        build.snapshot,
                        [p for p in build.pods if p.uid not in virtual_uids],
                        [p for p in build.pods if p.uid in virtual_uids],
                        self._scheduler,
                    )
                finally:
                    depth.set(0)
                    self._latency.solved()
                self._telemetry.metrics.provisioner_scheduling_duration_seconds.record(
                    asyncio.get_running_loop().time() - started
                )
                self._telemetry.metrics.provisioner_batch_size.record(len(build.pods))
                solve_span.set_attribute("karpy.nodeclaims", len(results.nodeclaims))
                solve_span.set_attribute("karpy.pods", len(build.pods))
                solve_span.set_attribute("karpy.nominated", len(results.nominations))
                solve_span.set_attribute("karpy.unplaced", len(results.unplaced))
            self._nominate(results, by_uid)
            self._latency.placed(by_uid[uid] for uid in results.placed() if uid in by_uid)
            self.node_nominations.passed()
            await self._report(results, objects, by_uid)
            unschedulable = len(results.unplaced) + len(refused)
            self._telemetry.metrics.provisioner_unschedulable_pods.set(unschedulable)
            span.set_attribute("karpy.unschedulable", unschedulable)
            with tracer.start_as_current_span("launch") as launch_span:
                names = await self._launch(results.nodeclaims, pools, types, by_uid, launch_span)
            span.set_attribute("karpy.nodeclaims", names)
        return _recheck(waiting)

    def _pending(self, objects: ClusterObjects) -> tuple[list[KubePod], int]:
        """Provisionable pods and the reschedulable pods of deleting nodes, less the pods
        waiting for a NodeClaim created here to launch; and how many there are with those."""
        claims = {c.metadata.name or "": c for c in objects.nodeclaims}
        now = asyncio.get_running_loop().time()
        provisionable = [p for p in objects.pods if is_provisionable(p)]
        # Pods of deleting nodes count as pending now, so their new node launches during drain.
        provisionable.extend(pods_of_deleting_nodes(objects.nodes, objects.pods))
        # A buffer's virtual pods are pending on every pass, held like real ones while a
        # NodeClaim created for them launches.
        if self._buffers is not None:
            provisionable.extend(self._buffers.pods())
        self.nominations.retain(p.metadata.uid or "" for p in provisionable)
        pending = [
            p
            for p in provisionable
            if not self.nominations.holds(p.metadata.uid or "", claims, now=now)
        ]
        return pending, len(provisionable)

    async def _instance_types(self, pools: Sequence[NodePool]) -> dict[str, Sequence[InstanceType]]:
        found: dict[str, Sequence[InstanceType]] = {}

        async def one(pool: NodePool) -> None:
            name = pool.metadata.name or ""
            try:
                async with asyncio.timeout(self._provider_timeout):
                    found[name] = await self._provider.get_instance_types(pool)
            except (CloudProviderError, TimeoutError) as error:
                # The pool launches nothing this batch; the others still can.
                found[name] = ()
                await self._instance_types_failed(pool, str(error) or type(error).__name__)
                return
            if self._type_errors.pop(name, None) is not None:
                log.info("resolved instance types", extra={"nodepool": name})

        async with asyncio.TaskGroup() as group:
            for pool in pools:
                group.create_task(one(pool))
        return found

    async def _instance_types_failed(self, pool: NodePool, error: str) -> None:
        """Say it once per distinct error, at error level and as a NodePool event; a repeat is
        a debug line (a misconfigured pool would otherwise log every batch)."""
        name = pool.metadata.name or ""
        if self._type_errors.get(name) == error:
            log.debug("failed to get instance types", extra={"nodepool": name, "error": error})
            return
        self._type_errors[name] = error
        log.error("failed to get instance types", extra={"nodepool": name, "error": error})
        await self._recorder.publish(
            events.instance_types_failed(pool, error), now=asyncio.get_running_loop().time()
        )

    def _nominate(self, results: Results, pods: Mapping[str, KubePod]) -> None:
        """Record each existing or in-flight node the solve placed pending pods on."""
        now = self._clock.now().timestamp()
        by_node: dict[str, list[tuple[str, str]]] = {}
        for nomination in results.nominations:
            pod = pods.get(nomination.pod)
            if pod is not None:
                key = (pod.metadata.namespace or "default", pod.metadata.name or "")
                by_node.setdefault(nomination.node, []).append(key)
        for node, keys in by_node.items():
            self.node_nominations.nominate(node, keys, now=now, window=self._node_window)

    async def _report(
        self, results: Results, objects: ClusterObjects, pods: Mapping[str, KubePod]
    ) -> None:
        registered = {n.metadata.name or "" for n in objects.nodes}
        claim_of_node = {
            c.status.node_name or c.metadata.name or "": c.metadata.name or ""
            for c in objects.nodeclaims
        }
        to_record: list[Event] = []
        unready: dict[str, int] = {}
        for nomination in results.nominations:
            pod = pods.get(nomination.pod)
            if pod is None:
                continue
            if nomination.node in registered:
                target = f"node/{nomination.node}"
            else:
                target = f"nodeclaim/{claim_of_node.get(nomination.node, nomination.node)}"
                unready[target] = unready.get(target, 0) + 1
            to_record.append(events.nominated(pod, target))
        if unready:
            log.info(
                "computed unready node(s) will fit pod(s)",
                extra={"nodes": len(unready), "pods": sum(unready.values())},
            )
        for explanation in results.unplaced:
            pod = pods.get(explanation.uid)
            if pod is not None:
                to_record.append(events.failed_scheduling(pod, explanation.message))
        await self._publish(to_record)

    async def _publish(self, events: Sequence[Event]) -> None:
        """Record `events` concurrently (each is best effort; see Recorder.publish)."""
        now = asyncio.get_running_loop().time()
        async with asyncio.TaskGroup() as group:
            for event in events:
                group.create_task(self._recorder.publish(event, now=now))

    async def _launch(
        self,
        plans: Sequence[NodeClaimPlan],
        pools: Sequence[NodePool],
        types: Mapping[str, Sequence[InstanceType]],
        pods: Mapping[str, KubePod],
        span: Span,
    ) -> list[str]:
        if not plans:
            return []
        log.info(
            "computed new nodeclaim(s) to fit pod(s)",
            extra={"nodeclaims": len(plans), "pods": sum(len(p.pods) for p in plans)},
        )
        by_name = {p.metadata.name or "": p for p in pools}
        created: list[str] = []
        failures: list[str] = []

        tracer = self._telemetry.tracer

        async def one(plan: NodeClaimPlan) -> None:
            with tracer.start_as_current_span(
                "create nodeclaim",
                attributes=_decision(plan, types.get(plan.nodepool, ()), pods),
                record_exception=False,
            ) as create_span:
                try:
                    claim = nodeclaim_from_plan(plan, by_name[plan.nodepool])
                    # The lifecycle's launch joins this trace, after a restart too.
                    stored = await self._client.create_once(
                        NODECLAIMS, with_origin(claim, create_span)
                    )
                except (PlanError, KubeError) as error:
                    log.error(
                        "failed to create nodeclaim",
                        extra={"nodepool": plan.nodepool, "error": str(error)},
                    )
                    create_span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                    create_span.set_attribute("karpy.error", str(error))
                    failures.append(str(error))
                    return
                create_span.set_attribute("karpy.nodeclaim", stored.metadata.name or "")
            name = stored.metadata.name or ""
            created.append(name)
            self._telemetry.metrics.nodeclaims_created_total.add(
                1, created_labels(stored, PROVISIONED_REASON)
            )
            self.nominations.nominate(plan.pods, name, now=asyncio.get_running_loop().time())
            log.info(
                "created nodeclaim",
                extra={
                    "nodepool": plan.nodepool,
                    "nodeclaim": name,
                    "requests": dict(stored.spec.resources.requests),
                    "instance-types": summarize_instance_types(plan.instance_types),
                },
            )

        async with asyncio.TaskGroup() as group:
            for plan in plans:
                group.create_task(one(plan))
        created.sort()
        span.set_attribute("karpy.nodeclaims", created)
        if failures:
            msg = f"creating {len(failures)} of {len(plans)} nodeclaim(s) failed: {failures[0]}"
            raise ProvisioningError(msg)
        return created


def _buffer_key(event: WatchEvent[CapacityBuffer]) -> Iterable[str]:
    """A buffer changed (its status, when its controller resolved it): a pass places its
    chunks."""
    return (f"capacitybuffer/{event.item.ref.namespace}/{event.item.ref.name}",)


class ProvisioningError(Exception):
    """Some NodeClaims of a batch could not be created; the batch is retried with backoff."""


def _not_ready(pool: NodePool) -> bool:
    """The NodePool's Ready condition is False (its NodeClass is missing or not Ready, or it
    failed validation): it gets no instance types, so nothing is planned on it. A pool whose
    status is not written yet (no Ready) or Unknown is tried; the provider refuses what it cannot
    launch."""
    ready = next((c for c in pool.status.conditions if c.type == NodePoolCondition.READY), None)
    if ready is None or ready.status is not ConditionStatus.FALSE:
        return False
    log.debug(
        "skipping nodepool that is not ready",
        extra={"nodepool": pool.metadata.name, "ready_message": ready.message},
    )
    return True


def _recheck(waiting: int) -> Result:
    """Done when no pod is pending; else another pass after PENDING_RECHECK seconds (a batch in
    the meantime runs it sooner): pods not placed are tried again, and pods nominated onto a
    node renew that node's nomination until kube-scheduler binds them (Karpenter requeues every
    provisionable pod alike)."""
    return Result(requeue_after=PENDING_RECHECK) if waiting else Result()


def _span_pod_names(pods: Sequence[KubePod], limit: int = SPAN_PODS) -> list[str]:
    """`namespace/name` of the batch's first `limit` pods: enough to find a pod's batch in a
    trace backend without making a 20,000-pod batch's span megabytes long."""
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods[:limit]]


def _span_pod_uids(pods: Sequence[KubePod], limit: int = SPAN_PODS) -> list[str]:
    """The UIDs of the pods `_span_pod_names` names, in the same order."""
    return [p.metadata.uid or "" for p in pods[:limit]]


def _decision(
    plan: NodeClaimPlan, types: Sequence[InstanceType], pods: Mapping[str, KubePod]
) -> dict[str, AttributeValue]:
    """What a "create nodeclaim" span says of the solver's decision: the NodePool, the pods, the
    instance types considered (cheapest first, as the NodeClaim's requirements list them) and
    the offering the solver priced the NodeClaim at (the cheapest available one its requirements
    allow; the provider makes the final choice, which the launch span records)."""
    placed = [pods[uid] for uid in plan.pods if uid in pods]
    attributes: dict[str, AttributeValue] = {
        "karpy.nodepool": plan.nodepool,
        "karpy.pods": len(plan.pods),
        "karpy.pod_names": _span_pod_names(placed),
        "karpy.pod_uids": list(plan.pods[:SPAN_PODS]),
        "karpy.instance_types": list(plan.instance_types),
        "karpy.instance_types.count": len(plan.instance_types),
        "karpy.zones": list(plan.zones),
        "karpy.capacity_types": list(plan.capacity_types),
        "karpy.price_per_hour": plan.price,
    }
    considered = set(plan.instance_types)
    offers = [
        (offering.price, instance_type.name, offering.zone, offering.capacity_type)
        for instance_type in types
        if instance_type.name in considered
        for offering in instance_type.offerings
        if offering.available and offering.matches(plan.requirements)
    ]
    if offers:
        price, name, zone, capacity_type = min(offers)
        attributes |= {
            "karpy.offering.instance_type": name,
            "karpy.offering.zone": zone,
            "karpy.offering.capacity_type": capacity_type,
            "karpy.offering.price_per_hour": price,
        }
    return attributes


def _pod_names(pods: Sequence[KubePod]) -> str:
    names = _span_pod_names(pods, LOGGED_PODS)
    rest = len(pods) - LOGGED_PODS
    return ", ".join(names) + (f" and {rest} other(s)" if rest > 0 else "")
