"""Judge every NodeOverlay against the catalog and say so in its status (Karpenter's
nodeoverlay controller).

One pass over all overlays, since whether one conflicts depends on all the others: read the
NodeOverlays and NodePools from cluster state, ask the provider (the undecorated one) for each
pool's instance types, and resolve them (karpy.core.overlays.resolve). Accepted overlays get
`ValidationSucceeded=True`; one whose requirements cannot be read gets `False` with reason
`RuntimeValidation`, and one that changes, at its own weight, a price or resource an accepted
overlay already changes gets `False` with reason `Conflict`. The rejected ones are handed to the
`OverlayStore`, so the catalog every decision reads leaves them out.

With the NodeOverlay feature gate off, nothing applies them: each overlay gets
`ValidationSucceeded=False` with reason `NodeOverlayDisabled` and a warning is logged, rather
than being silently ignored.

A pass runs on any NodeOverlay, NodePool or NodeClass change and every `RECHECK` (Karpenter's
period), since the catalog a conflict depends on moves with the cloud. A NodePool whose catalog
cannot be read (its NodeClass not ready) is left out of the pass rather than failing it.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

import attrs

from karpy.apis.conditions import ConditionSet
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1alpha1.nodeoverlay import ConditionType, NodeOverlay, Reason
from karpy.cloudprovider.errors import CloudProviderError
from karpy.cloudprovider.overlay import OverlayStore, nodepool_selection, overlay_from_api
from karpy.cloudprovider.protocol import CloudProvider
from karpy.core.overlays import Overlay, OverlayError, PoolCatalog, resolve
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.kinds import NODEOVERLAYS, NODEPOOLS
from karpy.kube.resources import ResourceKind
from karpy.manager import Singleton, Watch
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

RECHECK: Final = datetime.timedelta(hours=6)
"""How often the overlays are judged again without any change (Karpenter's period)."""

OVERLAY_CONDITIONS: Final = ConditionSet(dependents=(ConditionType.VALIDATION_SUCCEEDED,))

MESSAGE_CONFLICT: Final = "conflict with another overlay"
"""Karpenter's message; karpy adds the other overlay's name."""

MESSAGE_DISABLED: Final = (
    "the NodeOverlay feature gate is off, so this overlay is not applied; "
    "set FEATURE_GATES=NodeOverlay=true to apply it"
)


@attrs.frozen
class Verdict:
    """What one overlay's ValidationSucceeded says."""

    status: ConditionStatus
    reason: str
    message: str = ""


ACCEPTED: Final = Verdict(ConditionStatus.TRUE, ConditionType.VALIDATION_SUCCEEDED.value)


class NodeOverlayController:
    """One pass judges every NodeOverlay, as the module docstring says."""

    name: ClassVar[str] = "nodeoverlay"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        cloudprovider: CloudProvider,
        store: OverlayStore | None,
        clock: Clock,
        nodeclass_kinds: Sequence[ResourceKind[Any]] = (),
    ) -> None:
        """`store` is None when the NodeOverlay gate is off; `cloudprovider` is the provider
        before overlays (its catalog as the cloud reports it)."""
        self._client = client
        self._view = view
        self._cloudprovider = cloudprovider
        self._store = store
        self._clock = clock
        self._nodeclass_kinds = tuple(nodeclass_kinds)

    def spec(self) -> Singleton:
        """A pass at start, on NodeOverlay, NodePool and NodeClass changes, and each RECHECK."""
        return Singleton(
            name=self.name,
            reconcile=self.reconcile,
            watches=(
                Watch(kind=NODEOVERLAYS),
                Watch(kind=NODEPOOLS),
                *(Watch(kind=kind) for kind in self._nodeclass_kinds),
            ),
            requeue_on=(ConflictError,),
        )

    async def reconcile(self) -> Result:
        """Side effects: instance-type calls to the provider, the store's rejected set, and a
        status patch for each overlay whose condition changes."""
        with bind(controller=self.name):
            overlays = [
                o for o in self._view.objects(NODEOVERLAYS) if o.metadata.deletion_timestamp is None
            ]
            if self._store is None:
                verdicts = {
                    o.metadata.name or "": Verdict(
                        ConditionStatus.FALSE, Reason.FEATURE_GATE_DISABLED, MESSAGE_DISABLED
                    )
                    for o in overlays
                }
            else:
                verdicts = await self._judge(overlays, self._store)
            for overlay in overlays:
                await self._write(overlay, verdicts[overlay.metadata.name or ""])
            return Result(requeue_after=RECHECK.total_seconds())

    async def _judge(
        self, overlays: Sequence[NodeOverlay], store: OverlayStore
    ) -> dict[str, Verdict]:
        verdicts: dict[str, Verdict] = {}
        readable: list[Overlay] = []
        for overlay in overlays:
            try:
                readable.append(overlay_from_api(overlay))
            except OverlayError as error:
                verdicts[overlay.metadata.name or ""] = Verdict(
                    ConditionStatus.FALSE, Reason.RUNTIME_VALIDATION, str(error)
                )
        if not readable:  # nothing to judge against the catalog: no provider calls
            store.reject(_rejections(verdicts))
            return verdicts
        resolution = resolve(readable, await self._catalogs())
        for name, rival in resolution.conflicts.items():
            verdicts[name] = Verdict(
                ConditionStatus.FALSE,
                Reason.CONFLICT,
                f"{MESSAGE_CONFLICT} ({rival}, of the same weight, changes the same offering "
                "price or resource)",
            )
        for accepted in resolution.accepted:
            verdicts[accepted.name] = ACCEPTED
        store.reject(_rejections(verdicts))
        return verdicts

    async def _catalogs(self) -> list[PoolCatalog]:
        """Each NodePool's catalog as the cloud reports it. A pool whose catalog cannot be read
        (its NodeClass not ready, say) launches nothing, so it is left out rather than holding
        every overlay's status back; its NodeClass becoming ready brings another pass."""
        catalogs: list[PoolCatalog] = []
        for pool in self._view.nodepools():
            if pool.metadata.deletion_timestamp is not None:
                continue
            try:
                types = await self._cloudprovider.get_instance_types(pool)
            except CloudProviderError as error:
                log.info(
                    "nodepool left out of nodeoverlay validation",
                    extra={"nodepool": pool.metadata.name, "error": str(error)},
                )
                continue
            catalogs.append(PoolCatalog(nodepool_selection(pool), tuple(types)))
        return catalogs

    async def _write(self, overlay: NodeOverlay, verdict: Verdict) -> None:
        name = overlay.metadata.name or ""
        now = self._clock.now()
        conditions = OVERLAY_CONDITIONS.set(
            overlay.status.conditions,
            ConditionType.VALIDATION_SUCCEEDED,
            verdict.status,
            reason=verdict.reason,
            message=verdict.message,
            now=now,
            generation=overlay.metadata.generation,
        )
        if conditions is overlay.status.conditions:
            return
        if verdict.status is not ConditionStatus.TRUE:
            log.warning(
                "nodeoverlay not applied",
                extra={"nodeoverlay": name, "reason": verdict.reason, "why": verdict.message},
            )
        status = attrs.evolve(overlay.status, conditions=conditions)
        try:
            await self._client.patch_status(
                NODEOVERLAYS,
                name,
                status,
                previous=overlay.status,
                resource_version=overlay.metadata.resource_version,
            )
        except NotFoundError:
            return


def _rejections(verdicts: Mapping[str, Verdict]) -> dict[str, str]:
    return {
        name: f"{v.reason}: {v.message}"
        for name, v in verdicts.items()
        if v.status is not ConditionStatus.TRUE
    }
