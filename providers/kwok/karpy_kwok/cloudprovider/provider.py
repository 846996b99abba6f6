"""KwokCloudProvider: "launches" instances by creating Node objects that kwok then runs.

So the provisioning path — NodeClaim, launch, registration, initialization — runs end to end on
any cluster. What an instance is (a Node), how it is named and recognised, and how launches wait
out a registration delay are in ``karpy_kwok.providers``; the passes that finish delayed launches
and collect leaked Nodes are in ``karpy_kwok.controllers``, which ``extension()`` declares.

Registration delay. A real instance takes a while to join. With ``registration_delay`` > 0 (or
the KWOKNodeClass's ``nodeRegistrationDelay``), ``create`` returns at once (the NodeClaim is
Launched) and holds a *pending launch*; the ``kwok.launches`` pass creates its Node once the
delay has passed. With no delay the Node is created inside ``create``.

Insufficient capacity. Offerings matched by ``unavailable`` selectors (settable at runtime with
``set_unavailable``) are reported with ``available=False`` and never launched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Final

import attrs

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import InsufficientCapacityError, NodeClaimNotFoundError
from karpy.cloudprovider.protocol import DriftReason, NodeClassKind, RepairPolicy
from karpy.cloudprovider.selection import cheapest_launch, launched_nodeclaim
from karpy.core.instancetypes import InstanceType
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.manager import ProviderExtension
from karpy.runtime.clock import Clock, SystemClock
from karpy.state.view import ClusterView
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from karpy_kwok.apis.labels import LABELS
from karpy_kwok.catalog import CatalogEntry, OfferingSelector, instance_types
from karpy_kwok.cloudprovider.drift import drift_reason
from karpy_kwok.controllers.extension import extension
from karpy_kwok.providers.instance import KwokInstances, PendingLaunch
from karpy_kwok.providers.nodeclass import KWOK_NODE_CLASS, NodeClasses, stamped
from karpy_kwok.providers.nodes import (
    PROVIDER_ID_PREFIX,
    as_launched,
    is_ours,
    launched_for,
    node_name_of,
    node_of,
    nodeclaim_of,
    provider_id_of,
)

log = logging.getLogger(__name__)

PROVIDER_NAME: Final = "kwok"
REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
)
"""A kwok node that is not Ready for 30 minutes is replaced (Karpenter's kubelet policies)."""


@attrs.frozen(kw_only=True)
class KwokOptions:
    registration_delay: float = 0.0
    """Seconds between a launch and its Node appearing (how long a real instance takes to join)."""
    unavailable: tuple[OfferingSelector, ...] = ()
    """Offerings that are out of capacity from the start."""


class KwokCloudProvider:
    """A CloudProvider whose instances are kwok-managed Nodes (see the module docstring).

    Side effects: creates and deletes Nodes through `kube`; keeps pending launches in memory.
    """

    def __init__(
        self,
        kube: KubeClient,
        catalog: Sequence[CatalogEntry],
        *,
        options: KwokOptions,
        view: ClusterView | None = None,
        clock: Clock | None = None,
    ) -> None:
        if options.registration_delay < 0:
            msg = f"kwok registration_delay must not be negative, got {options.registration_delay}"
            raise ValueError(msg)
        self._kube = kube
        self._view = view
        self._clock = clock or SystemClock()
        self._catalog = tuple(catalog)
        self._options = options
        # Built once per availability change, not per call: the scheduler asks for every batch.
        self._types = instance_types(self._catalog, unavailable=options.unavailable)
        self._instances = KwokInstances(kube, view)
        self._nodeclasses = NodeClasses(kube, view)

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    @property
    def instances(self) -> KwokInstances:
        """The provider's instances (its Nodes and pending launches), which its passes share."""
        return self._instances

    def set_unavailable(self, selectors: Iterable[OfferingSelector]) -> None:
        """Replace the set of out-of-capacity offerings (empty: everything is available)."""
        self._types = instance_types(self._catalog, unavailable=tuple(selectors))

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch on the cheapest compatible available offering (`providers.nodes` for the Node).

        Raises NodeClassNotReadyError when the KWOKNodeClass is missing or not Ready, and
        InsufficientCapacityError when no available offering fits.
        """
        name = nodeclaim.metadata.name
        pending = self._instances.pending(name or "")
        if pending is not None:
            return pending  # a retried create of a launch still pending
        nodeclass = await self._nodeclasses.ready(
            nodeclaim.spec.node_class_ref, owner=f"nodeclaim {name!r}"
        )
        delay = self._registration_delay(nodeclass)
        launch = cheapest_launch(nodeclaim, self._types)
        if launch is None:
            msg = (
                f"nodeclaim {name!r}: no kwok instance type has an available offering that is"
                " compatible with its requirements and fits its requests"
            )
            raise InsufficientCapacityError(msg)
        if not name:
            msg = "nodeclaim has no metadata.name; kwok names its Node after it"
            raise ValueError(msg)
        launched = stamped(
            launched_nodeclaim(nodeclaim, launch, provider_id=provider_id_of(name)), nodeclass
        )
        node = node_of(launched)
        if delay > 0:
            due = asyncio.get_running_loop().time() + delay
            self._instances.hold(PendingLaunch(node, launched, due))
        else:
            existing = await self._instances.create(node)
            if existing is not None:
                # A retried create (the same NodeClaim UID): report the instance that was
                # launched the first time.
                launched = as_launched(launched, existing)
        log.info(
            "launched kwok instance",
            extra={
                "nodeclaim": name,
                "provider_id": launched.status.provider_id,
                "instance_type": launch.instance_type.name,
                "zone": launch.offering.zone,
                "capacity_type": launch.offering.capacity_type,
            },
        )
        return launched

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the Node (or drop the pending launch); NodeClaimNotFoundError once it is gone.

        A NodeClaim without a providerID (deleted before its launch was recorded, or before it
        launched at all) is looked up by name: its Node, if the launch happened, carries its
        UID. A Node held by finalizers still exists, so deleting it again succeeds until it is
        gone.
        """
        provider_id = nodeclaim.status.provider_id
        if provider_id:
            name = _node_name(provider_id)
        else:
            name = nodeclaim.metadata.name or ""
            held = self._instances.pending(name) is not None
            node = await self._instances.read(name) if name and not held else None
            if not held and (
                node is None or not is_ours(node) or launched_for(node) != nodeclaim.metadata.uid
            ):
                msg = f"nodeclaim {name!r} has no providerID and no kwok node of its own"
                raise NodeClaimNotFoundError(msg)
        if self._instances.drop(name):
            return
        try:
            await self._instances.delete(name)
        except NotFoundError as error:
            msg = f"nodeclaim {nodeclaim.metadata.name!r}: kwok node {name!r} not found"
            raise NodeClaimNotFoundError(msg) from error

    async def get(self, provider_id: str) -> NodeClaim:
        name = _node_name(provider_id)
        pending = self._instances.pending(name)
        if pending is not None:
            return pending
        node = await self._instances.read(name)
        if node is None:
            msg = f"kwok instance {provider_id!r} not found"
            raise NodeClaimNotFoundError(msg)
        if not is_ours(node):
            msg = f"kwok instance {provider_id!r} not found (node {name!r} is not a kwok node)"
            raise NodeClaimNotFoundError(msg)
        return nodeclaim_of(node)

    async def list(self) -> Sequence[NodeClaim]:
        found = {
            node.metadata.name: nodeclaim_of(node)
            for node in await self._instances.read_all()
            if is_ours(node)
        }
        for name, pending in self._instances.pending_nodeclaims():
            found.setdefault(name, pending)
        return tuple(found.values())

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """The whole catalog, with out-of-capacity offerings marked, for a NodePool whose
        KWOKNodeClass exists and is Ready; NodeClassNotReadyError otherwise, so the provisioner
        plans nothing on that pool instead of creating NodeClaims that cannot launch."""
        await self._nodeclasses.ready(
            nodepool.spec.template.spec.node_class_ref, owner=f"nodepool {nodepool.metadata.name!r}"
        )
        return self._types

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """NodeClassDrift when the KWOKNodeClass's spec changed since the launch
        (`karpy_kwok.cloudprovider.drift`)."""
        return await drift_reason(nodeclaim, self._nodeclasses)

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        return REPAIR_POLICIES

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return (KWOK_NODE_CLASS,)

    def well_known_labels(self) -> frozenset[str]:
        return LABELS.well_known

    def extension(self) -> ProviderExtension:
        """The KWOKNodeClass kind and the provider's passes (`karpy_kwok.controllers.extension`)."""
        return extension(self._kube, self._view, self._instances, clock=self._clock)

    def _registration_delay(self, nodeclass: KWOKNodeClass) -> float:
        """Seconds before the Node appears: the NodeClass's spec.nodeRegistrationDelay when it
        sets one, else the provider's registration-delay setting."""
        if nodeclass.spec.node_registration_delay is not None:
            return nodeclass.spec.registration_delay().total_seconds()
        return self._options.registration_delay


def _node_name(provider_id: str) -> str:
    name = node_name_of(provider_id)
    if name is None:
        msg = f"providerID {provider_id!r} is not a kwok providerID ({PROVIDER_ID_PREFIX}<node>)"
        raise NodeClaimNotFoundError(msg)
    return name
