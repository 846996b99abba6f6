"""LifecycleController: one reconcile loop that carries a NodeClaim from creation to deletion.

Karpenter runs launch, registration and initialization as sub-reconcilers of one controller, so a
NodeClaim's conditions advance in order and are written together; finalization on deletion removes
the Node, then the instance, and only then lets the NodeClaim go. The karpenter.sh/termination
finalizer is put on first, so no instance is ever launched that a deletion could forget.

Registering it: a Runner keyed by NodeClaim name, `reconcile=controller.reconcile`, fed by
NodeClaim ADDED/MODIFIED events (the NodeClaim's name) and by Node ADDED/MODIFIED/DELETED events
(the name of the NodeClaim whose status.providerID equals the Node's spec.providerID; for a Node
not yet linked, its providerID's NodeClaim). Conflicts and NotFound are handled here; the Runner's
per-key backoff handles every other error.

Reads come from cluster state through a `ClusterView`, never from the apiserver: a NodeClaim
missing from it is done (as NotFound was), and its Node is found by providerID in an index. The
view may be a watch event behind the apiserver, so every write that could clobber a newer
version carries the resourceVersion read: a stale read costs one 409 Conflict and a requeue, and
the watch event that brings the newer version queues the NodeClaim again at once. After a write
of its own the controller does not requeue itself either; that write's MODIFIED event does, when
the view holds it. A create result stays remembered until a read shows the NodeClaim Launched, so
a reconcile that reads the NodeClaim from before its status write never launches twice.
"""

from __future__ import annotations

import datetime
import logging
from typing import ClassVar, Final

import attrs
from opentelemetry.trace import NoOpTracer, Tracer

from karpy.apis.codec import format_time
from karpy.apis.meta import ConditionStatus, with_annotations
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.cloudprovider import CloudProvider, NodeClaimNotFoundError
from karpy.controllers.nodeclaim.lifecycle.fields import Said
from karpy.controllers.nodeclaim.lifecycle.initialization import Initialization
from karpy.controllers.nodeclaim.lifecycle.launch import LAUNCH_TIMEOUT, Launch
from karpy.controllers.nodeclaim.lifecycle.outcome import Outcome
from karpy.controllers.nodeclaim.lifecycle.poolhealth import PoolHealth
from karpy.controllers.nodeclaim.lifecycle.registration import REGISTRATION_TIMEOUT, Registration
from karpy.controllers.nodeclaim.lifecycle.watches import claims_of_node
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.manager import PARALLEL_WORKERS, Controller, Watch, unless_deleted
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Metrics
from karpy.state.conditions import get_condition, with_ready
from karpy.state.deadline import termination_deadline
from karpy.state.registrationhealth import RegistrationHealth
from karpy.state.view import ClusterView

__all__ = ["LAUNCH_TIMEOUT", "REGISTRATION_TIMEOUT", "LifecycleController"]

log = logging.getLogger(__name__)

NODE_TERMINATION_WAIT: Final = 5.0
"""Seconds between checks while a deleted NodeClaim's Node is being drained and removed."""

INSTANCE_TERMINATION_WAIT: Final = 5.0
"""Seconds between CloudProvider.delete calls until the provider says the instance is gone."""


class LifecycleController:
    """Launch → registration → initialization; finalization on deletion.

    Args:
        kube: the apiserver client (NodeClaims and Nodes are written).
        view: cluster state, where NodeClaims and their Nodes are read.
        cloud_provider: launches and terminates instances (wrap it in `instrumented` for spans).
        clock: wall clock for condition stamps and the launch/registration timeouts.
        recorder: publishes the InsufficientCapacityError, NodeClassNotReady and
            ResourceNotRegistered events.
        tracer: where the launch, registration and initialization spans go (none by default);
            see karpy.state.tracecontext for how they find the trace that created the NodeClaim.
        registration_health: the NodePools' recent registration outcomes (shared with the
            NodePool status controller, which resets them); a private one when not given.
        extended_resource_timeout: how long a registered node may go without an extended
            resource its NodeClaim requested before it is replaced, unless its NodePool says
            otherwise (None: off).
        metrics: where registered nodes (karpenter_nodes_created_total) and terminated NodeClaims
            (karpenter_nodeclaims_terminated_total and their durations) are counted.
    """

    name: ClassVar[str] = "nodeclaim.lifecycle"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        cloud_provider: CloudProvider,
        *,
        clock: Clock,
        recorder: Recorder,
        tracer: Tracer | None = None,
        metrics: Metrics | None = None,
        registration_health: RegistrationHealth | None = None,
        extended_resource_timeout: datetime.timedelta | None = None,
    ) -> None:
        tracer = tracer if tracer is not None else NoOpTracer()
        self._kube = kube
        self._view = view
        self._cloud = cloud_provider
        self._clock = clock
        self._metrics = metrics
        # Create results not yet seen persisted, by NodeClaim uid: a lost status write, or a read
        # from before it, must not make the next reconcile launch a second instance.
        self._launched: dict[str, NodeClaim] = {}
        self._said = Said()
        pool_health = PoolHealth(
            kube,
            view,
            clock=clock,
            health=registration_health if registration_health is not None else RegistrationHealth(),
            said=self._said,
        )
        self._steps = (
            Launch(
                kube,
                cloud_provider,
                clock=clock,
                recorder=recorder,
                launched=self._launched,
                said=self._said,
                tracer=tracer,
                pool_health=pool_health,
            ),
            Registration(
                kube,
                view,
                clock=clock,
                said=self._said,
                tracer=tracer,
                nodes_created=metrics.nodes_created_total if metrics is not None else None,
                pool_health=pool_health,
            ),
            Initialization(
                kube,
                view,
                clock=clock,
                said=self._said,
                tracer=tracer,
                recorder=recorder,
                extended_resource_timeout=extended_resource_timeout,
            ),
        )

    def spec(self) -> Controller:
        """Keyed by NodeClaim name: a NodeClaim's own changes, and its Node's (see `watches`)."""
        return Controller(
            name=self.name,
            reconcile=self.reconcile,
            watches=(
                Watch(kind=NODECLAIMS, keys=unless_deleted),
                Watch(kind=NODES, keys=claims_of_node(self._view)),
            ),
            reads=(PODS, NODEPOOLS),
            workers=PARALLEL_WORKERS,
        )

    async def reconcile(self, name: str) -> Result:
        """Reconcile the NodeClaim called `name`. Gone (from cluster state, or NotFound on a
        write) is done; a conflict requeues."""
        with bind(controller=self.name, nodeclaim=name):
            nodeclaim = self._view.nodeclaim(name)
            if nodeclaim is None:
                return Result()
            try:
                if nodeclaim.metadata.deletion_timestamp is not None:
                    return await self._finalize(nodeclaim)
                return await self._advance(nodeclaim)
            except NotFoundError:
                return Result()
            except ConflictError:
                return Result(requeue=True)

    async def _advance(self, nodeclaim: NodeClaim) -> Result:
        if wk.FINALIZER_TERMINATION not in nodeclaim.metadata.finalizers:
            await self._kube.add_finalizer(NODECLAIMS, nodeclaim, wk.FINALIZER_TERMINATION)
            # The patch's MODIFIED event queues the NodeClaim again once the view holds it.
            return Result()
        outcome = Outcome(nodeclaim)
        result = Result()
        for step in self._steps:
            outcome = await step.reconcile(outcome.nodeclaim)
            if outcome.stop is not None:
                result = outcome.stop
                break
        if outcome.deleted:
            return result
        await self._write(nodeclaim, with_ready(outcome.nodeclaim, now=self._clock.now()))
        return result

    async def _write(self, original: NodeClaim, working: NodeClaim) -> None:
        """At most one metadata patch and one status patch, each at the version last seen."""
        name = original.metadata.name or ""
        version = original.metadata.resource_version
        if (working.metadata.labels, working.metadata.annotations) != (
            original.metadata.labels,
            original.metadata.annotations,
        ):
            relabelled = attrs.evolve(
                original,
                metadata=attrs.evolve(
                    original.metadata,
                    labels=working.metadata.labels,
                    annotations=working.metadata.annotations,
                ),
            )
            written = await self._kube.patch(NODECLAIMS, original, relabelled, optimistic=True)
            version = written.metadata.resource_version
        if working.status != original.status:
            await self._kube.patch_status(
                NODECLAIMS, name, working.status, resource_version=version
            )

    async def _finalize(self, nodeclaim: NodeClaim) -> Result:
        """Delete the Node, then the instance (until the provider says it is gone), then let the
        NodeClaim go. The Node's own finalizer makes its deletion wait for the drain."""
        if wk.FINALIZER_TERMINATION not in nodeclaim.metadata.finalizers:
            return Result()
        deadline = termination_deadline(nodeclaim)
        annotation = wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
        if deadline is not None and annotation not in nodeclaim.metadata.annotations:
            # Record the forced-termination deadline once, where users and the drain see it.
            stamped = attrs.evolve(
                nodeclaim,
                metadata=with_annotations(nodeclaim.metadata, {annotation: format_time(deadline)}),
            )
            await self._kube.patch(NODECLAIMS, nodeclaim, stamped, optimistic=True)
            # The patch's MODIFIED event queues the NodeClaim again once the view holds it.
            return Result()
        cached = self._launched.get(nodeclaim.metadata.uid or "")
        target = nodeclaim if nodeclaim.status.provider_id or cached is None else cached
        provider_id = target.status.provider_id
        if provider_id:
            nodes = self._view.nodes_with_provider_id(provider_id)
            if nodes:
                for node in nodes:
                    if node.metadata.deletion_timestamp is None:
                        try:
                            await self._kube.delete(NODES, node.metadata.name or "")
                        except NotFoundError:
                            continue
                return Result(requeue_after=NODE_TERMINATION_WAIT)
        # Without a providerID the launch may still have happened (a process that launched it
        # died before recording it): the provider is asked all the same, and answers
        # NodeClaimNotFoundError when it has no instance for this NodeClaim.
        try:
            await self._cloud.delete(target)
        except NodeClaimNotFoundError:
            pass
        else:
            return Result(requeue_after=INSTANCE_TERMINATION_WAIT)
        await self._kube.remove_finalizer(NODECLAIMS, nodeclaim, wk.FINALIZER_TERMINATION)
        if self._metrics is not None:
            _count_terminated(self._metrics, nodeclaim, self._clock.now())
        self._launched.pop(nodeclaim.metadata.uid or "", None)
        self._said.forget(nodeclaim)
        log.info("deleted nodeclaim", extra={"provider-id": provider_id or ""})
        return Result()


def _count_terminated(metrics: Metrics, nodeclaim: NodeClaim, now: datetime.datetime) -> None:
    """Karpenter's NodeClaim termination counter and durations, once, as the finalizer goes:
    from the deletion, and from InstanceTerminating (set when the drain finished)."""
    labels = nodeclaim.metadata.labels
    pool = {"nodepool": labels.get(wk.LABEL_NODEPOOL, "")}
    metrics.nodeclaims_terminated_total.add(
        1,
        {
            **pool,
            "capacity_type": labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            "zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
        },
    )
    deleted = nodeclaim.metadata.deletion_timestamp
    if deleted is not None:
        metrics.nodeclaims_termination_duration_seconds.record(
            max(0.0, (now - deleted).total_seconds()), pool
        )
    terminating = get_condition(nodeclaim, ConditionType.INSTANCE_TERMINATING)
    if terminating is not None and terminating.status is ConditionStatus.TRUE:
        metrics.nodeclaims_instance_termination_duration_seconds.record(
            max(0.0, (now - terminating.last_transition_time).total_seconds()), pool
        )
