"""A CloudProvider wrapper that hands out the instance-type catalog with NodeOverlays applied.

Every consumer of instance types (provisioning, the disruption passes and their consolidation
simulations, NodePool cost limits, the state gauges) asks the provider, so wrapping the one
`get_instance_types` is what makes them all see the same overlaid catalog, as Karpenter's
`overlay.Decorate` does. The wrapper is installed only with `FEATURE_GATES=NodeOverlay=true`.

Which overlays apply comes from `OverlayStore`: the NodeOverlays in cluster state (read through
the callable the wiring gives it, so a new overlay counts on the next scheduling pass) less the
ones the nodeoverlay controller found conflicting or unreadable (`reject`), which never apply.
The rules themselves are karpy.core.overlays. Providers launch from their own catalog: the
wrapper leaves out of a launch request the extended resources only overlays declare, and a
provider that simulates its cloud (kwok) is given the overlaid catalog to launch from
(`OverlayStore.for_nodeclaim`, the `ProviderContext.launch_catalog`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from karpy.apis.meta import Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.apis.v1alpha1.nodeoverlay import NodeOverlay
from karpy.cloudprovider.protocol import CloudProvider, DriftReason, NodeClassKind, RepairPolicy
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.overlays import (
    Overlay,
    OverlayError,
    applied,
    apply,
    make_overlay,
    order,
    pool_requirements,
)
from karpy.core.requirements import Requirements
from karpy.core.resources import EMPTY, format_quantity


def nodepool_selection(nodepool: NodePool) -> Requirements:
    """What an overlay may select `nodepool`'s types by besides their own labels: the pool's
    name and its template labels."""
    return pool_requirements(nodepool.metadata.name or "", nodepool.spec.template.metadata.labels)


def overlay_from_api(overlay: NodeOverlay) -> Overlay:
    """`overlay` read for the core; OverlayError names the field that cannot be read."""
    spec = overlay.spec
    return make_overlay(
        overlay.metadata.name or "",
        requirements=((r.key, r.operator.value, r.values) for r in spec.requirements),
        weight=spec.weight,
        price=spec.price,
        price_adjustment=spec.price_adjustment,
        capacity={k: str(v) for k, v in spec.capacity.items()},
    )


class OverlayStore:
    """The NodeOverlays that apply now, in Karpenter's order.

    `source` returns the NodeOverlays in cluster state; the nodeoverlay controller records the
    ones that must not apply (`reject`: name -> why). Reading never fails: an overlay that
    cannot be read is left out here and marked by the controller.
    """

    def __init__(self, source: Callable[[], Sequence[NodeOverlay]]) -> None:
        self._source = source
        self._rejected: Mapping[str, str] = {}

    def reject(self, rejected: Mapping[str, str]) -> None:
        """Replace the overlays left out (name -> why), as the controller last judged them."""
        self._rejected = dict(rejected)

    def for_nodeclaim(
        self, nodeclaim: NodeClaim, instance_types: Sequence[InstanceType]
    ) -> Sequence[InstanceType]:
        """`instance_types` as the scheduler saw them for `nodeclaim`'s pool: its labels carry
        the pool's name and template labels (a `LaunchCatalog`)."""
        overlays = self.overlays()
        if not overlays:
            return instance_types
        labels = nodeclaim.metadata.labels
        selection = pool_requirements(labels.get(wk.LABEL_NODEPOOL, ""), labels)
        return apply(instance_types, selection, overlays)

    def launched(self, nodeclaim: NodeClaim) -> NodeClaim:
        """A launched NodeClaim (labelled with its type, zone and capacity type) whose capacity
        and allocatable carry the extended resources the overlays give its type, as the
        catalog the scheduler read reported them."""
        overlays = self.overlays()
        labels = nodeclaim.metadata.labels
        name = labels.get(wk.LABEL_INSTANCE_TYPE)
        if not overlays or name is None:
            return nodeclaim
        launched_as = InstanceType.make(
            name,
            EMPTY,
            (
                Offering(
                    labels.get(wk.LABEL_TOPOLOGY_ZONE, ""),
                    labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                    0.0,
                ),
            ),
            labels=dict(labels),
        )
        selection = pool_requirements(labels.get(wk.LABEL_NODEPOOL, ""), labels)
        named = {o.name: o for o in overlays}
        added = {
            resource: Quantity(format_quantity(resource, named[setter].capacity[resource]))
            for resource, setter in applied(launched_as, selection, overlays).capacity.items()
        }
        status = nodeclaim.status
        if all(
            status.capacity.get(r) == q and status.allocatable.get(r) == q for r, q in added.items()
        ):
            return nodeclaim
        status = attrs.evolve(
            status,
            capacity={**status.capacity, **added},
            allocatable={**status.allocatable, **added},
        )
        return attrs.evolve(nodeclaim, status=status)

    def overlays(self) -> tuple[Overlay, ...]:
        """The overlays that apply, ordered (karpy.core.overlays.order)."""
        read: list[Overlay] = []
        for overlay in self._source():
            if overlay.metadata.deletion_timestamp is not None:
                continue
            if (overlay.metadata.name or "") in self._rejected:
                continue
            try:
                read.append(overlay_from_api(overlay))
            except OverlayError:
                continue
        return order(read)


class OverlaidCloudProvider:
    """`inner`, whose instance types come with the store's overlays applied.

    Side effects: exactly `inner`'s.
    """

    def __init__(self, inner: CloudProvider, store: OverlayStore) -> None:
        self._inner = inner
        self._store = store
        # NodePool name -> (provider catalog, overlays, selection, overlaid catalog).
        self._applied: dict[
            str,
            tuple[
                Sequence[InstanceType], tuple[Overlay, ...], Requirements, tuple[InstanceType, ...]
            ],
        ] = {}

    @property
    def inner(self) -> CloudProvider:
        """The wrapped provider: the catalog as the cloud reports it."""
        return self._inner

    @property
    def store(self) -> OverlayStore:
        return self._store

    @property
    def name(self) -> str:
        return self._inner.name

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """`inner`'s launch, asked without the requests of extended resources only overlays
        declare: the provider's own catalog does not report them, while the NodeClaim's
        instance types were chosen because the overlaid catalog does. The NodeClaim comes back
        with its spec as written and its type's capacity as the overlaid catalog has it
        (`OverlayStore.launched`; `get` and `list` alike)."""
        added = {r for overlay in self._store.overlays() for r in overlay.capacity}
        requests = nodeclaim.spec.resources.requests
        if not added.intersection(requests):
            return self._store.launched(await self._inner.create(nodeclaim))
        resources = attrs.evolve(
            nodeclaim.spec.resources,
            requests={k: v for k, v in requests.items() if k not in added},
        )
        asked = attrs.evolve(nodeclaim, spec=attrs.evolve(nodeclaim.spec, resources=resources))
        launched = await self._inner.create(asked)
        return self._store.launched(attrs.evolve(launched, spec=nodeclaim.spec))

    async def delete(self, nodeclaim: NodeClaim) -> None:
        await self._inner.delete(nodeclaim)

    async def get(self, provider_id: str) -> NodeClaim:
        return self._store.launched(await self._inner.get(provider_id))

    async def list(self) -> Sequence[NodeClaim]:
        return tuple(self._store.launched(c) for c in await self._inner.list())

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """`inner`'s catalog for `nodepool` with the overlays applied. Providers hand out the
        same catalog object until it changes, so the last result per pool is kept and handed
        out again while the catalog, the overlays and the pool's labels are the same."""
        types = await self._inner.get_instance_types(nodepool)
        overlays = self._store.overlays()
        if not overlays:
            return types
        selection = nodepool_selection(nodepool)
        name = nodepool.metadata.name or ""
        cached = self._applied.get(name)
        if cached is not None and cached[0] is types and cached[1:3] == (overlays, selection):
            return cached[3]
        overlaid = apply(types, selection, overlays)
        self._applied[name] = (types, overlays, selection, overlaid)
        return overlaid

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        return await self._inner.is_drifted(nodeclaim)

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        return self._inner.repair_policies()

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return self._inner.supported_node_classes()

    def well_known_labels(self) -> frozenset[str]:
        return self._inner.well_known_labels()
