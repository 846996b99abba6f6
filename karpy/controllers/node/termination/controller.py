"""TerminationController: a Node with karpy's finalizer is drained before it, and its instance, go.

Karpenter's order on Node deletion: taint the Node karpenter.sh/disrupted:NoSchedule so nothing new
lands on it, delete its NodeClaim (so the claim cannot relaunch or outlive the Node), drain it in
tiers through the Eviction API (eviction.py); under the NodeClaim's terminationGracePeriod each
pod still there is deleted directly at the deadline less its own terminationGracePeriodSeconds,
with the time left as its grace. Once drained, wait for the Node's VolumeAttachments to go
(volumes.py: those of pods the drain leaves do not count), until the deadline at most; then
terminate the instance through the CloudProvider and only then remove the finalizer, so the Node
object disappears last. Progress shows on the NodeClaim as Karpenter's conditions: Drained
(False, reason Draining, while pods remain; then True), VolumesDetached (Unknown, reason
AwaitingVolumeDetachment, while attachments remain; then True, or False with reason
TerminationGracePeriodElapsed when the deadline cut the wait short) and InstanceTerminating (True
once the instance is being deleted).

It is keyed by Node name and woken by Node events (only Nodes being deleted with the finalizer
do anything), by the pods leaving a draining Node, and by the VolumeAttachments of a draining
Node changing or going (watches.py). It requeues itself while it waits, so events only make it
faster.

The Node, its NodeClaim (by providerID), its pods (by spec.nodeName), its VolumeAttachments (by
spec.nodeName), its pods' PersistentVolumeClaims and the PodDisruptionBudgets (for an eviction
granted whose deletion never happened: eviction.py) are read from cluster state through a
`ClusterView`, never listed from the apiserver: at thousands of Nodes a list per reconcile is
quadratic traffic. A Node missing from the view is done (as NotFound was). The
view may be a watch event behind: the taint and finalizer patches carry the resourceVersion read,
so a stale read costs a 409 Conflict and a requeue; a pod the view still shows after it left is
evicted again and answers NotFound; deleting an already deleted NodeClaim answers NotFound too.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Sequence
from typing import ClassVar, Final

import attrs

from karpy.apis.conditions import with_condition
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import PersistentVolumeClaim
from karpy.apis.meta import ConditionStatus, with_labels
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.taints import DISRUPTED_TAINT
from karpy.cloudprovider import CloudProvider, NodeClaimNotFoundError
from karpy.controllers.node.termination import events
from karpy.controllers.node.termination.eviction import (
    EVICTION_BACKOFF,
    Evictor,
    deletion_grace,
    drainable,
    due_for_deletion,
    granted,
    next_deletion,
    next_to_evict,
    overrunning,
    pod_grace,
)
from karpy.controllers.node.termination.volumes import blocking_attachments
from karpy.controllers.node.termination.watches import (
    draining_node_of_attachment,
    draining_node_of_pod,
    terminating_node,
)
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import (
    NODECLAIMS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODDISRUPTIONBUDGETS,
    PODS,
    VOLUME_ATTACHMENTS,
)
from karpy.manager import PARALLEL_WORKERS, Controller, Watch
from karpy.runtime.backoff import Backoff
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Metrics
from karpy.state.deadline import termination_deadline
from karpy.state.pods import do_not_disrupt, needs_drain
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)


DRAIN_RECHECK: Final = 1.0
"""Seconds between looks at a draining Node when no eviction backoff is shorter."""

VOLUME_RECHECK: Final = 5.0
"""Seconds between looks at a drained Node's VolumeAttachments (their deletion also wakes it)."""

INSTANCE_TERMINATION_WAIT: Final = 5.0
"""Seconds between checks that the cloud instance is gone."""


class TerminationController:
    """Drain, terminate the instance, release the Node (module docstring).

    Args:
        kube: the apiserver client (writes to Nodes, Pods, NodeClaims; evictions).
        view: cluster state, where the Node, its NodeClaim, its pods and their claims, and its
            VolumeAttachments are read.
        cloud_provider: terminates the instance behind the Node.
        clock: wall clock; the terminationGracePeriod deadline is measured on it.
        recorder: publishes Evicted, FailedDraining, TerminationGracePeriodExpiring and
            AwaitingVolumeDetachment events.
        eviction_backoff: retry policy for evictions a PDB refused (default 100 ms → 10 s).
        metrics: where nodes terminated and eviction requests are counted (none by default).
    """

    name: ClassVar[str] = "node.termination"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        cloud_provider: CloudProvider,
        *,
        clock: Clock,
        recorder: Recorder,
        eviction_backoff: Backoff = EVICTION_BACKOFF,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._kube = kube
        self._view = view
        self._recorder = recorder
        self._cloud = cloud_provider
        self._clock = clock
        self._eviction_backoff = eviction_backoff
        self._evictors: dict[str, Evictor] = {}

    def spec(self) -> Controller:
        """Keyed by Node name: Nodes being deleted, the pods leaving them and their
        VolumeAttachments going (see `watches`)."""
        return Controller(
            name=self.name,
            reconcile=self.reconcile,
            watches=(
                Watch(kind=NODES, keys=terminating_node),
                Watch(kind=PODS, keys=draining_node_of_pod(self._view)),
                Watch(kind=VOLUME_ATTACHMENTS, keys=draining_node_of_attachment(self._view)),
            ),
            reads=(NODECLAIMS, PERSISTENT_VOLUME_CLAIMS, PODDISRUPTIONBUDGETS),
            workers=PARALLEL_WORKERS,
        )

    async def reconcile(self, name: str) -> Result:
        """Reconcile the Node called `name`. Gone (from cluster state, or NotFound on a write)
        is done; a conflict requeues."""
        with bind(controller=self.name, node=name):
            node = self._view.node(name)
            if node is None:
                self._evictors.pop(name, None)
                return Result()
            try:
                if (
                    node.metadata.deletion_timestamp is None
                    or wk.FINALIZER_TERMINATION not in node.metadata.finalizers
                ):
                    return Result()
                return await self._finalize(node)
            except NotFoundError:
                self._evictors.pop(name, None)
                return Result()
            except ConflictError:
                return Result(requeue=True)

    async def _finalize(self, node: Node) -> Result:
        name = node.metadata.name or ""
        node = await self._taint(node)
        nodeclaim = self._nodeclaim_of(node)
        if nodeclaim is not None and nodeclaim.metadata.deletion_timestamp is None:
            try:
                await self._kube.delete(NODECLAIMS, nodeclaim.metadata.name or "")
            except NotFoundError:
                nodeclaim = None
        now = self._clock.now()
        on_node = self._view.pods_on(name)
        pods = [p for p in on_node if needs_drain(p) and drainable(p, now=now)]
        if pods:
            await self._mark(nodeclaim, _DRAINING)
            return await self._drain(node, nodeclaim, pods)
        deadline = _grace_deadline(node, nodeclaim)
        attached = blocking_attachments(
            self._view.volume_attachments_on(name), on_node, self._claim, now=now
        )
        if attached and (deadline is None or now < deadline):
            await self._mark(nodeclaim, _AWAITING_VOLUMES)
            await self._recorder.publish(
                events.awaiting_volume_detachment(node, len(attached)),
                now=asyncio.get_running_loop().time(),
            )
            log.debug("awaiting volume detachment", extra={"volume-attachments": len(attached)})
            delay = VOLUME_RECHECK
            if deadline is not None:
                delay = min(delay, max((deadline - now).total_seconds(), 0.0))
            return Result(requeue_after=delay)
        await self._mark(nodeclaim, _VOLUMES_ABANDONED if attached else _TERMINATING)
        if not await self._instance_terminated(node, nodeclaim):
            return Result(requeue_after=INSTANCE_TERMINATION_WAIT)
        await self._kube.remove_finalizer(NODES, node, wk.FINALIZER_TERMINATION)
        if self._metrics is not None:
            _count_terminated(self._metrics, node, now)
        self._evictors.pop(name, None)
        log.info("deleted node", extra={"provider-id": node.spec.provider_id or ""})
        return Result()

    def _granted(self, pod: Pod) -> bool:
        """Whether `pod`'s eviction was granted and its deletion never happened (eviction.py)."""
        if not self._view.informs(PODDISRUPTIONBUDGETS):
            return False
        return granted(pod, self._view.objects(PODDISRUPTIONBUDGETS))

    def _claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self._view.get(PERSISTENT_VOLUME_CLAIMS, name, namespace=namespace)

    async def _mark(self, nodeclaim: NodeClaim | None, stage: tuple[_Mark, ...]) -> None:
        """Record termination progress on the NodeClaim: the conditions of `stage` (one write
        for all of them, none when they already hold). Best effort: a lost race is written on a
        later pass and never holds termination up."""
        if nodeclaim is None:
            return
        now = self._clock.now()
        conditions = nodeclaim.status.conditions
        for mark in stage:
            conditions = with_condition(
                conditions,
                mark.type,
                mark.status,
                reason=mark.reason,
                message=mark.message,
                now=now,
            )
        if conditions is nodeclaim.status.conditions:
            return
        try:
            await self._kube.patch_status(
                NODECLAIMS,
                nodeclaim.metadata.name or "",
                attrs.evolve(nodeclaim.status, conditions=conditions),
                previous=nodeclaim.status,
                resource_version=nodeclaim.metadata.resource_version,
            )
        except (ConflictError, NotFoundError):
            return

    async def _taint(self, node: Node) -> Node:
        """The Node with karpenter.sh/disrupted:NoSchedule on and excluded from external load
        balancers (one optimistic patch when the taint is missing)."""
        disrupted = (DISRUPTED_TAINT.key, DISRUPTED_TAINT.effect)
        if any((t.key, t.effect) == disrupted for t in node.spec.taints):
            return node
        # Load balancers stop sending new connections to a Node that is going away.
        wanted = attrs.evolve(
            node,
            metadata=with_labels(node.metadata, {wk.LABEL_EXCLUDE_FROM_LB: "true"}),
            spec=attrs.evolve(node.spec, taints=(*node.spec.taints, DISRUPTED_TAINT)),
        )
        tainted = await self._kube.patch(NODES, node, wanted, optimistic=True)
        log.info("tainted node", extra={"taint": wk.TAINT_DISRUPTED_KEY})
        return tainted

    async def _drain(self, node: Node, nodeclaim: NodeClaim | None, pods: list[Pod]) -> Result:
        name = node.metadata.name or ""
        deadline = _grace_deadline(node, nodeclaim)
        now = self._clock.now()
        if deadline is not None:
            due = (
                *due_for_deletion(pods, deadline, now=now),
                *overrunning(pods, deadline, now=now),
            )
            if due:
                await self._delete_pods(due, deadline, now=now)
                # The pods deleted now show as terminating, by the deadline, on the next pass,
                # which evicts what is left in tier order.
                return Result(requeue_after=DRAIN_RECHECK)
        evictor = self._evictors.get(name)
        if evictor is None:
            evictor = Evictor(
                self._kube,
                recorder=self._recorder,
                backoff=self._eviction_backoff,
                requests=(
                    self._metrics.pods_eviction_requests_total
                    if self._metrics is not None
                    else None
                ),
                drained=(
                    (self._metrics.pods_drained_total, {"reason": _disruption_reason(nodeclaim)})
                    if self._metrics is not None
                    else None
                ),
                granted=self._granted,
            )
            self._evictors[name] = evictor
        wait = await evictor.evict(next_to_evict(pods))
        blocked = sum(1 for p in pods if do_not_disrupt(p))
        log.debug("draining node", extra={"pods": len(pods), "do-not-disrupt": blocked})
        if wait is not None or blocked:
            await self._recorder.publish(
                events.failed_draining(node, len(pods)), now=asyncio.get_running_loop().time()
            )
        delay = DRAIN_RECHECK if wait is None else min(wait, DRAIN_RECHECK * 10)
        if deadline is not None:
            delay = min(delay, max((deadline - now).total_seconds(), 0.0))
            upcoming = next_deletion(pods, deadline, now=now)
            if upcoming is not None:
                delay = min(delay, (upcoming - now).total_seconds())
        return Result(requeue_after=delay)

    async def _delete_pods(
        self, pods: Sequence[Pod], deadline: datetime.datetime, *, now: datetime.datetime
    ) -> None:
        """Delete pods whose time under the node's deadline has come, past their PDBs and
        do-not-disrupt, each with the time left to the deadline as its grace period (again, for
        a pod already terminating past the deadline)."""
        grace = deletion_grace(deadline, now=now)
        for pod in pods:
            try:
                await self._kube.delete(
                    PODS,
                    pod.metadata.name or "",
                    namespace=pod.metadata.namespace,
                    grace_period_seconds=grace,
                )
            except NotFoundError:
                continue
            own = int(pod_grace(pod).total_seconds())
            log.info(
                "deleted pod under termination grace period",
                extra={
                    "pod": f"{pod.metadata.namespace}/{pod.metadata.name}",
                    "grace-period-seconds": grace,
                    "pod-termination-grace-period-seconds": own,
                    "termination-time": deadline.isoformat(),
                },
            )
            await self._recorder.publish(
                events.grace_period_expiring(pod, deadline, grace=grace, own=own),
                now=asyncio.get_running_loop().time(),
            )

    async def _instance_terminated(self, node: Node, nodeclaim: NodeClaim | None) -> bool:
        """Ask the provider to terminate the instance; True once it says it is gone.

        Without a NodeClaim the provider's own view of the instance is used. When the provider's
        instance *is* this Node object (kwok), it is gone once its deletion has begun: only the
        finalizer released below keeps the object.
        """
        provider_id = node.spec.provider_id
        if not provider_id:
            return True
        target = nodeclaim
        if target is None or target.status.provider_id != provider_id:
            try:
                target = await self._cloud.get(provider_id)
            except NodeClaimNotFoundError:
                return True
        try:
            await self._cloud.delete(target)
        except NodeClaimNotFoundError:
            return True
        try:
            instance = await self._cloud.get(provider_id)
        except NodeClaimNotFoundError:
            return True
        return (
            instance.metadata.deletion_timestamp is not None
            and instance.status.node_name == node.metadata.name
        )

    def _nodeclaim_of(self, node: Node) -> NodeClaim | None:
        provider_id = node.spec.provider_id
        if not provider_id:
            return None
        return next(iter(self._view.nodeclaims_with_provider_id(provider_id)), None)


@attrs.frozen
class _Mark:
    """One NodeClaim condition termination sets."""

    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str = ""


_DRAINED = _Mark(ConditionType.DRAINED, ConditionStatus.TRUE, str(ConditionType.DRAINED))
_DRAINING = (_Mark(ConditionType.DRAINED, ConditionStatus.FALSE, "Draining", "Draining"),)
_AWAITING_VOLUMES = (
    _DRAINED,
    _Mark(
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.UNKNOWN,
        "AwaitingVolumeDetachment",
        "AwaitingVolumeDetachment",
    ),
)
_INSTANCE_TERMINATING = _Mark(
    ConditionType.INSTANCE_TERMINATING,
    ConditionStatus.TRUE,
    str(ConditionType.INSTANCE_TERMINATING),
)
_TERMINATING = (
    _DRAINED,
    _Mark(
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.TRUE,
        str(ConditionType.VOLUMES_DETACHED),
    ),
    _INSTANCE_TERMINATING,
)
_VOLUMES_ABANDONED = (
    _DRAINED,
    _Mark(
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.FALSE,
        "TerminationGracePeriodElapsed",
        "TerminationGracePeriodElapsed",
    ),
    _INSTANCE_TERMINATING,
)
"""The conditions of each stage: draining; drained, awaiting volume detachment; drained with
the volumes detached (or the wait cut short by the deadline), the instance being terminated."""


def _grace_deadline(node: Node, nodeclaim: NodeClaim | None) -> datetime.datetime | None:
    """When pods stop being evicted and are deleted (the NodeClaim's termination deadline);
    None when there is none (the drain waits as long as it takes)."""
    if nodeclaim is None:
        return None
    return termination_deadline(nodeclaim, deleted_at=node.metadata.deletion_timestamp)


def _count_terminated(metrics: Metrics, node: Node, now: datetime.datetime) -> None:
    """Karpenter's node counters and durations, once, as the finalizer goes."""
    labels = node.metadata.labels
    pool = labels.get(wk.LABEL_NODEPOOL, "")
    metrics.nodes_terminated_total.add(
        1, {"nodepool": pool, "zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, "")}
    )
    metrics.nodes_drained_total.add(1, {"nodepool": pool})
    deleted, created = node.metadata.deletion_timestamp, node.metadata.creation_timestamp
    if deleted is not None:
        metrics.nodes_termination_duration_seconds.record(
            max(0.0, (now - deleted).total_seconds()), {"nodepool": pool}
        )
    if created is not None:
        metrics.nodes_lifetime_duration_seconds.record(
            max(0.0, (now - created).total_seconds()), {"nodepool": pool}
        )


def _disruption_reason(nodeclaim: NodeClaim | None) -> str:
    """The reason disruption gave the NodeClaim (empty when the Node was deleted directly)."""
    if nodeclaim is None:
        return ""
    found = next(
        (c for c in nodeclaim.status.conditions if c.type == ConditionType.DISRUPTION_REASON),
        None,
    )
    return (found.reason or "").lower() if found is not None else ""
