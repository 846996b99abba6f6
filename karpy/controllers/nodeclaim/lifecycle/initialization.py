"""Initialization: a registered Node becomes usable once kubelet and its daemons are done.

The NodeClaim is Initialized (and the Node labelled karpenter.sh/initialized=true) when the Node
is Ready, none of the NodeClaim's startup taints nor the ephemeral boot taints (not-ready,
unreachable, cloud-provider uninitialized, unregistered) remain, and every extended resource the
NodeClaim asked for (GPUs, ...) shows up in the Node's allocatable. Until then the scheduler must
not count on the Node's capacity for disruption decisions.

The Node is read from cluster state; every change to it (Ready, a taint removed, allocatable
updated) queues this NodeClaim again through the lifecycle's node subscriber, so the step never
polls the apiserver while it waits.

A Ready node that never reports an extended resource (a GPU whose device plugin never starts)
would otherwise wait for ever, billed and useless. With an extended-resource initialization
timeout (the NodePool's karpy.sh/extended-resource-initialization-timeout annotation, else the
global option; off by default), a NodeClaim still waiting only for such resources that long
after it registered is deleted, with a ResourceNotRegistered event naming them on the NodeClaim
and the Node; its pods go back to the provisioner, which launches a replacement. A node that is
not Ready, or still has startup taints, is left to node repair and to whoever owns the taint.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from typing import Final

import attrs
from opentelemetry.trace import NoOpTracer, Tracer

from karpy.apis.kube.node import Node
from karpy.apis.meta import ConditionStatus, with_labels
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.controllers.nodeclaim import events
from karpy.controllers.nodeclaim.lifecycle.fields import Said, log_fields
from karpy.controllers.nodeclaim.lifecycle.nodes import node_ready
from karpy.controllers.nodeclaim.lifecycle.outcome import Outcome
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import links_to
from karpy.state.conditions import claim_is_true, get_condition, set_condition
from karpy.state.nodepools import extended_resource_timeout
from karpy.state.tracecontext import origin
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

WELL_KNOWN_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
"""Resources every Node reports from the start; only the others must be waited for."""

ZERO_QUANTITIES: Final = frozenset({"", "0", "0m", "0k", "0Ki", "0M", "0Mi", "0G", "0Gi"})

REASON_RESOURCE_NOT_REGISTERED: Final = "ResourceNotRegistered"


class Initialization:
    """The initialization step (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        said: Said | None = None,
        tracer: Tracer | None = None,
        recorder: Recorder | None = None,
        extended_resource_timeout: datetime.timedelta | None = None,
    ) -> None:
        """`extended_resource_timeout`: the global extended-resource initialization timeout
        (None: off unless a NodePool sets one); `recorder` publishes the replacement's events."""
        self._tracer = tracer if tracer is not None else NoOpTracer()
        self._recorder = recorder
        self._timeout = extended_resource_timeout
        self._kube = kube
        self._view = view
        self._clock = clock
        self._said = said if said is not None else Said()

    async def reconcile(self, nodeclaim: NodeClaim) -> Outcome:
        if not claim_is_true(nodeclaim, ConditionType.REGISTERED):
            return Outcome(nodeclaim)
        if claim_is_true(nodeclaim, ConditionType.INITIALIZED):
            return Outcome(nodeclaim)
        now = self._clock.now()
        name = nodeclaim.status.node_name or ""
        node = self._view.node(name)
        if node is None:
            # Not in cluster state (yet, or any more): its next event queues this NodeClaim; the
            # requeue with backoff covers a Node that is gone for good.
            return Outcome(nodeclaim, stop=Result(requeue=True))
        waiting = initialization_blocker(nodeclaim, node)
        if waiting is not None:
            reason, message = waiting
            marked = set_condition(
                nodeclaim,
                ConditionType.INITIALIZED,
                ConditionStatus.UNKNOWN,
                reason=reason,
                message=message,
                now=now,
            )
            if reason != REASON_RESOURCE_NOT_REGISTERED:
                return Outcome(marked)
            return await self._await_resources(marked, node, now)
        with self._tracer.start_as_current_span(
            "initialize nodeclaim",
            links=links_to(origin(nodeclaim)),
            attributes={"karpy.nodeclaim": nodeclaim.metadata.name or "", "karpy.node": name},
        ):
            if node.metadata.labels.get(wk.LABEL_NODE_INITIALIZED) != "true":
                labelled = attrs.evolve(
                    node, metadata=with_labels(node.metadata, {wk.LABEL_NODE_INITIALIZED: "true"})
                )
                await self._kube.patch(NODES, node, labelled)
        initialized = set_condition(
            nodeclaim,
            ConditionType.INITIALIZED,
            ConditionStatus.TRUE,
            reason="Initialized",
            now=now,
        )
        if self._said.first("initialized", nodeclaim):
            log.info(
                "initialized nodeclaim",
                extra={
                    **log_fields(initialized),
                    "node": name,
                    "allocatable": dict(node.status.allocatable),
                },
            )
        return Outcome(initialized)

    async def _await_resources(
        self, nodeclaim: NodeClaim, node: Node, now: datetime.datetime
    ) -> Outcome:
        """Wait for the missing extended resources until the timeout, then replace the node."""
        pool = self._view.nodepool(nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, ""))
        try:
            timeout = extended_resource_timeout(pool, default=self._timeout)
        except ValueError:
            # The NodePool's status reports the bad annotation (ValidationSucceeded=False);
            # meanwhile its nodes keep to the global setting.
            timeout = self._timeout
        registered = get_condition(nodeclaim, ConditionType.REGISTERED)
        if timeout is None or registered is None:
            return Outcome(nodeclaim)
        remaining = timeout - (now - registered.last_transition_time)
        if remaining > datetime.timedelta(0):
            return Outcome(nodeclaim, stop=Result(requeue_after=remaining.total_seconds()))
        missing = missing_resources(nodeclaim, node)
        log.info(
            "terminating due to timeout",
            extra={
                "reason": "initialization_timeout",
                "ttl": timeout.total_seconds(),
                "resources": list(missing),
                "node": node.metadata.name,
            },
        )
        if self._recorder is not None:
            for event in events.resource_not_registered(nodeclaim, node, missing, timeout):
                await self._recorder.publish(event, now=asyncio.get_running_loop().time())
        with contextlib.suppress(NotFoundError):
            await self._kube.delete(NODECLAIMS, nodeclaim.metadata.name or "")
        return Outcome(nodeclaim, stop=Result(), deleted=True)


def missing_resources(nodeclaim: NodeClaim, node: Node) -> tuple[str, ...]:
    """The extended resources `nodeclaim` requested that `node` does not report (sorted)."""
    return tuple(
        resource
        for resource in sorted(nodeclaim.spec.resources.requests)
        if resource not in WELL_KNOWN_RESOURCES
        and str(node.status.allocatable.get(resource, "")) in ZERO_QUANTITIES
    )


def initialization_blocker(nodeclaim: NodeClaim, node: Node) -> tuple[str, str] | None:
    """Why the Node is not initialized yet, as a condition (reason, message); None when it is."""
    if not node_ready(node):
        return "NodeNotReady", "Node status is NotReady"
    for taint in node.spec.taints:
        if taint.key in wk.EPHEMERAL_TAINT_KEYS:
            return "StartupTaintsExist", f"StartupTaint {taint.key!r} still exists"
        if any(
            taint.key == s.key and taint.effect == s.effect for s in nodeclaim.spec.startup_taints
        ):
            return "StartupTaintsExist", f"StartupTaint {taint.key!r} still exists"
    missing = missing_resources(nodeclaim, node)
    if missing:
        return (
            REASON_RESOURCE_NOT_REGISTERED,
            f"Resource {missing[0]!r} was requested but not registered",
        )
    return None
