"""ClusterAPICloudProvider: nodes are Machines of the MachineDeployments a ClusterAPINodeClass
selects, grown and shrunk through Cluster API's own controllers.

Create picks the cheapest compatible MachineDeployment with room (one instance type each,
`karpy_clusterapi.providers.machinedeployments`), adds one replica, claims exactly one new
Machine of it for the NodeClaim and returns the Machine's providerID once its infrastructure
sets it (`karpy_clusterapi.providers.machines` for how each write is recorded so a crash neither
loses nor doubles a Machine). Until then create raises CreateError, so the NodeClaim's Launched
condition names the MachineDeployment and what it waits for, and the lifecycle asks again; a
Machine Cluster API reports Failed is named there too. karpy's launch timeout deletes a NodeClaim
still waiting after five minutes, and delete then takes its replica back.

Delete marks the NodeClaim's Machine ``cluster.x-k8s.io/delete-machine`` and takes one replica
off its MachineDeployment, so Cluster API removes exactly that Machine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Final

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import ObjectMeta, with_annotations
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)
from karpy.cloudprovider.protocol import DriftReason, NodeClassKind, RepairPolicy
from karpy.cloudprovider.requirements import quantities_from_resources
from karpy.cloudprovider.selection import Launch, compatible_launches, launched_nodeclaim
from karpy.core.instancetypes import InstanceType
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.manager import ProviderExtension
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.options import WatchingOptions
from karpy.state.informed import InformedKinds
from karpy.state.view import ClusterView
from karpy_clusterapi.apis import labels as capi
from karpy_clusterapi.apis.nodeclass import ClusterAPINodeClass
from karpy_clusterapi.controllers.extension import extension
from karpy_clusterapi.providers.machinedeployments import (
    MachineDeployment,
    MachineDeploymentError,
    Pricing,
    instance_type,
    node_taints,
)
from karpy_clusterapi.providers.machines import Fleet, Machine
from karpy_clusterapi.providers.nodeclass import NODE_CLASS, NodeClasses, selected

log = logging.getLogger(__name__)

PROVIDER_NAME: Final = "clusterapi"
DRIFT_TEMPLATE: Final = DriftReason("MachineTemplateDrift")
DRIFT_SELECTOR: Final = DriftReason("MachineDeploymentNotSelected")


WRITE_SEEN: Final = 5.0
"""Seconds a create that grew and ends without a Machine waits for its informers to show it."""


DEFAULT_PRICING: Final = Pricing(per_vcpu=Decimal("0.032"), per_gib=Decimal("0.004"))
"""Roughly what a general-purpose cloud VM's vCPU and GiB cost per hour."""


@attrs.frozen(kw_only=True)
class ClusterAPIOptions:
    namespace: str | None = None
    """The management cluster namespace of the MachineDeployments (None: all)."""
    pricing: Pricing = DEFAULT_PRICING
    default_zone: str = "default"
    """The zone of a MachineDeployment whose template names no failure domain."""
    create_wait: float = 10.0
    """Seconds one create call waits for its Machine's providerID before it reports progress."""


class ClusterAPICloudProvider:
    """See the module docstring. Side effects: scales MachineDeployments and labels, marks and
    deletes Machines in the management cluster through `management`."""

    def __init__(
        self,
        kube: KubeClient,
        management: KubeClient,
        *,
        options: ClusterAPIOptions,
        view: ClusterView | None = None,
        clock: Clock | None = None,
        owns_management: bool = False,
        watching: WatchingOptions | None = None,
    ) -> None:
        self._kube = kube
        self._management = management
        self._owns_management = owns_management
        self._options = options
        self._view = view
        self._clock = clock or SystemClock()
        self._fleet = Fleet(management, namespace=options.namespace, watching=watching)
        self._nodeclasses = NodeClasses(kube, view)
        self._nodeclaims: InformedKinds | None = None

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    @property
    def fleet(self) -> Fleet:
        return self._fleet

    @property
    def nodeclasses(self) -> NodeClasses:
        return self._nodeclasses

    # ------------------------------------------------------------------ instance types

    async def instance_types_of(
        self, nodeclass: ClusterAPINodeClass, *, taints: Sequence[Taint] | None = None
    ) -> tuple[list[InstanceType], dict[str, MachineDeployment]]:
        """The instance types of the MachineDeployments the NodeClass selects, and those
        MachineDeployments by type name. With `taints`, only MachineDeployments whose nodes
        carry no taint outside them: karpy would otherwise place pods that do not tolerate it."""
        types: list[InstanceType] = []
        by_name: dict[str, MachineDeployment] = {}
        for md in selected(nodeclass, await self._fleet.deployments()):
            try:
                if taints is not None and not _tolerated(node_taints(md), taints):
                    continue
                it = instance_type(
                    md, pricing=self._options.pricing, default_zone=self._options.default_zone
                )
            except MachineDeploymentError as error:
                log.warning("skipping machinedeployment", extra={"error": str(error)})
                continue
            if it.name in by_name:
                log.warning(
                    "skipping machinedeployment",
                    extra={
                        "error": f"machinedeployment {md.key}: another selected one is named "
                        f"{it.name!r} ({by_name[it.name].key})"
                    },
                )
                continue
            types.append(it)
            by_name[it.name] = md
        return types, by_name

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        template = nodepool.spec.template.spec
        nodeclass = await self._nodeclasses.ready(
            template.node_class_ref, owner=f"nodepool {nodepool.metadata.name!r}"
        )
        types, _ = await self.instance_types_of(
            nodeclass, taints=(*template.taints, *template.startup_taints)
        )
        return types

    # ------------------------------------------------------------------ create

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        name = nodeclaim.metadata.name or ""
        uid = _claim_key(nodeclaim)
        if not name:
            msg = "nodeclaim needs metadata.name: its Machine is labelled with it"
            raise ValueError(msg)
        nodeclass = await self._nodeclasses.ready(
            nodeclaim.spec.node_class_ref, owner=f"nodeclaim {name!r}"
        )
        types, by_name = await self.instance_types_of(
            nodeclass, taints=(*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints)
        )
        machine = await self._claimed_for(uid)
        if machine is None:
            md = self._growing_for(uid, by_name.values())
            if md is None:
                md = await self._grow(nodeclaim, types, by_name)
            machine = await self._claim_new(nodeclaim, nodeclass, md)
        return await self._launched(nodeclaim, machine, by_name)

    async def _grow(
        self,
        nodeclaim: NodeClaim,
        types: Sequence[InstanceType],
        by_name: dict[str, MachineDeployment],
    ) -> MachineDeployment:
        """Add a replica to the cheapest compatible MachineDeployment with room."""
        when = self._clock.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for launch in compatible_launches(nodeclaim, types):
            md = by_name[launch.instance_type.name]
            grown = await self._fleet.grow(md, nodeclaim_uid=_claim_key(nodeclaim), when=when)
            if grown is not None:
                log.info(
                    "scaled machinedeployment up",
                    extra={
                        "nodeclaim": nodeclaim.metadata.name,
                        "machinedeployment": grown.key,
                        "replicas": grown.replicas,
                        "price": launch.offering.price,
                    },
                )
                return grown
        msg = (
            f"nodeclaim {nodeclaim.metadata.name!r}: no selected MachineDeployment with room is "
            "compatible with its requirements and fits its requests"
        )
        raise InsufficientCapacityError(msg)

    async def _claimed_for(self, uid: str) -> Machine | None:
        for machine in await self._fleet.claimed():
            if machine.claimed_by == uid:
                return machine
        return None

    @staticmethod
    def _growing_for(
        uid: str, deployments: Iterable[MachineDeployment]
    ) -> MachineDeployment | None:
        """The MachineDeployment that grew for this NodeClaim and awaits its claim, if any."""
        return next((md for md in deployments if uid in md.scale_ups()), None)

    async def _claim_new(
        self, nodeclaim: NodeClaim, nodeclass: ClusterAPINodeClass, md: MachineDeployment
    ) -> Machine:
        """Claim one Machine the MachineDeployment made since it grew for this NodeClaim,
        waiting up to `create_wait` for Cluster API to make it (on the informers' events)."""
        uid = _claim_key(nodeclaim)
        since = _parse_when(md.scale_ups().get(uid))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.create_wait
        while True:
            seen = self._fleet.changes
            for candidate in await self._candidates(md, since):
                claimed = await self._fleet.claim(
                    candidate,
                    nodeclaim=nodeclaim.metadata.name or "",
                    nodeclaim_uid=uid,
                    nodeclass=nodeclass.metadata.name or "",
                )
                if claimed is not None:
                    log.info(
                        "claimed machine",
                        extra={
                            "nodeclaim": nodeclaim.metadata.name,
                            "machine": candidate.key,
                            "machinedeployment": md.key,
                        },
                    )
                    await self._fleet.settle_grow(md, nodeclaim_uid=uid)
                    return claimed
            left = deadline - loop.time()
            if left <= 0:
                break
            await self._fleet.wait_changed(seen, left)
        await self._until_informed(md, uid)
        msg = f"nodeclaim {nodeclaim.metadata.name!r}: {md.key} has no new Machine yet"
        raise CreateError(
            msg,
            condition_reason="MachinePending",
            condition_message=f"waiting for MachineDeployment {md.key} to create a Machine",
        )

    async def _until_informed(self, md: MachineDeployment, uid: str) -> None:
        """Wait, at most WRITE_SEEN, until the informers show the scale-up record: the create
        asked again reads them, and must find that it already grew (not grow a second time)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WRITE_SEEN
        while True:
            seen = self._fleet.changes
            cached = await self._fleet.deployment(md.namespace, md.name)
            left = deadline - loop.time()
            if cached is None or uid in cached.scale_ups() or left <= 0:
                return
            await self._fleet.wait_changed(seen, left)

    async def _candidates(self, md: MachineDeployment, since: datetime | None) -> list[Machine]:
        out = [
            m
            for m in await self._fleet.machines()
            if m.namespace == md.namespace
            and m.deployment == md.name
            and m.claimed_by is None
            and not m.deleting
            and capi.ANNOTATION_DELETE_MACHINE not in m.annotations
            and (since is None or (m.created is not None and m.created >= since))
        ]
        return sorted(out, key=lambda m: (m.created or datetime.min.replace(tzinfo=UTC), m.name))

    async def _launched(
        self, nodeclaim: NodeClaim, machine: Machine, by_name: dict[str, MachineDeployment]
    ) -> NodeClaim:
        """Wait up to `create_wait` for the Machine's providerID, and for the informers to show
        karpy's claim of it, so that `get` and `list` know it once create returns (on the
        informers' events); the launched NodeClaim."""
        where = f"MachineDeployment {machine.namespace}/{machine.deployment}"
        uid = _claim_key(nodeclaim)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.create_wait
        while True:
            seen = self._fleet.changes
            current = await self._fleet.machine(machine.namespace, machine.name)
            if (
                current is None
                or current.deleting
                or (
                    current.claimed_by == uid
                    and (current.provider_id is not None or current.failure is not None)
                )
            ):
                break
            left = deadline - loop.time()
            if left <= 0:
                break
            await self._fleet.wait_changed(seen, left)
        if current is None or current.deleting:
            msg = f"nodeclaim {nodeclaim.metadata.name!r}: machine {machine.key} was deleted"
            raise CreateError(
                msg,
                condition_reason="MachineDeleted",
                condition_message=f"Machine {machine.key} of {where} was deleted before it ran",
            )
        if current.failure is not None:
            msg = f"nodeclaim {nodeclaim.metadata.name!r}: machine {machine.key} failed"
            raise CreateError(
                msg,
                condition_reason="MachineFailed",
                condition_message=f"Machine {machine.key} of {where} failed: {current.failure}",
            )
        if current.provider_id is None:
            msg = f"nodeclaim {nodeclaim.metadata.name!r}: machine {machine.key} has no providerID"
            raise CreateError(
                msg,
                condition_reason="MachinePending",
                condition_message=(
                    f"waiting for Machine {machine.key} of {where} to be provisioned "
                    f"(phase {current.phase or 'unknown'})"
                ),
            )
        md = by_name.get(current.deployment or "")
        if md is None:
            fresh = await self._fleet.deployment(current.namespace, current.deployment or "")
            if fresh is None:
                msg = f"nodeclaim {nodeclaim.metadata.name!r}: {where} is gone"
                raise CreateError(
                    msg,
                    condition_reason="MachineDeploymentNotFound",
                    condition_message=f"{where} of Machine {machine.key} is gone",
                )
            md = fresh
        it = instance_type(
            md, pricing=self._options.pricing, default_zone=self._options.default_zone
        )
        launched = launched_nodeclaim(
            nodeclaim, Launch(it, it.offerings[0]), provider_id=current.provider_id
        )
        metadata = with_annotations(
            launched.metadata,
            {capi.ANNOTATION_MACHINE: current.key, capi.ANNOTATION_TEMPLATE_HASH: md.template_hash},
        )
        log.info(
            "launched clusterapi machine",
            extra={
                "nodeclaim": nodeclaim.metadata.name,
                "machine": current.key,
                "provider_id": current.provider_id,
                "machinedeployment": md.key,
            },
        )
        return attrs.evolve(launched, metadata=metadata)

    # ------------------------------------------------------------------ delete, get, list

    async def delete(self, nodeclaim: NodeClaim) -> None:
        provider_id = nodeclaim.status.provider_id
        uid = _claim_key(nodeclaim)
        claimed = await self._fleet.claimed()
        machine = next(
            (
                m
                for m in claimed
                if (provider_id and m.provider_id == provider_id) or m.claimed_by == uid
            ),
            None,
        )
        if machine is not None:
            if not machine.deleting:
                await self._fleet.release(machine)
            return
        if not provider_id:
            # Grown for but never claimed (deleted mid-create): take the replica back.
            for md in await self._fleet.deployments():
                if uid in md.scale_ups():
                    await self._cancel_grow(md, nodeclaim)
                    return
        await self._fleet.tidy_releases()
        msg = f"nodeclaim {nodeclaim.metadata.name!r}: no Machine of its own"
        raise NodeClaimNotFoundError(msg)

    async def _cancel_grow(self, md: MachineDeployment, nodeclaim: NodeClaim) -> None:
        """The NodeClaim went before it claimed its Machine: claim the Machine made for it, if
        there is one, and remove it; else take the replica back with the record."""
        uid = _claim_key(nodeclaim)
        since = _parse_when(md.scale_ups().get(uid))
        for candidate in await self._candidates(md, since):
            claimed = await self._fleet.claim(
                candidate,
                nodeclaim=nodeclaim.metadata.name or "",
                nodeclaim_uid=uid,
                nodeclass=nodeclaim.spec.node_class_ref.name,
            )
            if claimed is not None:
                await self._fleet.release(claimed)
                await self._fleet.settle_grow(md, nodeclaim_uid=uid)
                return
        await self._fleet.shrink_unclaimed(md, nodeclaim_uid=uid)

    async def get(self, provider_id: str) -> NodeClaim:
        for machine in await self._fleet.claimed():
            if machine.provider_id == provider_id:
                return await self._view_of(machine)
        msg = f"no Machine karpy claimed has providerID {provider_id!r}"
        raise NodeClaimNotFoundError(msg)

    async def list(self) -> Sequence[NodeClaim]:
        return [await self._view_of(m) for m in await self._fleet.claimed()]

    async def _view_of(self, machine: Machine) -> NodeClaim:
        """The NodeClaim view of a claimed Machine."""
        labels = {capi.LABEL_NODECLASS: machine.annotations.get(capi.LABEL_NODECLASS, "")}
        status = NodeClaimStatus(provider_id=machine.provider_id)
        md = await self._fleet.deployment(machine.namespace, machine.deployment or "")
        if md is not None:
            try:
                it = instance_type(
                    md, pricing=self._options.pricing, default_zone=self._options.default_zone
                )
            except MachineDeploymentError:
                it = None
            if it is not None:
                labels.update(it.requirements.labels())
                labels.update(
                    {
                        wk.LABEL_INSTANCE_TYPE: it.name,
                        wk.LABEL_TOPOLOGY_ZONE: it.offerings[0].zone,
                        wk.LABEL_CAPACITY_TYPE: it.offerings[0].capacity_type,
                    }
                )
                status = attrs.evolve(
                    status,
                    capacity=quantities_from_resources(it.capacity),
                    allocatable=quantities_from_resources(it.allocatable),
                )
        return NodeClaim(
            metadata=ObjectMeta(
                name=machine.labels.get(capi.LABEL_CLAIMED_BY),
                labels=labels,
                annotations={capi.ANNOTATION_MACHINE: machine.key},
                creation_timestamp=machine.created,
            ),
            spec=NodeClaimSpec(
                requirements=(),
                node_class_ref=NodeClassReference(
                    group=NODE_CLASS.group,
                    kind=NODE_CLASS.kind,
                    name=labels[capi.LABEL_NODECLASS],
                ),
            ),
            status=status,
        )

    # ------------------------------------------------------------------ drift and the rest

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """MachineTemplateDrift once the MachineDeployment's version, infrastructure or
        bootstrap reference differs from the one the Machine was made from;
        MachineDeploymentNotSelected once the NodeClass no longer selects it."""
        where = nodeclaim.metadata.annotations.get(capi.ANNOTATION_MACHINE)
        recorded = nodeclaim.metadata.annotations.get(capi.ANNOTATION_TEMPLATE_HASH)
        if where is None or recorded is None:
            return None
        namespace, _, machine_name = where.partition("/")
        machine = await self._fleet.machine(namespace, machine_name)
        if machine is None or machine.deployment is None:
            return None
        md = await self._fleet.deployment(namespace, machine.deployment)
        if md is None:
            return DRIFT_SELECTOR
        nodeclass = await self._nodeclasses.read(nodeclaim.spec.node_class_ref.name)
        if nodeclass is not None and md not in selected(nodeclass, [md]):
            return DRIFT_SELECTOR
        if md.template_hash != recorded:
            return DRIFT_TEMPLATE
        return None

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """Karpenter's kubelet policies: NotReady or Unknown for 30 minutes."""
        return REPAIR_POLICIES

    async def repaired_elsewhere(self, nodeclaim: NodeClaim) -> str | None:
        """The MachineHealthCheck covering the NodeClaim's Machine, if one does: it remediates
        that Machine itself (deletes it; its MachineSet makes another), so karpy's node repair
        leaves the node to it rather than replace the same Machine a second time."""
        machine = await self._machine_of(nodeclaim)
        if machine is None:
            return None
        return await self._fleet.health_check_covering(machine)

    async def _machine_of(self, nodeclaim: NodeClaim) -> Machine | None:
        where = nodeclaim.metadata.annotations.get(capi.ANNOTATION_MACHINE)
        if where is not None:
            namespace, _, name = where.partition("/")
            return await self._fleet.machine(namespace, name)
        provider_id = nodeclaim.status.provider_id
        if not provider_id:
            return None
        return next((m for m in await self._fleet.claimed() if m.provider_id == provider_id), None)

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return (NODE_CLASS,)

    def well_known_labels(self) -> frozenset[str]:
        return capi.LABELS.well_known

    def extension(self) -> ProviderExtension:
        """The ClusterAPINodeClass kind and the provider's loops
        (`karpy_clusterapi.controllers.extension`)."""
        return extension(
            self._kube,
            self._view if self._view is not None else self._own_nodeclaims(),
            self._fleet,
            self._nodeclasses,
            clock=self._clock,
            repaired_elsewhere=self.repaired_elsewhere,
        )

    def _own_nodeclaims(self) -> ClusterView:
        """NodeClaims informed by the provider itself, for its loops when it was built outside
        the operator (which otherwise gives it its cluster state); stopped by `aclose`."""
        if self._nodeclaims is None:
            self._nodeclaims = InformedKinds(self._kube, (NODECLAIMS,))
            self._nodeclaims.start()
        return self._nodeclaims.view

    def start(self) -> None:
        """Start the informers over the management cluster's MachineDeployments and Machines
        (the first read starts them too); `aclose` stops them."""
        self._fleet.start()

    async def aclose(self) -> None:
        try:
            await self._fleet.aclose()
            if self._nodeclaims is not None:
                await self._nodeclaims.aclose()
        finally:
            if self._owns_management:
                await self._management.close()

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def view(self) -> ClusterView | None:
        return self._view

    @property
    def kube(self) -> KubeClient:
        return self._kube


REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
)


def _tolerated(node: Sequence[Taint], allowed: Sequence[Taint]) -> bool:
    """Every taint the nodes carry is one the NodePool (or NodeClaim) declares."""
    return all(any(a.key == t.key and a.effect == t.effect for a in allowed) for t in node)


def _claim_key(nodeclaim: NodeClaim) -> str:
    """What a Machine is claimed by: the NodeClaim's UID (its name for one never stored)."""
    return nodeclaim.metadata.uid or nodeclaim.metadata.name or ""


def _parse_when(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
