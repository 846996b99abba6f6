"""AWSCloudProvider: karpy's CloudProvider contract, kept with EC2 through the karpy_aws pieces.

Controllers know only ``karpy.cloudprovider.CloudProvider``. This class composes the AWS
building blocks — the NodeClass's resolved status, the instance-type catalog, the launch plan,
launch templates, CreateFleet, the unavailable-offerings cache — into the Protocol's methods, and
is the boundary where karpy_aws's own errors become the contract's (NodeClaimNotFoundError,
InsufficientCapacityError, NodeClassNotReadyError, CreateError), chained with ``from``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Final, Protocol

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import (
    CloudProviderError,
    CreateError,
    DriftReason,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassKind,
    NodeClassNotReadyError,
    RepairPolicy,
)
from karpy.cloudprovider.requirements import requirements_from_api, resources_from_quantities
from karpy.core.instancetypes import InstanceType
from karpy.core.requirements import RequirementError, Requirements
from karpy.core.resources import QuantityError, Resources
from karpy.manager import Declaration, ProviderExtension
from karpy.runtime.clock import Clock
from karpy_aws import errors as aws
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.ec2nodeclass_status import ConditionType
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.cloudprovider.drift import reservation_drift, resource_drift, static_drift
from karpy_aws.cloudprovider.maintenance import MAINTENANCE_PERIOD, MaintenanceController
from karpy_aws.cloudprovider.nodeclaims import (
    LaunchInputs,
    launched_nodeclaim,
    nodeclaim_from,
)
from karpy_aws.providers.capacityreservations import (
    ReservationAvailability,
    with_reserved_offerings,
)
from karpy_aws.providers.cluster import ClusterInfo
from karpy_aws.providers.instance import (
    Instances,
    client_token,
    fleet_request,
    launch_tags,
    parse_provider_id,
)
from karpy_aws.providers.instancetype.instancetypes import EFA, PODS
from karpy_aws.providers.instancetype.offerings import AWSInstanceType, InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.launch import (
    Candidate,
    LaunchGroup,
    LaunchPlan,
    as_candidates,
    choose_capacity_type,
    compatible_candidates,
    min_values_shortfall,
    on_demand_fallback_warning,
    plan_launch,
    restrict_to_zones,
)
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.network import Subnet
from karpy_aws.providers.nodeclass import static_hash, subnet_terms
from karpy_aws.providers.subnets import ZonalSubnets

NODECLASS_KIND: Final = NodeClassKind(group=awslabels.AWS_GROUP, kind="EC2NodeClass")
# Karpenter's AWS repair policies: kubelet's Ready, and the node monitoring agent's conditions.
REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
    RepairPolicy("AcceleratedHardwareReady", "False", timedelta(minutes=10)),
    RepairPolicy("StorageReady", "False", timedelta(minutes=30)),
    RepairPolicy("NetworkingReady", "False", timedelta(minutes=30)),
    RepairPolicy("KernelReady", "False", timedelta(minutes=30)),
    RepairPolicy("ContainerRuntimeReady", "False", timedelta(minutes=30)),
)
CREATE_FAILED_REASON: Final = "InstanceCreationFailed"
_CANDIDATE_CACHE_SIZE: Final = 32

log = logging.getLogger(__name__)


class NodeClassSource(Protocol):
    """Where the provider reads EC2NodeClasses (the cluster state in production)."""

    async def get(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass called ``name``, or None if there is none."""
        ...


def is_ready(nodeclass: EC2NodeClass) -> bool:
    """True when the NodeClass's Ready condition is True."""
    return any(
        c.type == ConditionType.READY and c.status == ConditionStatus.TRUE
        for c in nodeclass.status.conditions
    )


def _catalog_read_done(read: asyncio.Task[bool]) -> None:
    """Every caller waiting on the read got its error; one that all its callers stopped waiting
    for is still seen here, and the next caller starts a new read."""
    if read.cancelled():
        return
    error = read.exception()
    if error is not None:
        log.debug("instance type catalog read failed", extra={"error": repr(error)})


class AWSCloudProvider:
    """karpy.cloudprovider.CloudProvider for EC2. Safe to call from concurrent reconciles."""

    def __init__(
        self,
        instances: Instances,
        catalog: InstanceTypeCatalog,
        *,
        cluster: ClusterInfo,
        nodeclasses: NodeClassSource,
        launch_templates: LaunchTemplates,
        unavailable: UnavailableOfferings,
        clock: Clock,
        on_close: Callable[[], Awaitable[None]] | None = None,
        controllers: tuple[Declaration, ...] = (),
        maintenance_period: float = MAINTENANCE_PERIOD,
        reservations: ReservationAvailability | None = None,
    ) -> None:
        self._on_close = on_close
        self._controllers = controllers
        self._maintenance = MaintenanceController(self, period=maintenance_period)
        self._instances = instances
        self._catalog = catalog
        self._cluster = cluster
        self._nodeclasses = nodeclasses
        self._templates = launch_templates
        self._unavailable = unavailable
        self._clock = clock
        self._catalog_read: asyncio.Task[bool] | None = None
        self._candidates: dict[tuple[object, ...], tuple[Candidate, ...]] = {}
        self._subnets = ZonalSubnets(instances.ec2, clock)
        self._reservations = reservations or ReservationAvailability(instances.ec2, clock)
        self._reserved_launches = asyncio.Lock()

    @property
    def name(self) -> str:
        return "aws"

    @property
    def cluster(self) -> ClusterInfo:
        """The cluster this provider's nodes join, in the region it launches in."""
        return self._cluster

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        return REPAIR_POLICIES

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return (NODECLASS_KIND,)

    def well_known_labels(self) -> frozenset[str]:
        return awslabels.LABELS.well_known

    # ------------------------------------------------------------------ upkeep (not Protocol)

    async def aclose(self) -> None:
        """Release what the factory opened for this provider (the AWS session)."""
        read, self._catalog_read = self._catalog_read, None
        if read is not None and not read.done():
            read.cancel()
            await asyncio.wait([read])
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            await on_close()

    def extension(self) -> ProviderExtension:
        """What the operator runs for this provider on the leader: its EC2NodeClass kind
        (informed into cluster state, where launches read it), upkeep (``start_leading`` once,
        then ``maintain`` periodically) and the loops the factory composed: the EC2NodeClass
        controller, leaked-instance garbage collection, tagging of registered NodeClaims'
        instances, instance-status polling, and the interruption controller when an
        interruption queue is configured."""
        return ProviderExtension(
            kinds=(EC2NODECLASSES,),
            controllers=(self._maintenance.spec(), *self._controllers),
        )

    async def start_leading(self) -> int:
        """Adopt the cluster's existing launch templates so unused ones expire and are deleted
        (call when this replica becomes leader); return how many were found."""
        return await self._templates.hydrate(self._cluster.name)

    async def maintain(self) -> tuple[str, ...]:
        """Periodic upkeep for the leader: re-read instance types and prices when due, forget
        expired capacity errors, delete launch templates unused for their TTL (returned)."""
        await self._read_catalog()
        self._unavailable.cleanup()
        return await self._templates.delete_expired()

    # ------------------------------------------------------------------ shared lookups

    async def _ensure_catalog(self) -> None:
        # Expired capacity errors must stop hiding offerings now, not at the next sweep.
        self._unavailable.cleanup()
        if not self._catalog.loaded:
            await self._read_catalog()

    async def _read_catalog(self) -> None:
        """Join the catalog read in flight, or start one that every caller shares.

        The read runs in a task of its own that a caller's deadline or cancellation does not
        end: the whole catalog is one large answer, and a read abandoned half way is built again
        from the start by the endpoint for the next caller, so under load callers that each
        give up in turn would never get it (and only add to the endpoint's work)."""
        read = self._catalog_read
        if read is None or read.done():
            read = asyncio.create_task(self._catalog.refresh(), name="aws.catalog.read")
            read.add_done_callback(_catalog_read_done)
            self._catalog_read = read
        await asyncio.shield(read)

    async def _nodeclass(self, ref: NodeClassReference, *, ready: bool) -> EC2NodeClass:
        """The EC2NodeClass `ref` names. A reference to another group or kind is never served by
        name alone: an EC2NodeClass that happens to share the name is not the class asked for."""
        if (ref.group, ref.kind) != (NODECLASS_KIND.group, NODECLASS_KIND.kind):
            msg = (
                f"nodeClassRef {ref.group}/{ref.kind} {ref.name!r}: the aws provider serves only "
                f"{NODECLASS_KIND.group}/{NODECLASS_KIND.kind}"
            )
            raise NodeClassNotReadyError(msg)
        name = ref.name
        nodeclass = await self._nodeclasses.get(name)
        if nodeclass is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {name!r} not found")
        if ready and not is_ready(nodeclass):
            raise NodeClassNotReadyError(f"EC2NodeClass {name!r} is not Ready")
        return nodeclass

    async def _instance_types(
        self, nodeclass: EC2NodeClass, inputs: LaunchInputs
    ) -> tuple[Candidate, ...]:
        """The NodeClass's types in both views, rebuilt only when the catalog, availability or
        the NodeClass's zones change (building the scheduler's view is the costly part)."""
        await self._ensure_catalog()
        reservations = nodeclass.status.capacity_reservations
        if reservations:
            await self._reservations.refresh(r.id for r in reservations)
        zones = frozenset(s.zone for s in nodeclass.status.subnets)
        key = (
            inputs,
            zones,
            reservations,
            self._catalog.generation,
            self._catalog.learned.seq_num,
            self._unavailable.seq_num,
            self._reservations.seq_num,
        )
        cached = self._candidates.get(key)
        if cached is None:
            types = self._catalog.instance_types(
                family=inputs.family,
                kubelet=inputs.kubelet,
                ephemeral_storage_gib=inputs.ephemeral,
                instance_store_raid0=inputs.raid0,
                efa_interfaces=inputs.efa_interfaces,
            )
            if reservations:
                zone_ids = {s.zone: s.zone_id or "" for s in nodeclass.status.subnets}
                types = with_reserved_offerings(
                    types,
                    reservations,
                    available=self._available_reservation,
                    zone_ids=zone_ids,
                )
            launchable = (t for t in types if inputs.can_launch(t))
            cached = as_candidates(restrict_to_zones(launchable, zones))
            if len(self._candidates) >= _CANDIDATE_CACHE_SIZE:
                self._candidates.clear()
            self._candidates[key] = cached
        return cached

    def _available_reservation(self, reservation_id: str) -> int:
        return self._reservations.available(reservation_id)

    # ------------------------------------------------------------------ Protocol

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """Every instance type the pool's EC2NodeClass can launch; offerings outside its
        subnets' zones or recently refused are marked unavailable."""
        nodeclass = await self._nodeclass(nodepool.spec.template.spec.node_class_ref, ready=False)
        try:
            inputs = LaunchInputs.of(nodeclass)
            types = await self._instance_types(nodeclass, inputs)
        except aws.ConfigurationError as e:
            raise NodeClassNotReadyError(str(e)) from e
        except aws.AWSError as e:
            raise CloudProviderError(f"listing instance types: {e}") from e
        return tuple(c.core for c in types)

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        name = nodeclaim.metadata.name
        nodeclass = await self._nodeclass(nodeclaim.spec.node_class_ref, ready=True)
        try:
            requirements = requirements_from_api(nodeclaim.spec.requirements)
            requests = resources_from_quantities(
                nodeclaim.spec.resources.requests, field="spec.resources.requests"
            )
        except (RequirementError, QuantityError) as e:
            raise CreateError(
                f"nodeclaim {name}: {e}",
                condition_reason="InvalidNodeClaim",
                condition_message=str(e),
            ) from e
        try:
            inputs = LaunchInputs.of(nodeclass)
            types = await self._instance_types(nodeclass, inputs)
            subnets = await self._subnets.for_launch(subnet_terms(nodeclass.spec))
        except aws.ConfigurationError as e:
            raise NodeClassNotReadyError(str(e)) from e
        except aws.AWSError as e:
            raise _create_error(e) from e
        candidates = compatible_candidates(types, requirements, requests)
        capacity_type = _capacity_type(name, candidates, requirements)
        async with contextlib.AsyncExitStack() as reserving:
            if capacity_type == wk.CAPACITY_TYPE_RESERVED:
                # Launches into reservations go one at a time, each seeing the room the ones
                # before it took: however many NodeClaims a scheduling pass makes, no more of
                # them go into a reservation than it has instances left; the others launch as
                # the other capacity types their requirements allow (or, allowing only
                # reserved, wait for room).
                await reserving.enter_async_context(self._reserved_launches)
                try:
                    types = await self._instance_types(nodeclass, inputs)
                except aws.AWSError as e:
                    raise _create_error(e) from e
                candidates = compatible_candidates(types, requirements, requests)
                capacity_type = _capacity_type(name, candidates, requirements)
            return await self._create_as(
                nodeclaim,
                nodeclass,
                inputs,
                requirements,
                requests,
                candidates,
                capacity_type,
                subnets,
            )

    async def _create_as(
        self,
        nodeclaim: NodeClaim,
        nodeclass: EC2NodeClass,
        inputs: LaunchInputs,
        requirements: Requirements,
        requests: Resources,
        candidates: Sequence[Candidate],
        capacity_type: str,
        subnets: Mapping[str, Subnet],
    ) -> NodeClaim:
        """Plan the launch of ``nodeclaim`` as ``capacity_type`` among ``candidates``, launch
        it, and return it as launched."""
        name = nodeclaim.metadata.name
        if on_demand_fallback_warning(capacity_type, requirements, candidates):
            log.warning(
                "at least 5 instance types are recommended when flexible to spot but "
                "requesting on-demand",
                extra={"nodeclaim": name, "instance_types": len(candidates)},
            )
        plan = plan_launch(
            candidates,
            requirements,
            capacity_type=capacity_type,
            subnets=subnets,
            amis=nodeclass.status.amis,
            efa=requests.get(EFA, 0) > 0,
        )
        if not plan.groups:
            raise InsufficientCapacityError(
                f"nodeclaim {name}: no compatible instance type has an AMI and a subnet"
            )
        shortfall = min_values_shortfall(plan.candidates, requirements)
        if shortfall is not None:
            raise CreateError(
                f"nodeclaim {name}: {shortfall}",
                condition_reason="InstanceTypeFilteringFailed",
                condition_message=shortfall,
            )
        instance_id, zone, instance_type, group = await self._launch(
            plan, nodeclaim, nodeclass, inputs
        )
        candidate = plan.candidate(instance_type, zone=zone)
        override = plan.override(instance_type, zone=zone)
        if group is not None and group.capacity_reservation_id is not None:
            self._reservations.launched(group.capacity_reservation_id)
        if candidate is None or override is None:
            raise CreateError(
                f"nodeclaim {name}: EC2 launched {instance_type} in {zone}, which was not asked",
                condition_reason=CREATE_FAILED_REASON,
                condition_message="CreateFleet returned an unexpected instance type or zone",
            )
        # The node's pods take addresses from its subnet (VPC CNI), plus one for the node.
        self._subnets.reserve(override.subnet_id, candidate.aws.capacity.get(PODS, 0) + 1)
        return launched_nodeclaim(
            nodeclaim,
            candidate=candidate,
            override=override,
            instance_id=instance_id,
            capacity_type=capacity_type,
            region=self._cluster.region,
            nodeclass_hash=static_hash(nodeclass.spec),
            reservation=group,
        )

    async def _launch(
        self, plan: LaunchPlan, nodeclaim: NodeClaim, nodeclass: EC2NodeClass, inputs: LaunchInputs
    ) -> tuple[str, str, str, LaunchGroup | None]:
        """Ensure the templates and call CreateFleet (once more if a template vanished);
        record capacity errors (a full reservation has no room until EC2 says otherwise);
        return (instance id, zone, instance type, the launch group it came from)."""
        name = nodeclaim.metadata.name
        tags = launch_tags(
            cluster_name=self._cluster.name,
            nodepool=nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
            nodeclass=nodeclass.metadata.name or "",
            nodeclaim=name or "",
            user_tags=nodeclass.spec.tags,
        )
        for attempt in (1, 2):
            try:
                names = {}
                for group in plan.groups:
                    options = inputs.template_options(
                        self._cluster, nodeclaim, nodeclass, group=group, plan=plan
                    )
                    names[group.key] = (await self._templates.ensure(options)).name
                launched = await self._instances.create_fleet(
                    fleet_request(
                        plan,
                        templates=names,
                        tags=tags,
                        token=client_token(nodeclaim.metadata.uid or ""),
                        context=nodeclass.spec.context,
                    )
                )
            except aws.NotFoundError as e:
                if e.code != aws.LAUNCH_TEMPLATE_NOT_FOUND_CODE or attempt == 2:
                    raise _create_error(e) from e
                for template in names.values():
                    self._templates.invalidate(template)
                continue
            except aws.InsufficientCapacityError as e:
                raise InsufficientCapacityError(f"nodeclaim {name}: {e}") from e
            except aws.ConfigurationError as e:
                raise NodeClassNotReadyError(str(e)) from e
            except aws.AWSError as e:
                if e.code != aws.IDEMPOTENT_MISMATCH_CODE or not name:
                    raise _create_error(e) from e
                # This NodeClaim's client token launched before (a process that crashed before
                # recording it) and the retry's parameters differ (prices, subnets moved on):
                # EC2 refuses it, and the first call's instance is the NodeClaim's.
                try:
                    earlier = await self._instances.find_launched(name)
                except aws.AWSError as lookup:
                    raise _create_error(lookup) from e
                if earlier is None:
                    raise _create_error(e) from e
                log.info(
                    "adopted instance launched before restart",
                    extra={"nodeclaim": name, "instance": earlier.id},
                )
                return earlier.id, earlier.zone, earlier.instance_type, None
            break
        groups = {names[g.key]: g for g in plan.groups}
        for error in launched.errors:
            failed = groups.get(error.template_name or "")
            if (
                failed is not None
                and failed.capacity_reservation_id is not None
                and error.unfulfillable_capacity
            ):
                self._reservations.exhausted(failed.capacity_reservation_id)
                log.info(
                    "capacity reservation is full",
                    extra={"nodeclaim": name, "reservation": failed.capacity_reservation_id},
                )
        if plan.capacity_type != wk.CAPACITY_TYPE_RESERVED:
            self._unavailable.mark_fleet_errors(launched.errors, capacity_type=plan.capacity_type)
        for error in launched.errors:
            if error.code == aws.INSUFFICIENT_FREE_ADDRESSES_CODE and error.subnet_id:
                self._subnets.exhausted(error.subnet_id)
        if launched.instance_id is None or launched.zone is None or launched.instance_type is None:
            codes = sorted({e.code for e in launched.errors})
            if launched.errors and all(e.unfulfillable_capacity for e in launched.errors):
                raise InsufficientCapacityError(
                    f"nodeclaim {name}: no capacity for any offering ({', '.join(codes)})"
                )
            message = f"CreateFleet launched nothing ({', '.join(codes) or 'no errors given'})"
            raise CreateError(
                f"nodeclaim {name}: {message}",
                condition_reason=CREATE_FAILED_REASON,
                condition_message=message,
            )
        source = groups.get(launched.template_name or "") or plan.group(
            launched.instance_type, zone=launched.zone
        )
        return launched.instance_id, launched.zone, launched.instance_type, source

    async def _types_by_name(self, nodeclass_name: str | None) -> dict[str, AWSInstanceType]:
        nodeclass = None if not nodeclass_name else await self._nodeclasses.get(nodeclass_name)
        inputs = LaunchInputs.default()
        if nodeclass is not None:
            with contextlib.suppress(aws.ConfigurationError):  # a bad spec: describe by default
                inputs = LaunchInputs.of(nodeclass)
        await self._ensure_catalog()
        types = self._catalog.instance_types(
            family=inputs.family,
            kubelet=inputs.kubelet,
            ephemeral_storage_gib=inputs.ephemeral,
            instance_store_raid0=inputs.raid0,
            efa_interfaces=inputs.efa_interfaces,
        )
        return {t.name: t for t in types}

    async def get(self, provider_id: str) -> NodeClaim:
        try:
            instance = await self._instances.get(parse_provider_id(provider_id))
            types = await self._types_by_name(instance.tags.get(awslabels.LABEL_AWS_EC2NODECLASS))
        except (aws.NotFoundError, aws.ConfigurationError) as e:
            raise NodeClaimNotFoundError(f"instance {provider_id}: {e}") from e
        except aws.AWSError as e:
            raise CloudProviderError(f"getting instance {provider_id}: {e}") from e
        return nodeclaim_from(instance, types.get(instance.instance_type), now=self._clock.now())

    async def list(self) -> Sequence[NodeClaim]:
        try:
            instances = await self._instances.list()
            types = await self._types_by_name(None)
        except aws.AWSError as e:
            raise CloudProviderError(f"listing instances: {e}") from e
        now = self._clock.now()
        return tuple(nodeclaim_from(i, types.get(i.instance_type), now=now) for i in instances)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        provider_id = nodeclaim.status.provider_id
        if not provider_id:
            await self._delete_unrecorded(nodeclaim)
            return
        try:
            instance = await self._instances.get(parse_provider_id(provider_id))
            await self._instances.terminate([instance.id])
        except (aws.NotFoundError, aws.ConfigurationError) as e:
            raise NodeClaimNotFoundError(f"instance {provider_id}: {e}") from e
        except aws.AWSError as e:
            raise CloudProviderError(f"terminating instance {provider_id}: {e}") from e
        log.info("terminated instance", extra={"provider_id": provider_id})

    async def _delete_unrecorded(self, nodeclaim: NodeClaim) -> None:
        """A NodeClaim deleted before its providerID was written may still have an instance:
        a process that launched it and died before the status write leaves one, tagged with
        the NodeClaim's name at launch. It goes with its NodeClaim instead of waiting for
        leaked-instance collection, which a slow or failing EC2 can delay for minutes.
        NodeClaimNotFoundError when there is none (any more)."""
        name = nodeclaim.metadata.name or ""
        try:
            launched = await self._instances.find_launched(name) if name else None
            if launched is None:
                raise NodeClaimNotFoundError(f"nodeclaim {name} has no providerID and no instance")
            await self._instances.terminate([launched.id])
        except (aws.NotFoundError, aws.ConfigurationError) as e:
            raise NodeClaimNotFoundError(f"instance of nodeclaim {name}: {e}") from e
        except aws.AWSError as e:
            raise CloudProviderError(f"terminating the instance of nodeclaim {name}: {e}") from e
        log.info(
            "terminated instance launched before restart",
            extra={"nodeclaim": name, "provider_id": launched.provider_id},
        )

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """NodeClassDrift (static hash), CapacityReservationDrift, then AMIDrift,
        SecurityGroupDrift, SubnetDrift, as Karpenter checks them; None when the NodeClass is
        gone (nothing to compare with)."""
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != (NODECLASS_KIND.group, NODECLASS_KIND.kind):
            return None  # not an EC2NodeClass: nothing of ours to compare with
        nodeclass = await self._nodeclasses.get(ref.name)
        if nodeclass is None:
            return None
        reason = static_drift(nodeclaim, nodeclass) or await self._reservation_drift(
            nodeclaim, nodeclass
        )
        if reason is not None or not nodeclaim.status.provider_id:
            return reason
        try:
            instance = await self._instances.get(parse_provider_id(nodeclaim.status.provider_id))
        except (aws.NotFoundError, aws.ConfigurationError) as e:
            raise NodeClaimNotFoundError(f"instance {nodeclaim.status.provider_id}: {e}") from e
        except aws.AWSError as e:
            raise CloudProviderError(f"checking drift: {e}") from e
        return resource_drift(instance, nodeclass)

    async def _reservation_drift(
        self, nodeclaim: NodeClaim, nodeclass: EC2NodeClass
    ) -> DriftReason | None:
        """CapacityReservationDrift for a NodeClaim in a reservation the NodeClass no longer
        selects, unless the reservation ended: its instance then runs on as on-demand and is
        relabelled so (karpy_aws.controllers.capacitytype), not replaced, as Karpenter does."""
        reason = reservation_drift(nodeclaim, nodeclass)
        reservation = nodeclaim.metadata.labels.get(awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID)
        if reason is None or reservation is None:
            return reason
        try:
            await self._reservations.refresh((reservation,))
        except aws.AWSError as e:
            raise CloudProviderError(f"checking drift: {e}") from e
        return None if self._reservations.ended(reservation) else reason


def _capacity_type(
    name: str | None, candidates: Sequence[Candidate], requirements: Requirements
) -> str:
    """The capacity type to launch ``name`` as; InsufficientCapacityError when no candidate
    is left."""
    if not candidates:
        raise InsufficientCapacityError(
            f"nodeclaim {name}: no instance type satisfies the requirements and requests "
            "with an available offering"
        )
    return choose_capacity_type(candidates, requirements)


def _create_error(error: aws.AWSError) -> CreateError:
    return CreateError(
        f"creating instance: {error}",
        condition_reason=CREATE_FAILED_REASON,
        condition_message=f"{error.code}: {error.message}"[:1024],
    )
