"""Provider drift on moto: AMI, subnet, security groups and the NodeClass's static hash."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider import NodeClaimNotFoundError
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import ec2nodeclass_status as nc_status
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass_network import (
    ConnectionTracking,
    CPUOptions,
    PlacementGroupSelector,
)
from karpy_aws.providers.nodeclass import NODECLASS_HASH_VERSION, rehash_annotations, static_hash

from .conftest import AMI_IDS, ProviderKit, make_nodeclaim, ready_nodeclass

pytestmark = pytest.mark.aws


async def _launch(kit: ProviderKit) -> NodeClaim:
    """Launch one x86 instance (the emulator gives fleet instances their launch template's
    security groups, which moto itself leaves out)."""
    return await kit.provider.create(make_nodeclaim((wk.LABEL_ARCH, "In", ("amd64",))))


def _status(kit: ProviderKit, **changes: Any) -> None:
    nodeclass = kit.nodeclasses.items["default"]
    kit.nodeclasses.put(attrs.evolve(nodeclass, status=attrs.evolve(nodeclass.status, **changes)))


async def test_a_fresh_instance_has_not_drifted(kit: ProviderKit) -> None:
    assert await kit.provider.is_drifted(await _launch(kit)) is None


async def test_an_ami_no_longer_resolved_is_ami_drift(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    old = kit.nodeclasses.items["default"].status.amis
    _status(kit, amis=tuple(attrs.evolve(a, id=AMI_IDS["al2023x86old"]) for a in old))
    assert await kit.provider.is_drifted(launched) == "AMIDrift"


async def test_a_subnet_no_longer_selected_is_subnet_drift(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    zone = launched.metadata.labels[wk.LABEL_TOPOLOGY_ZONE]
    kept = tuple(s for s in kit.nodeclasses.items["default"].status.subnets if s.zone != zone)
    _status(kit, subnets=kept)
    assert await kit.provider.is_drifted(launched) == "SubnetDrift"


async def test_changed_security_groups_are_security_group_drift(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    groups = (
        nc_status.SecurityGroup(id=kit.moto.security_groups["nodes"]),
        nc_status.SecurityGroup(id=kit.moto.security_groups["extra"]),
    )
    _status(kit, security_groups=groups)
    assert await kit.provider.is_drifted(launched) == "SecurityGroupDrift"


async def test_a_changed_static_field_is_nodeclass_drift(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    kit.nodeclasses.put(ready_nodeclass(kit.moto, tags={"team": "blue"}))
    assert await kit.provider.is_drifted(launched) == "NodeClassDrift"
    # A hash written by another hash version is not compared.
    other = attrs.evolve(
        launched.metadata,
        annotations={
            **launched.metadata.annotations,
            awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION: "v0",
        },
    )
    assert await kit.provider.is_drifted(attrs.evolve(launched, metadata=other)) is None


async def test_selector_terms_are_not_part_of_the_static_hash(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    nodeclass = ready_nodeclass(kit.moto)
    spec = attrs.evolve(
        nodeclass.spec, subnet_selector_terms=nodeclass.spec.subnet_selector_terms * 2
    )
    kit.nodeclasses.put(attrs.evolve(nodeclass, spec=spec))
    assert await kit.provider.is_drifted(launched) is None


async def test_drift_of_a_terminated_instance_is_not_found(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    await kit.provider.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await kit.provider.is_drifted(launched)


async def test_without_its_nodeclass_nothing_can_drift(kit: ProviderKit) -> None:
    launched = await _launch(kit)
    kit.nodeclasses.items.clear()
    assert await kit.provider.is_drifted(launched) is None


_TAGS = st.dictionaries(st.sampled_from(["team", "env", "cost"]), st.sampled_from(["a", "b"]))
_TERMS = st.lists(
    st.sampled_from(["subnet-0aa", "subnet-0bb", "subnet-0cc"]), min_size=1, max_size=3
).map(lambda ids: tuple(nc.SubnetSelectorTerm(id=i) for i in ids))


@given(_TERMS, _TERMS, _TAGS, _TAGS)
def test_static_hash_ignores_selectors_and_follows_static_fields(
    terms_a: tuple[nc.SubnetSelectorTerm, ...],
    terms_b: tuple[nc.SubnetSelectorTerm, ...],
    tags_a: dict[str, str],
    tags_b: dict[str, str],
) -> None:
    base = nc.EC2NodeClassSpec(
        subnet_selector_terms=terms_a,
        security_group_selector_terms=(nc.SecurityGroupSelectorTerm(id="sg-0aa"),),
        ami_selector_terms=(nc.AMISelectorTerm(alias="al2023@latest"),),
        role="node",
        tags=tags_a,
    )
    assert static_hash(base) == static_hash(attrs.evolve(base, subnet_selector_terms=terms_b))
    changed = attrs.evolve(base, tags=tags_b)
    assert (static_hash(changed) == static_hash(base)) == (tags_a == tags_b)


async def test_launch_options_drift_and_a_spelled_out_alias_family_does_not(
    kit: ProviderKit,
) -> None:
    launched = await _launch(kit)
    # amiFamily written out as the alias's own family: the same launch, no drift.
    kit.nodeclasses.put(ready_nodeclass(kit.moto, ami_family=nc.AMIFamily.AL2023))
    assert await kit.provider.is_drifted(launched) is None
    # Each option that reaches the launch template or the fleet request drifts the node.
    for change in (
        {"cpu_options": CPUOptions(nested_virtualization="enabled")},
        {"connection_tracking": ConnectionTracking(tcp_established_timeout=3600)},
        {"ip_prefix_count": 1},
        {"context": "ctx-0123"},
        {"placement_group_selector": PlacementGroupSelector(name="training")},
    ):
        kit.nodeclasses.put(ready_nodeclass(kit.moto, **change))
        assert await kit.provider.is_drifted(launched) == "NodeClassDrift", change


def _stamped(version: str, value: str = "old-hash") -> dict[str, str]:
    return {
        awslabels.ANNOTATION_EC2NODECLASS_HASH: value,
        awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION: version,
    }


def test_nodeclaims_of_an_older_hash_version_are_restamped_unless_drifted() -> None:
    assert rehash_annotations(_stamped("v1"), current_hash="new", drifted=False) == _stamped(
        NODECLASS_HASH_VERSION, "new"
    )
    # Already drifted: only the version moves, the old hash keeps it drifted.
    assert rehash_annotations(_stamped("v1"), current_hash="new", drifted=True) == {
        awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION
    }
    assert (
        rehash_annotations(_stamped(NODECLASS_HASH_VERSION), current_hash="x", drifted=False)
        is None
    )
    # Not launched yet: its launch stamps both.
    assert rehash_annotations({}, current_hash="new", drifted=False) is None
