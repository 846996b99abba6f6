"""Keep `karpenter.sh/nodepool-hash` and `-hash-version` on every NodePool (Karpenter's
nodepool.hash controller).

Static drift compares a NodeClaim's hash (stamped by the provisioner at creation) with its
NodePool's, so the NodePool's must follow its template: on every NodePool event the hash is
recomputed (karpy.state.nodepools) and written when it differs. When the NodePool's hash version
is not karpy's current one, what is hashed has changed since the NodeClaims were stamped: their
hashes cannot be compared, so each NodeClaim of the pool on an older version is re-stamped with
the current version and hash (karpy.core.drift.rehash_annotations; a NodeClaim already Drifted
keeps its old hash and stays drifted) before the NodePool's own version moves on. NodeClaims are
read from cluster state; writes are merge patches of the annotation map (the NodePool's under
an optimistic lock on the version read).
"""

from __future__ import annotations

import logging
from typing import ClassVar

import attrs

from karpy.apis.meta import ConditionStatus, with_annotations
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.core.drift import HASH_VERSION, rehash_annotations
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import CORE_KINDS, NODECLAIMS, NODEPOOLS
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.state.nodepools import hash_annotations
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)


def _drifted(claim: NodeClaim) -> bool:
    return any(
        c.type == ConditionType.DRIFTED and c.status is ConditionStatus.TRUE
        for c in claim.status.conditions
    )


class NodePoolHashController:
    """Reconcile one NodePool (the key) as the module docstring says."""

    name: ClassVar[str] = "nodepool.hash"

    def __init__(self, client: KubeClient, view: ClusterView) -> None:
        self._client = client
        self._view = view

    def spec(self) -> Controller:
        """Keyed by NodePool name, woken by the NodePool's changes."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(Watch(kind=NODEPOOLS),),
            reads=CORE_KINDS,
        )

    async def reconcile(self, name: str) -> Result:
        """Side effects: annotation patches on the NodePool and, after a hash-version change,
        on its NodeClaims. NotFound is done; Conflict requeues (the runner's policy)."""
        with bind(controller=self.name, nodepool=name):
            nodepool = self._view.nodepool(name)
            if nodepool is None or nodepool.metadata.deletion_timestamp is not None:
                return Result()
            wanted = hash_annotations(nodepool)
            annotations = nodepool.metadata.annotations
            if annotations.get(wk.ANNOTATION_NODEPOOL_HASH_VERSION) != HASH_VERSION:
                await self._rehash_nodeclaims(name, wanted[wk.ANNOTATION_NODEPOOL_HASH])
            if all(annotations.get(k) == v for k, v in wanted.items()):
                return Result()
            hashed = attrs.evolve(nodepool, metadata=with_annotations(nodepool.metadata, wanted))
            await self._client.patch(NODEPOOLS, nodepool, hashed, optimistic=True)
            log.debug("updated nodepool hash", extra={"hash": wanted[wk.ANNOTATION_NODEPOOL_HASH]})
            return Result()

    async def _rehash_nodeclaims(self, nodepool: str, current: str) -> None:
        for claim in self._view.nodeclaims():
            if claim.metadata.labels.get(wk.LABEL_NODEPOOL) != nodepool:
                continue
            update = rehash_annotations(
                claim.metadata.annotations, nodepool_hash=current, drifted=_drifted(claim)
            )
            if update is None:
                continue
            name = claim.metadata.name or ""
            try:
                rehashed = attrs.evolve(claim, metadata=with_annotations(claim.metadata, update))
                await self._client.patch(NODECLAIMS, claim, rehashed)
            except NotFoundError:
                continue
            log.info(
                "updated nodeclaim hash version",
                extra={"nodeclaim": name, "hash-version": HASH_VERSION},
            )
