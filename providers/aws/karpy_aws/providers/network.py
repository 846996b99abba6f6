"""Subnet and security-group discovery from an EC2NodeClass's selector terms.

Nodes launch into the subnets and with the security groups the NodeClass selects, and the
NodeClass status lists them. Each term becomes one Describe call with EC2 filters (so an unknown
id simply matches nothing instead of failing the whole lookup); results are merged, de-duplicated
and returned in a fixed order so the status, the launch template hash and drift checks are stable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import attrs

from karpy_aws.providers.selectors import SelectorTerm, tag_filters, validate_terms
from karpy_aws.session import AWSClient


@attrs.frozen(kw_only=True)
class Subnet:
    """A discovered subnet."""

    id: str
    zone: str
    zone_id: str
    available_ip_count: int
    vpc_id: str


@attrs.frozen(kw_only=True)
class SecurityGroup:
    """A discovered security group."""

    id: str
    name: str
    vpc_id: str


def _term_filters(term: SelectorTerm, *, id_filter: str) -> list[dict[str, object]]:
    if term.id is not None:
        return [{"Name": id_filter, "Values": [term.id]}]
    filters = tag_filters(term.tags)
    if term.name is not None:
        filters.append({"Name": "group-name", "Values": [term.name]})
    return filters


async def _describe_each(
    ec2: AWSClient,
    operation: str,
    *,
    result_key: str,
    filter_sets: list[list[dict[str, object]]],
) -> list[dict[str, Any]]:
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(ec2.paginate(operation, result_key=result_key, Filters=filters))
                for filters in filter_sets
            ]
    except ExceptionGroup as failed:
        # Callers handle karpy_aws errors, not groups: raise the first failure (the others,
        # if any, are the same call with other filters), keeping the group as its cause.
        raise failed.exceptions[0] from failed
    return [item for task in tasks for item in task.result()]


async def discover_subnets(ec2: AWSClient, terms: Sequence[SelectorTerm]) -> tuple[Subnet, ...]:
    """Subnets matching any term, most free addresses first (ties by id).

    Raises ConfigurationError for unusable terms (``subnetSelectorTerms`` takes tags or id) and
    karpy_aws.errors.AWSError if EC2 fails. An empty result is not an error here: the caller
    reports it (the NodeClass's SubnetsReady condition).
    """
    validate_terms(list(terms), "subnetSelectorTerms", allow_name=False)
    raw = await _describe_each(
        ec2,
        "DescribeSubnets",
        result_key="Subnets",
        filter_sets=[_term_filters(t, id_filter="subnet-id") for t in terms],
    )
    found = {
        s["SubnetId"]: Subnet(
            id=s["SubnetId"],
            zone=s["AvailabilityZone"],
            zone_id=s.get("AvailabilityZoneId", ""),
            available_ip_count=int(s.get("AvailableIpAddressCount", 0)),
            vpc_id=s.get("VpcId", ""),
        )
        for s in raw
    }
    return tuple(sorted(found.values(), key=lambda s: (-s.available_ip_count, s.id)))


async def discover_security_groups(
    ec2: AWSClient, terms: Sequence[SelectorTerm]
) -> tuple[SecurityGroup, ...]:
    """Security groups matching any term, ordered by id.

    ``securityGroupSelectorTerms`` take tags, or id alone, or name alone. Raises as
    :func:`discover_subnets` does; an empty result is the caller's to report.
    """
    validate_terms(list(terms), "securityGroupSelectorTerms", allow_name=True)
    raw = await _describe_each(
        ec2,
        "DescribeSecurityGroups",
        result_key="SecurityGroups",
        filter_sets=[_term_filters(t, id_filter="group-id") for t in terms],
    )
    found = {
        g["GroupId"]: SecurityGroup(
            id=g["GroupId"], name=g.get("GroupName", ""), vpc_id=g.get("VpcId", "")
        )
        for g in raw
    }
    return tuple(sorted(found.values(), key=lambda g: g.id))


def subnet_per_zone(subnets: Sequence[Subnet]) -> dict[str, Subnet]:
    """For each zone, the subnet with the most free addresses (ties: lowest id). Pure.

    This is the subnet a launch uses in that zone.
    """
    best: dict[str, Subnet] = {}
    for subnet in subnets:
        current = best.get(subnet.zone)
        if current is None or (-subnet.available_ip_count, subnet.id) < (
            -current.available_ip_count,
            current.id,
        ):
            best[subnet.zone] = subnet
    return dict(sorted(best.items()))
