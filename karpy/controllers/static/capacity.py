"""Keep a static NodePool (`spec.replicas`) at exactly `replicas` NodeClaims (Karpenter's
static provisioning and static deprovisioning controllers, as one keyed reconcile).

Pods never drive a static pool: the provisioner plans no NodeClaim on it, and consolidation and
emptiness leave its nodes alone. Instead this controller reads the pool's NodeClaims from
cluster state and lets the pure planner (`karpy.core.static`) say how many to launch and which
to remove:

- missing NodeClaims are created, once the pool is Ready, from the pool's template, listing the
  instance types that are compatible with its requirements and have an available offering,
  cheapest first (the NodeClaim lifecycle launches them through the cloud provider as it
  launches every NodeClaim), up to `limits.nodes`;
- surplus ones (after `kubectl scale nodepool --replicas`, or a patch of `spec.replicas`) are
  deleted, within the pool's disruption budgets, unlaunched ones first, then empty nodes, then the
  cheapest to disrupt; their finalizer drains them as any deleted NodeClaim is drained;
- a NodeClaim that starts deleting (expired, interrupted, repaired, deleted by hand) is replaced
  at once, before it is gone, unless `limits.nodes` is reached. Drift is the disruption
  controller's StaticDrift, which launches the replacement from the template before it deletes.

Keyed by NodePool name, woken by the pool's changes and its NodeClaims'. What this controller
created or deleted counts at once, before the informer shows it, so a quick second pass does
not launch or delete twice (remembered for VISIBILITY_WINDOW seconds at most).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

from karpy.apis.duration import parse_duration
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import ConditionType as NodePoolCondition
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import CloudProvider, CloudProviderError
from karpy.cloudprovider.selection import compatible_launches
from karpy.core.disruption.budgets import allowance
from karpy.core.disruption.candidates import NodeFacts, PodFacts, disruption_cost
from karpy.core.requirements import RequirementError
from karpy.core.resources import QuantityError, parse_quantity
from karpy.core.static import StaticClaim, StaticPlan, plan
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError, NotFoundError
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS, NODEPOOLS
from karpy.kube.watch import Event
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.nodepools import pool_budgets
from karpy.state.plans import PlanError, nodeclaim_from_template
from karpy.state.pods import is_reschedulable
from karpy.state.protection import do_not_disrupt_until
from karpy.state.series import PROVISIONED_REASON, created_labels, disrupted_labels
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

VISIBILITY_WINDOW: Final = 30.0
"""Seconds a NodeClaim this controller created (or deleted) counts as such before the informer
shows it: longer than a watch event takes, short enough that a lost write is retried soon."""
WAITING_RECHECK: Final = 30.0
"""Seconds before a pool held short of `replicas` (a limit, a budget, no instance type) is
looked at again when no event of its NodeClaims comes sooner."""
SCALE_DOWN_REASON: Final = "ScaledDown"
"""The reason budgets are asked about when a pool scales down: only budgets without `reasons`
apply (Karpenter's reasons name its disruption methods; scaling down is none of them)."""
DISRUPTED_REASON: Final = "overprovisioned"
"""The `reason` label of karpenter_nodeclaims_disrupted_total for a scale-down (Karpenter's)."""
DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_DEPROVISIONING_PRIORITY: Final = "karpenter.sh/deprovisioning-priority"
"""NodeClaim annotation: among a static pool's surplus, a higher integer is removed first."""
LIMIT_NODES: Final = "nodes"
"""The one limit a static NodePool may set (the CRD refuses the others)."""


class StaticCapacityController:
    """Hold each static NodePool at `spec.replicas` NodeClaims (the module docstring)."""

    name: ClassVar[str] = "nodepool.static"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        cloudprovider: CloudProvider,
        clock: Clock,
        telemetry: Telemetry,
        provider_timeout: float = 60.0,
    ) -> None:
        self._client = client
        self._view = view
        self._provider = cloudprovider
        self._clock = clock
        self._telemetry = telemetry
        self._provider_timeout = provider_timeout
        self._created: dict[str, dict[str, float]] = {}
        """Per pool: NodeClaims created here, by name, with the loop time of the create."""
        self._deleted: dict[str, dict[str, float]] = {}
        """Per pool: NodeClaims deleted here, by name, with the loop time of the delete."""

    def spec(self) -> Controller:
        """Keyed by NodePool name: the static pool's own changes and its NodeClaims'."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(
                Watch(kind=NODEPOOLS, keys=_static_pool),
                Watch(kind=NODECLAIMS, keys=_pool_of_claim),
            ),
            reads=CORE_KINDS,
        )

    async def reconcile(self, name: str) -> Result:
        """Side effects: NodeClaims created or deleted so the pool holds `replicas`."""
        with bind(controller=self.name, nodepool=name):
            pool = self._view.nodepool(name)
            if pool is None or pool.spec.replicas is None:
                self._created.pop(name, None)
                self._deleted.pop(name, None)
                return Result()
            if pool.metadata.deletion_timestamp is not None:
                return Result()
            decided = self._plan(pool)
            if decided.launch:
                if not _ready(pool):
                    # As Karpenter: a pool whose NodeClass is missing or not Ready, or that
                    # failed validation, would have every launch fail; its Ready turning True
                    # is an event of the pool, which wakes this key.
                    log.debug("static nodepool is not ready; launching nothing")
                    return Result()
                launched = await self._launch(pool, decided.launch)
                if launched < decided.launch:
                    return Result(requeue_after=WAITING_RECHECK)
            if decided.remove:
                await self._remove(pool, decided.remove)
            if decided.waiting:
                log.info(
                    "static nodepool held short of its replicas",
                    extra={"replicas": pool.spec.replicas, "why": decided.waiting},
                )
                return Result(requeue_after=WAITING_RECHECK)
            return Result()

    def _plan(self, pool: NodePool) -> StaticPlan:
        name = pool.metadata.name or ""
        now = asyncio.get_running_loop().time()
        claims = [
            c for c in self._view.nodeclaims() if c.metadata.labels.get(wk.LABEL_NODEPOOL) == name
        ]
        by_name = {c.metadata.name or "": c for c in claims}
        created = self._created.setdefault(name, {})
        for claim_name, at in list(created.items()):
            if claim_name in by_name or now - at > VISIBILITY_WINDOW:
                del created[claim_name]
        deleted = self._deleted.setdefault(name, {})
        for claim_name, at in list(deleted.items()):
            shown = by_name.get(claim_name)
            if (
                shown is None
                or shown.metadata.deletion_timestamp is not None
                or now - at > VISIBILITY_WINDOW
            ):
                del deleted[claim_name]
        wall = self._clock.now().timestamp()
        facts = [self._claim(c, deleted=c.metadata.name in deleted, now=wall) for c in claims]
        facts.extend(StaticClaim(name=n, launched=False) for n in created)
        allowed = allowance(
            pool_budgets(pool),
            reason=SCALE_DOWN_REASON,
            total=len(facts),
            disrupting=sum(1 for f in facts if f.deleting or f.disrupting),
            now=wall,
        )
        if allowed.error is not None:
            log.warning("static nodepool budget is invalid", extra={"error": allowed.error})
        return plan(
            pool.spec.replicas or 0,
            facts,
            node_limit=_node_limit(pool),
            removable=allowed.allowed,
        )

    def _claim(self, claim: NodeClaim, *, deleted: bool, now: float) -> StaticClaim:
        """`claim` as the planner sees it; `deleted`: this controller deleted it and the view
        does not show that yet; `now`: wall-clock epoch seconds."""
        node = claim.status.node_name
        pods = [p for p in self._view.pods_on(node) if is_reschedulable(p)] if node else []
        protected = False
        for pod in pods:
            until = do_not_disrupt_until(pod)
            protected = protected or (until is not None and until > now)
        created = claim.metadata.creation_timestamp
        facts = NodeFacts(
            nodeclaim=claim.metadata.name or "",
            node=node,
            nodepool=claim.metadata.labels.get(wk.LABEL_NODEPOOL),
            created_at=created.timestamp() if created is not None else now,
            expire_after=_seconds(claim.spec.expire_after),
            pods=tuple(
                PodFacts(
                    name=p.metadata.name or "",
                    uid=p.metadata.uid or "",
                    deletion_cost=_deletion_cost(p.metadata.annotations),
                    priority=p.spec.priority or 0,
                )
                for p in pods
            ),
        )
        return StaticClaim(
            name=facts.nodeclaim,
            deleting=claim.metadata.deletion_timestamp is not None or deleted,
            disrupting=bool(claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_COMMAND)),
            launched=bool(claim.status.provider_id),
            empty=not pods,
            protected=protected,
            cost=disruption_cost(facts, now=now),
            priority=_priority(claim.metadata.annotations),
        )

    async def _launch(self, pool: NodePool, count: int) -> int:
        """Create `count` NodeClaims from the pool's template; how many were created."""
        name = pool.metadata.name or ""
        types = await self._instance_types(pool)
        if not types:
            return 0
        try:
            claim = nodeclaim_from_template(pool, instance_types=types)
        except PlanError as error:
            log.error("failed to create nodeclaim", extra={"error": str(error)})
            return 0
        created = 0
        for _ in range(count):
            try:
                stored = await self._client.create_once(NODECLAIMS, claim)
            except KubeError as error:
                log.error("failed to create nodeclaim", extra={"error": str(error)})
                break
            claim_name = stored.metadata.name or ""
            self._created.setdefault(name, {})[claim_name] = asyncio.get_running_loop().time()
            self._telemetry.metrics.nodeclaims_created_total.add(
                1, created_labels(stored, PROVISIONED_REASON)
            )
            log.info(
                "created nodeclaim",
                extra={
                    "nodeclaim": claim_name,
                    "replicas": pool.spec.replicas,
                    "instance-types": len(types),
                },
            )
            created += 1
        return created

    async def _instance_types(self, pool: NodePool) -> list[str]:
        """The pool's compatible instance types with an available offering, cheapest first."""
        try:
            async with asyncio.timeout(self._provider_timeout):
                offered = await self._provider.get_instance_types(pool)
            launches = compatible_launches(nodeclaim_from_template(pool), offered)
        except (CloudProviderError, TimeoutError, PlanError, RequirementError) as error:
            log.error("failed to get instance types", extra={"error": str(error) or "timeout"})
            return []
        # Cheapest offering first, so each type keeps the rank of its cheapest offering.
        names = list(dict.fromkeys(launch.instance_type.name for launch in launches))
        if not names:
            log.warning("no instance type is compatible with the static nodepool")
        return names

    async def _remove(self, pool: NodePool, names: Iterable[str]) -> None:
        for claim_name in names:
            claim = self._view.nodeclaim(claim_name)
            try:
                await self._client.delete(NODECLAIMS, claim_name)
            except NotFoundError:
                continue
            pool_name = pool.metadata.name or ""
            self._deleted.setdefault(pool_name, {})[claim_name] = asyncio.get_running_loop().time()
            self._created.get(pool_name, {}).pop(claim_name, None)
            if claim is not None:
                self._telemetry.metrics.nodeclaims_disrupted_total.add(
                    1, disrupted_labels(claim, DISRUPTED_REASON)
                )
            log.info(
                "deleting nodeclaim",
                extra={
                    "nodeclaim": claim_name,
                    "replicas": pool.spec.replicas,
                    "reason": DISRUPTED_REASON,
                },
            )


def _static_pool(event: Event[Any]) -> Iterable[str]:
    pool = event.item.obj
    return (event.item.ref.name,) if getattr(pool.spec, "replicas", None) is not None else ()


def _pool_of_claim(event: Event[Any]) -> Iterable[str]:
    pool = event.item.obj.metadata.labels.get(wk.LABEL_NODEPOOL)
    return (pool,) if pool else ()


def _ready(pool: NodePool) -> bool:
    ready = next((c for c in pool.status.conditions if c.type == NodePoolCondition.READY), None)
    return ready is not None and ready.status is ConditionStatus.TRUE


def _node_limit(pool: NodePool) -> int | None:
    limit = pool.spec.limits.get(LIMIT_NODES)
    if limit is None:
        return None
    try:
        return max(0, math.floor(parse_quantity(str(limit)) / 1000))
    except QuantityError:
        return 0


def _seconds(text: str | None) -> float | None:
    """expireAfter in seconds; None for Never (or a value the apiserver's pattern would refuse,
    which only a hand-edited object can have)."""
    if text is None:
        return None
    try:
        parsed = parse_duration(text, field_name="spec.expireAfter")
    except ValueError:
        return None
    return None if parsed is None else parsed.total_seconds()


def _priority(annotations: Mapping[str, str]) -> int:
    """Karpenter's `karpenter.sh/deprovisioning-priority` (0 when unset or not an integer)."""
    try:
        return int(annotations.get(ANNOTATION_DEPROVISIONING_PRIORITY, "0"))
    except ValueError:
        return 0


def _deletion_cost(annotations: Mapping[str, str]) -> float:
    try:
        return float(annotations.get(DELETION_COST_ANNOTATION, "0"))
    except ValueError:
        return 0.0
