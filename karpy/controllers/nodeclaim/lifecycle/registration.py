"""Registration: find the Node that joined for a launched NodeClaim and make it karpy's.

When a Node with the NodeClaim's providerID appears, the NodeClaim's labels, annotations and
taints (spec and startup, unless the Node carries karpenter.sh/do-not-sync-taints) are synced onto
it, the karpenter.sh/termination finalizer is added so the Node is drained before it goes, the
karpenter.sh/unregistered:NoExecute taint is lifted and karpenter.sh/registered=true is set; the
NodeClaim records the Node's name and becomes Registered. A NodeClaim whose Node has not joined
fifteen minutes after it was Launched is deleted (Karpenter's registration TTL), which its
NodePool hears as a failure (`PoolHealth`); a success is told to the NodePool by the lifecycle
once the NodeClaim's status write has recorded the Node.

The Node is looked up in cluster state by providerID. While it has not joined, the step waits
without polling the apiserver: the Node's ADDED event queues this NodeClaim (the lifecycle's node
subscriber), and a bounded recheck keeps the registration timeout honest.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from typing import Final

import attrs
from opentelemetry.metrics import Counter
from opentelemetry.trace import NoOpTracer, Tracer

from karpy.apis.kube.common import Taint
from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus, with_annotations, with_labels
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.controllers.nodeclaim.lifecycle.fields import Said, log_fields
from karpy.controllers.nodeclaim.lifecycle.outcome import Outcome
from karpy.controllers.nodeclaim.lifecycle.poolhealth import PoolHealth
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import links_to
from karpy.state.conditions import claim_is_true, get_condition, set_condition
from karpy.state.tracecontext import origin
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

REGISTRATION_TIMEOUT: Final = datetime.timedelta(minutes=15)
"""A Launched NodeClaim whose Node has not joined this long after launch is deleted."""

RECHECK_SECONDS: Final = 60.0
"""Upper bound on the wait for a Node; Node events normally requeue the NodeClaim sooner."""


class Registration:
    """The registration step (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        said: Said | None = None,
        tracer: Tracer | None = None,
        nodes_created: Counter | None = None,
        pool_health: PoolHealth | None = None,
    ) -> None:
        self._nodes_created = nodes_created
        self._pool_health = pool_health
        self._tracer = tracer if tracer is not None else NoOpTracer()
        self._kube = kube
        self._view = view
        self._clock = clock
        self._said = said if said is not None else Said()

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        if not claim_is_true(nodeclaim, ConditionType.LAUNCHED):
            return Outcome(nodeclaim)
        if claim_is_true(nodeclaim, ConditionType.REGISTERED):
            return Outcome(nodeclaim)
        now = self._clock.now()
        provider_id = nodeclaim.status.provider_id or ""
        nodes = self._view.nodes_with_provider_id(provider_id) if provider_id else []
        if len(nodes) > 1:
            names = sorted(n.metadata.name or "" for n in nodes)
            msg = (
                f"nodeclaim {nodeclaim.metadata.name!r}: nodes {names} share"
                f" providerID {provider_id!r}"
            )
            raise ValueError(msg)
        if not nodes:
            return await self._not_joined(nodeclaim, now)
        node = nodes[0]
        name = node.metadata.name or ""
        # In this reconcile's trace, linked to the batch (or command) that created the NodeClaim.
        with self._tracer.start_as_current_span(
            "register nodeclaim",
            links=links_to(origin(nodeclaim)),
            attributes={
                "karpy.nodeclaim": nodeclaim.metadata.name or "",
                "karpy.node": name,
                "karpy.provider_id": provider_id,
            },
        ):
            await self._sync_node(nodeclaim, node)
        # The NodePool hears of the registration only after the NodeClaim's status write
        # (LifecycleController._advance): the Node is usable from the taint lift on, and the
        # NodeClaim must record it before anything else can fail.
        status = attrs.evolve(nodeclaim.status, node_name=name)
        registered = set_condition(
            attrs.evolve(nodeclaim, status=status),
            ConditionType.REGISTERED,
            ConditionStatus.TRUE,
            reason="Registered",
            now=now,
        )
        if self._said.first("registered", nodeclaim):
            log.info("registered nodeclaim", extra={**log_fields(registered), "node": name})
            if self._nodes_created is not None:
                labels = nodeclaim.metadata.labels
                self._nodes_created.add(
                    1,
                    {
                        "nodepool": labels.get(wk.LABEL_NODEPOOL, ""),
                        "zone": labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
                    },
                )
        return Outcome(registered)

    async def _not_joined(self, nodeclaim: NodeClaim, now: datetime.datetime) -> Outcome:
        launched = get_condition(nodeclaim, ConditionType.LAUNCHED)
        since = launched.last_transition_time if launched is not None else now
        waited = now - since
        if waited >= REGISTRATION_TIMEOUT:
            log.info(
                "terminating due to timeout",
                extra={
                    "reason": "registration_timeout",
                    "ttl": REGISTRATION_TIMEOUT.total_seconds(),
                },
            )
            if self._pool_health is not None:
                await self._pool_health.failed(nodeclaim)
            with contextlib.suppress(NotFoundError):
                await self._kube.delete(NODECLAIMS, nodeclaim.metadata.name or "")
            return Outcome(nodeclaim, stop=Result(), deleted=True)
        marked = set_condition(
            nodeclaim,
            ConditionType.REGISTERED,
            ConditionStatus.UNKNOWN,
            reason="NodeNotFound",
            message="Node not registered with cluster",
            now=now,
        )
        remaining = (REGISTRATION_TIMEOUT - waited).total_seconds()
        return Outcome(marked, stop=Result(requeue_after=min(remaining, RECHECK_SECONDS)))

    async def _sync_node(self, nodeclaim: NodeClaim, node: Node) -> None:
        """One optimistic merge patch of the Node (its taint and finalizer lists are replaced
        whole, so the patch only applies at the version read)."""
        labels = {**nodeclaim.metadata.labels, wk.LABEL_NODE_REGISTERED: "true"}
        metadata = with_annotations(
            with_labels(node.metadata, labels), nodeclaim.metadata.annotations
        )
        if wk.FINALIZER_TERMINATION not in metadata.finalizers:
            metadata = attrs.evolve(
                metadata, finalizers=(*metadata.finalizers, wk.FINALIZER_TERMINATION)
            )
        taints = list(node.spec.taints)
        if node.metadata.labels.get(wk.LABEL_DO_NOT_SYNC_TAINTS) != "true":
            for taint in (*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints):
                if not any(_same_taint(taint, t) for t in taints):
                    taints.append(taint)
        taints = [t for t in taints if t.key != wk.TAINT_UNREGISTERED_KEY]
        synced = attrs.evolve(
            node, metadata=metadata, spec=attrs.evolve(node.spec, taints=tuple(taints))
        )
        await self._kube.patch(NODES, node, synced, optimistic=True)


def _same_taint(a: Taint, b: Taint) -> bool:
    """Taints match on key and effect, as Kubernetes' MatchTaint does."""
    return a.key == b.key and a.effect == b.effect
