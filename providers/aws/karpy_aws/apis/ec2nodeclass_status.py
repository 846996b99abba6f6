"""EC2NodeClass status: the AWS resources its selector terms resolved to.

The nodeclass controller writes these; the launch path reads them, so launching never has to
call Describe* on the hot path. Kept apart from the spec module to keep both short.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from datetime import datetime

import attrs

from karpy.apis.kube.common import NodeSelectorRequirement
from karpy.apis.meta import Condition, conditions_field
from karpy.apis.schema import field


class ConditionType(enum.StrEnum):
    SUBNETS_READY = "SubnetsReady"
    SECURITY_GROUPS_READY = "SecurityGroupsReady"
    AMIS_READY = "AMIsReady"
    INSTANCE_PROFILE_READY = "InstanceProfileReady"
    CAPACITY_RESERVATIONS_READY = "CapacityReservationsReady"
    PLACEMENT_GROUP_READY = "PlacementGroupReady"
    VALIDATION_SUCCEEDED = "ValidationSucceeded"
    READY = "Ready"


@attrs.frozen(kw_only=True)
class Subnet:
    id: str = field(doc="Subnet id.")
    zone: str = field(doc="Availability zone name.")
    zone_id: str | None = field(default=None, wire="zoneID", doc="Availability zone id.")


@attrs.frozen(kw_only=True)
class SecurityGroup:
    id: str = field(doc="Security group id.")
    name: str | None = field(default=None, doc="Security group name.")


@attrs.frozen(kw_only=True)
class AMI:
    id: str = field(doc="AMI id.")
    requirements: tuple[NodeSelectorRequirement, ...] = field(
        doc="Instance types this AMI serves (architecture, accelerators, ...).", max_items=100
    )
    name: str | None = field(default=None, doc="AMI name.")
    deprecated: bool | None = field(default=None, doc="The AMI is deprecated.")


class CapacityReservationType(enum.StrEnum):
    DEFAULT = "default"
    CAPACITY_BLOCK = "capacity-block"


@attrs.frozen(kw_only=True)
class CapacityReservation:
    id: str = field(doc="Reservation id.", pattern=r"^cr-[0-9a-z]+$")
    availability_zone: str = field(doc="Zone of the reservation.")
    instance_type: str = field(doc="Instance type reserved.")
    owner_id: str = field(wire="ownerID", doc="Owning account.", pattern=r"^[0-9]{12}$")
    instance_match_criteria: str = field(doc="open or targeted.", enum=("open", "targeted"))
    reservation_type: CapacityReservationType = field(
        default=CapacityReservationType.DEFAULT, doc="default or capacity-block."
    )
    state: str = field(default="active", doc="active or expiring.", enum=("active", "expiring"))
    end_time: datetime | None = field(
        default=None, doc="When the reservation ends.", format="date-time"
    )


class PlacementStrategy(enum.StrEnum):
    CLUSTER = "cluster"
    PARTITION = "partition"
    SPREAD = "spread"


@attrs.frozen(kw_only=True)
class PlacementGroup:
    id: str = field(doc="Placement group id.", pattern=r"^pg-[0-9a-z]+$")
    name: str = field(doc="Placement group name.")
    strategy: PlacementStrategy = field(doc="cluster, partition or spread.")
    state: str = field(doc="EC2's state of the group (instances launch only when available).")
    partition_count: int | None = field(default=None, doc="Partitions of a partition group.")
    spread_level: str | None = field(default=None, doc="host or rack, for a spread group.")


@attrs.frozen(kw_only=True)
class EC2NodeClassStatus:
    subnets: tuple[Subnet, ...] = field(factory=tuple, doc="Resolved subnets.", crd_default=False)
    security_groups: tuple[SecurityGroup, ...] = field(
        factory=tuple, doc="Resolved security groups.", crd_default=False
    )
    amis: tuple[AMI, ...] = field(factory=tuple, doc="Resolved AMIs.", crd_default=False)
    capacity_reservations: tuple[CapacityReservation, ...] = field(
        factory=tuple, doc="Resolved capacity reservations.", crd_default=False
    )
    placement_groups: tuple[PlacementGroup, ...] = field(
        factory=tuple,
        doc="The placement group placementGroupSelector resolved to.",
        crd_default=False,
    )
    instance_profile: str | None = field(default=None, doc="Instance profile in use.")
    conditions: tuple[Condition, ...] = conditions_field()
