"""Subnet and security-group discovery: OR across terms, AND within one, wildcard, stable order."""

from __future__ import annotations

import pytest

from karpy_aws import errors
from karpy_aws.providers.network import (
    Subnet,
    discover_security_groups,
    discover_subnets,
    subnet_per_zone,
)
from karpy_aws.providers.selectors import SelectorTerm
from karpy_aws.session import AWSSession

from .conftest import CLUSTER, DISCOVERY, Moto

pytestmark = pytest.mark.aws


async def test_subnets_by_discovery_tag_most_free_addresses_first(
    session: AWSSession, moto: Moto
) -> None:
    ec2 = await session.client("ec2")
    found = await discover_subnets(ec2, [SelectorTerm(tags=DISCOVERY)])
    assert {s.id for s in found} == {moto.subnets[n] for n in ("a", "a-small", "b", "c")}
    assert found[-1].id == moto.subnets["a-small"]  # a /26 has fewer free addresses
    assert [s.available_ip_count for s in found] == sorted(
        (s.available_ip_count for s in found), reverse=True
    )
    by_id = {s.id: s for s in found}
    assert by_id[moto.subnets["b"]].zone == "us-west-2b"
    assert by_id[moto.subnets["b"]].zone_id.startswith("usw2-az")


async def test_subnet_terms_are_ored_and_tags_within_a_term_anded(
    session: AWSSession, moto: Moto
) -> None:
    ec2 = await session.client("ec2")
    anded = await discover_subnets(ec2, [SelectorTerm(tags={**DISCOVERY, "tier": "x"})])
    assert [s.id for s in anded] == [moto.subnets["b"]]
    ored = await discover_subnets(
        ec2,
        [SelectorTerm(tags={"tier": "public"}), SelectorTerm(id=moto.subnets["c"])],
    )
    assert {s.id for s in ored} == {moto.subnets["public"], moto.subnets["c"]}


async def test_wildcard_tag_value_matches_any_value(session: AWSSession, moto: Moto) -> None:
    ec2 = await session.client("ec2")
    found = await discover_subnets(ec2, [SelectorTerm(tags={"tier": "*"})])
    assert {s.id for s in found} == {moto.subnets["b"], moto.subnets["public"]}


async def test_overlapping_terms_do_not_duplicate(session: AWSSession, moto: Moto) -> None:
    ec2 = await session.client("ec2")
    found = await discover_subnets(
        ec2, [SelectorTerm(tags=DISCOVERY), SelectorTerm(id=moto.subnets["a"])]
    )
    assert len(found) == len({s.id for s in found}) == 4


async def test_unknown_subnet_id_matches_nothing(session: AWSSession) -> None:
    ec2 = await session.client("ec2")
    assert await discover_subnets(ec2, [SelectorTerm(id="subnet-0000000000deadbee")]) == ()


async def test_security_groups_by_tag_name_and_id(session: AWSSession, moto: Moto) -> None:
    ec2 = await session.client("ec2")
    found = await discover_security_groups(
        ec2,
        [
            SelectorTerm(tags={"karpenter.sh/discovery": CLUSTER}),
            SelectorTerm(name="sg-extra"),
            SelectorTerm(tags={"team": "blue", "Name": "nodes"}),  # AND: no group has both
        ],
    )
    assert {g.id for g in found} == {moto.security_groups["nodes"], moto.security_groups["extra"]}
    assert [g.id for g in found] == sorted(g.id for g in found)
    assert {g.name for g in found} == {"sg-nodes", "sg-extra"}
    by_id = await discover_security_groups(ec2, [SelectorTerm(id=moto.security_groups["other"])])
    assert [g.name for g in by_id] == ["sg-other"]


async def test_security_group_name_cannot_be_combined(session: AWSSession) -> None:
    ec2 = await session.client("ec2")
    with pytest.raises(errors.ConfigurationError, match=r"securityGroupSelectorTerms\[0\]"):
        await discover_security_groups(ec2, [SelectorTerm(name="sg-x", tags={"a": "b"})])


@pytest.mark.parametrize(
    ("terms", "message"),
    [
        pytest.param([], "at least one", id="empty"),
        pytest.param([SelectorTerm()], "empty term", id="empty-term"),
        pytest.param([SelectorTerm(id="subnet-1", tags={"a": "b"})], "'id' cannot", id="id-and"),
        pytest.param([SelectorTerm(name="x")], "'name' is not", id="name-for-subnet"),
        pytest.param([SelectorTerm(tags={"a": ""})], "must not be empty", id="empty-value"),
        pytest.param([SelectorTerm(id=f"subnet-{i}") for i in range(31)], "at most 30", id="31"),
    ],
)
async def test_bad_subnet_terms_name_the_field(
    session: AWSSession, terms: list[SelectorTerm], message: str
) -> None:
    ec2 = await session.client("ec2")
    with pytest.raises(errors.ConfigurationError, match="subnetSelectorTerms") as caught:
        await discover_subnets(ec2, terms)
    assert message in str(caught.value)


def test_subnet_per_zone_prefers_most_free_addresses_then_lowest_id() -> None:
    def subnet(sid: str, zone: str, free: int) -> Subnet:
        return Subnet(id=sid, zone=zone, zone_id="z", available_ip_count=free, vpc_id="v")

    chosen = subnet_per_zone(
        [
            subnet("subnet-b", "z1", 10),
            subnet("subnet-a", "z1", 10),
            subnet("subnet-c", "z1", 5),
            subnet("subnet-d", "z2", 1),
        ]
    )
    assert {z: s.id for z, s in chosen.items()} == {"z1": "subnet-a", "z2": "subnet-d"}
