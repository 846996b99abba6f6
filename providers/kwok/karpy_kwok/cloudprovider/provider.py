"""KwokCloudProvider: "launches" instances by creating Node objects that kwok then runs.

So the provisioning path — NodeClaim, launch, registration, initialization — runs end to end on
any cluster. What an instance is (a Node), how it is named and recognised, and how launches wait
out a registration delay are in ``karpy_kwok.providers``; the passes that finish delayed launches
and collect leaked Nodes are in ``karpy_kwok.controllers``, which ``extension()`` declares.

Registration delay. A real instance takes a while to join. With ``registration_delay`` > 0 (or
the KWOKNodeClass's ``nodeRegistrationDelay``), ``create`` returns at once (the NodeClaim is
Launched) and holds a *pending launch*; the ``kwok.launches`` pass creates its Node once the
delay has passed. With no delay the Node is created inside ``create``.

Pending launches outlive the process. They are held in memory, but the NodeClaim records each
one: Launched with a kwok providerID, not yet Registered, and no Node of its name. A process
started after a crash holds those launches again (``resume``, once cluster state has synced and
before it answers ``get`` or ``list``), due when the first process would have created their
Nodes, so a crash costs a waiting launch nothing: garbage collection never sees it missing.

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

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import (
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.protocol import DriftReason, NodeClassKind, RepairPolicy
from karpy.cloudprovider.registry import LaunchCatalog
from karpy.cloudprovider.selection import cheapest_launch, launched_nodeclaim
from karpy.core.instancetypes import InstanceType
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.manager import ProviderExtension
from karpy.runtime.clock import Clock, SystemClock
from karpy.state.conditions import claim_is_true, get_condition
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
        launch_catalog: LaunchCatalog | None = None,
    ) -> None:
        """`launch_catalog` (NodeOverlays, with their gate) gives the types as the scheduler
        saw them: launches are chosen from those, so an overlaid price ranks them and an
        overlaid extended resource is on the Node, as the device plugin it stands for would
        report it."""
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
        self._resumed = False
        self._resuming = asyncio.Lock()
        self._launch_catalog = launch_catalog

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
        types = (
            self._types
            if self._launch_catalog is None
            else self._launch_catalog(nodeclaim, self._types)
        )
        launch = cheapest_launch(nodeclaim, types)
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
        await self.resume()
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
        await self.resume()
        found = {
            node.metadata.name: nodeclaim_of(node)
            for node in await self._instances.read_all()
            if is_ours(node)
        }
        for name, pending in self._instances.pending_nodeclaims():
            found.setdefault(name, pending)
        return tuple(found.values())

    async def resume(self) -> bool:
        """Hold again the launches an earlier process left waiting for their Node; whether that
        is done (once per process; False while cluster state has not synced). Built without
        cluster state (tests) there are no NodeClaims to resume from: done at once.

        A launch left waiting is a NodeClaim Launched with a kwok providerID, not Registered
        and not being deleted, whose Node does not exist: its Node is built from the NodeClaim
        (which records what was launched) and falls due at its Launched time plus the
        registration delay. A Registered NodeClaim without a Node lost an instance that existed,
        which garbage collection must see. A NodeClaim whose KWOKNodeClass is not Ready any more
        is left to garbage collection too.
        """
        view = self._view
        if self._resumed:
            return True
        if view is None:
            return True
        if not view.informers_synced:
            return False
        async with self._resuming:  # a concurrent caller waits for the first to finish
            if not self._resumed:
                for claim in view.nodeclaims():
                    await self._resume_one(claim)
                self._resumed = True
        return True

    async def _resume_one(self, claim: NodeClaim) -> None:
        name = node_name_of(claim.status.provider_id or "")
        launched = get_condition(claim, ConditionType.LAUNCHED)
        if (
            name is None
            or claim.metadata.deletion_timestamp is not None
            or launched is None
            or launched.status is not ConditionStatus.TRUE
            or claim_is_true(claim, ConditionType.REGISTERED)
            or self._instances.pending(name) is not None
            or await self._instances.read(name) is not None
        ):
            return
        try:
            nodeclass = await self._nodeclasses.ready(
                claim.spec.node_class_ref, owner=f"nodeclaim {claim.metadata.name!r}"
            )
        except NodeClassNotReadyError as error:
            log.warning("not resuming kwok launch", extra={"nodeclaim": name, "error": str(error)})
            return
        waited = (self._clock.now() - launched.last_transition_time).total_seconds()
        left = max(0.0, self._registration_delay(nodeclass) - waited)
        due = asyncio.get_running_loop().time() + left
        self._instances.hold(PendingLaunch(node_of(claim), claim, due))
        log.info(
            "resumed pending kwok launch",
            extra={
                "nodeclaim": name,
                "provider_id": claim.status.provider_id,
                "due_in_seconds": round(left, 3),
            },
        )

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
        return extension(
            self._kube, self._view, self._instances, clock=self._clock, resume=self.resume
        )

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
