"""A NodeClaim's registration outcome, told to its NodePool (NodeRegistrationHealthy).

Registration and the launch and registration timeouts are where the lifecycle learns whether a
pool's nodes can join, so they report here, as Karpenter's registration and liveness steps do:

* a registered NodeClaim counts as a success, and the pool becomes NodeRegistrationHealthy=True
  when its window (karpy.state.registrationhealth) is healthy with it; it is reported after the
  NodeClaim's status write records the registration (the node is usable from the moment its
  unregistered taint is lifted, so that record comes first), and a conflict on the pool is
  retried against a fresh read, since the Registered NodeClaim will not report it again;
* a NodeClaim deleted at the launch or registration timeout counts as a failure, and when that
  makes the window unhealthy the pool becomes False: reason `RegistrationFailed` ("Failed to
  register node") for a launched NodeClaim whose Node never joined, else the reason and message
  of the NodeClaim's Launched condition (what the cloud provider said about the failed create).

Only NodeClaims the pool owns (an ownerReference with the pool's UID) count: one made by hand
with the pool's label says nothing about the pool. The condition carries the pool's generation,
so the NodePool status controller can tell it was computed for the current spec. The outcome is
recorded only once the pool's status write went through, so a conflict retried does not count
twice; a NodeClaim's outcome counts once however often its reconcile runs.
"""

from __future__ import annotations

import logging
from typing import Final

import attrs

from karpy.apis.conditions import find, with_condition
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType as ClaimCondition
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import ConditionType, NodePool
from karpy.controllers.nodeclaim.lifecycle.fields import Said
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.kinds import NODEPOOLS
from karpy.runtime.clock import Clock
from karpy.state.registrationhealth import Health, RegistrationHealth
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

REASON_REGISTRATION_FAILED: Final = "RegistrationFailed"
MESSAGE_REGISTRATION_FAILED: Final = "Failed to register node"
CONFLICT_ATTEMPTS: Final = 3
"""Writes a success report tries, each against a fresh read of the NodePool, before giving up."""


class PoolHealth:
    """Reports registration outcomes to the owning NodePool (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        *,
        clock: Clock,
        health: RegistrationHealth,
        said: Said,
    ) -> None:
        self._kube = kube
        self._view = view
        self._clock = clock
        self._health = health
        self._said = said

    async def registered(self, nodeclaim: NodeClaim) -> None:
        """`nodeclaim` registered, as its status already records. Side effect: at most one
        status patch of its NodePool that lands; a conflict is retried here against the pool
        read afresh from the apiserver (the NodeClaim's next reconcile, Registered, would not
        report it again). Raises ConflictError when every attempt conflicted."""
        await self._report(nodeclaim, registered=True, attempts=CONFLICT_ATTEMPTS)

    async def failed(self, nodeclaim: NodeClaim) -> None:
        """`nodeclaim` is deleted for failing to launch or register. Side effect: at most one
        status patch of its NodePool. Raises ConflictError as `registered`."""
        await self._report(nodeclaim, registered=False)

    async def _report(self, nodeclaim: NodeClaim, *, registered: bool, attempts: int = 1) -> None:
        pool = self._owner(nodeclaim)
        if pool is None:
            return
        said = "pool registration success" if registered else "pool registration failure"
        if not self._said.first(said, nodeclaim):
            return
        uid = pool.metadata.uid or ""
        self._health.seed(uid, _seed(pool))
        try:
            for attempt in range(attempts):
                try:
                    await self._write(pool, nodeclaim, registered=registered)
                    break
                except ConflictError:
                    if attempt + 1 >= attempts:
                        raise
                    pool = await self._kube.get(NODEPOOLS, pool.metadata.name or "")
        except NotFoundError:
            return  # the pool is gone: nobody left to tell
        except BaseException:
            # Not counted: the retry reports it again.
            self._said.forget_one(said, nodeclaim)
            raise
        self._health.record(uid, registered)

    async def _write(self, pool: NodePool, nodeclaim: NodeClaim, *, registered: bool) -> None:
        uid = pool.metadata.uid or ""
        conditions = pool.status.conditions
        current = find(conditions, ConditionType.NODE_REGISTRATION_HEALTHY)
        after = self._health.health_after(uid, registered)
        reason: str
        if registered and after is Health.HEALTHY:
            # A True condition's reason is its type, as Karpenter's condition sets write it.
            status, reason, message = ConditionStatus.TRUE, "NodeRegistrationHealthy", ""
        elif not registered and after is Health.UNHEALTHY:
            if current is not None and current.status is ConditionStatus.FALSE:
                return
            status = ConditionStatus.FALSE
            reason, message = _failure(nodeclaim)
        else:
            return
        updated = with_condition(
            conditions,
            ConditionType.NODE_REGISTRATION_HEALTHY,
            status,
            reason=reason,
            message=message,
            now=self._clock.now(),
            generation=pool.metadata.generation,
        )
        if updated is conditions:
            return
        await self._kube.patch_status(
            NODEPOOLS,
            pool.metadata.name or "",
            attrs.evolve(pool.status, conditions=updated),
            previous=pool.status,
            resource_version=pool.metadata.resource_version,
        )
        log.info(
            "updated nodepool registration health",
            extra={"nodepool": pool.metadata.name, "status": str(status), "reason": reason},
        )

    def _owner(self, nodeclaim: NodeClaim) -> NodePool | None:
        name = nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL)
        if not name:
            return None
        pool = self._view.nodepool(name)
        if pool is None or pool.metadata.uid is None:
            return None
        owned = any(
            ref.kind == NodePool.KIND and ref.uid == pool.metadata.uid
            for ref in nodeclaim.metadata.owner_references
        )
        return pool if owned else None


def _failure(nodeclaim: NodeClaim) -> tuple[str, str]:
    """The False condition's reason and message for a NodeClaim that did not register."""
    launched = find(nodeclaim.status.conditions, ClaimCondition.LAUNCHED)
    if launched is None or launched.status is ConditionStatus.TRUE or not launched.reason:
        return REASON_REGISTRATION_FAILED, MESSAGE_REGISTRATION_FAILED
    return launched.reason, launched.message


def _seed(pool: NodePool) -> Health:
    """What the pool's condition, as last written, says of its window."""
    condition = find(pool.status.conditions, ConditionType.NODE_REGISTRATION_HEALTHY)
    if condition is None:
        return Health.UNKNOWN
    if condition.status is ConditionStatus.TRUE:
        return Health.HEALTHY
    if condition.status is ConditionStatus.FALSE:
        return Health.UNHEALTHY
    return Health.UNKNOWN
