"""The placement group an EC2NodeClass's ``placementGroupSelector`` names, looked up in EC2.

Every instance of the class launches into that group (the launch template's ``Placement``), so
the group is resolved once per status pass by name or id with DescribePlacementGroups and kept
in the NodeClass's status, where launches read it. EC2 enforces each strategy's constraints at
launch (a cluster group stays in one zone, a spread group takes seven instances per zone);
what it refuses comes back as CreateFleet errors like any other.
"""

from __future__ import annotations

from typing import Any

import attrs

from karpy_aws.errors import NotFoundError
from karpy_aws.session import AWSClient


@attrs.frozen(kw_only=True)
class PlacementGroup:
    """One placement group as EC2 describes it."""

    id: str
    name: str
    strategy: str
    state: str
    partition_count: int | None = None
    spread_level: str | None = None


def parse_placement_group(raw: dict[str, Any]) -> PlacementGroup:
    """One DescribePlacementGroups entry (pure)."""
    count = raw.get("PartitionCount")
    level = raw.get("SpreadLevel")
    return PlacementGroup(
        id=str(raw["GroupId"]),
        name=str(raw["GroupName"]),
        strategy=str(raw.get("Strategy", "")),
        state=str(raw.get("State", "")),
        partition_count=int(count) if count is not None else None,
        spread_level=str(level) if level is not None else None,
    )


async def find_placement_group(
    ec2: AWSClient, *, name: str | None = None, group_id: str | None = None
) -> PlacementGroup:
    """The group called ``name`` or with id ``group_id``; NotFoundError naming it if EC2 has
    none."""
    params = {"GroupNames": [name]} if name is not None else {"GroupIds": [group_id]}
    response = await ec2.call("DescribePlacementGroups", **params)
    found = response.get("PlacementGroups", [])
    if not found:
        raise NotFoundError(
            service="ec2",
            operation="DescribePlacementGroups",
            code="InvalidPlacementGroup.Unknown",
            message=f"placement group {name or group_id!r} does not exist",
        )
    return parse_placement_group(found[0])
