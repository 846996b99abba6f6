"""EC2NodeClass spec -> karpy_aws values, and bad NodeClass input becoming clear errors."""

from __future__ import annotations

import datetime

import pytest

from karpy.apis.meta import Quantity
from karpy_aws import errors
from karpy_aws.apis import ec2nodeclass as api
from karpy_aws.apis.kubelet import KubeletConfiguration
from karpy_aws.providers import nodeclass
from karpy_aws.providers.amifamily.amis import AMIFamily, resolve_amis
from karpy_aws.providers.network import discover_security_groups, discover_subnets
from karpy_aws.session import AWSSession

from .conftest import AMI_IDS, DISCOVERY, K8S_VERSION, SSM_PREFIX, Moto

pytestmark = pytest.mark.aws


def _spec(**overrides: object) -> api.EC2NodeClassSpec:
    values: dict[str, object] = {
        "subnet_selector_terms": (api.SubnetSelectorTerm(tags=DISCOVERY),),
        "security_group_selector_terms": (api.SecurityGroupSelectorTerm(tags=DISCOVERY),),
        "ami_selector_terms": (api.AMISelectorTerm(alias="al2023@latest"),),
        "role": "KarpenterNodeRole",
    }
    values.update(overrides)
    return api.EC2NodeClassSpec(**values)  # type: ignore[arg-type]


async def test_a_spec_drives_discovery_end_to_end(session: AWSSession, moto: Moto) -> None:
    spec = _spec()
    nodeclass.validate_spec(spec)
    ec2, ssm = await session.client("ec2"), await session.client("ssm")
    subnets = await discover_subnets(ec2, nodeclass.subnet_terms(spec))
    groups = await discover_security_groups(ec2, nodeclass.security_group_terms(spec))
    amis = await resolve_amis(
        ec2,
        ssm,
        terms=spec.ami_selector_terms,
        k8s_version=K8S_VERSION,
        now=datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC),
        ssm_prefix=SSM_PREFIX,
    )
    assert len(subnets) == 4
    assert [g.id for g in groups] == [moto.security_groups["nodes"]]
    assert AMI_IDS["al2023x86new"] in {a.id for a in amis.amis}
    assert nodeclass.ami_family(spec) is AMIFamily.AL2023


async def test_no_subnet_matches_gives_an_empty_result_for_the_controller_to_report(
    session: AWSSession,
) -> None:
    spec = _spec(subnet_selector_terms=(api.SubnetSelectorTerm(tags={"nobody": "here"}),))
    assert await discover_subnets(await session.client("ec2"), nodeclass.subnet_terms(spec)) == ()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"instance_profile": "profile"}, "exactly one of ['role', 'instanceProfile']", id="both"
        ),
        pytest.param({"role": None}, "exactly one of ['role', 'instanceProfile']", id="neither"),
        pytest.param(
            {"ami_selector_terms": (api.AMISelectorTerm(alias="ubuntu@latest"),)},
            "unknown family 'ubuntu'",
            id="unknown-alias",
        ),
        pytest.param(
            {"ami_selector_terms": (api.AMISelectorTerm(id="ami-123"),)},
            "spec.amiFamily: required",
            id="no-family",
        ),
    ],
)
def test_bad_nodeclass_input_is_a_clear_configuration_error(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(errors.ConfigurationError) as caught:
        nodeclass.validate_spec(_spec(**overrides))
    assert message in str(caught.value)


def test_explicit_family_wins_over_inference() -> None:
    spec = _spec(
        ami_selector_terms=(api.AMISelectorTerm(name="team-*"),),
        ami_family=api.AMIFamily.BOTTLEROCKET,
    )
    assert nodeclass.ami_family(spec) is AMIFamily.BOTTLEROCKET
    assert [t.name for t in spec.ami_selector_terms] == ["team-*"]


def test_kubelet_and_block_devices_are_carried_over() -> None:
    kubelet = KubeletConfiguration(
        max_pods=50,
        cluster_dns=("10.0.0.10",),
        kube_reserved={"cpu": Quantity("250m")},
        eviction_hard={"memory.available": "5%"},
    )
    spec = _spec(
        kubelet=kubelet,
        block_device_mappings=(
            api.BlockDeviceMapping(
                device_name="/dev/xvda",
                root_volume=True,
                ebs=api.BlockDevice(volume_size=Quantity("100Gi"), volume_type=api.VolumeType.IO2,
                                    iops=4000),
            ),
        ),
    )  # fmt: skip
    settings = nodeclass.kubelet_settings(spec.kubelet)
    assert settings.max_pods == 50
    assert dict(settings.kube_reserved) == {"cpu": "250m"}
    config = nodeclass.kubelet_config(spec.kubelet, max_pods=50)
    assert config.cluster_dns == ("10.0.0.10",)
    (device,) = nodeclass.block_devices(spec, AMIFamily.AL2023)
    assert (device.volume_size_gib, device.volume_type, device.iops) == (100, "io2", 4000)
    assert device.encrypted
    assert nodeclass.ephemeral_storage_gib(spec, AMIFamily.AL2023) == 100


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        pytest.param(AMIFamily.AL2023, 20, id="al2023"),
        pytest.param(AMIFamily.BOTTLEROCKET, 20, id="bottlerocket-data-volume"),
        pytest.param(AMIFamily.WINDOWS2022, 50, id="windows"),
    ],
)
def test_default_ephemeral_storage_follows_the_family(family: AMIFamily, expected: int) -> None:
    assert nodeclass.ephemeral_storage_gib(_spec(), family) == expected
    assert nodeclass.block_devices(_spec(), family)


def test_metadata_defaults_require_imdsv2_with_hop_limit_one() -> None:
    options = nodeclass.metadata_options(_spec())
    assert (options.http_tokens, options.http_put_response_hop_limit) == ("required", 1)
    bad = _spec(metadata_options=api.MetadataOptions(http_tokens="sometimes"))
    with pytest.raises(errors.ConfigurationError, match=r"spec\.metadataOptions\.httpTokens"):
        nodeclass.metadata_options(bad)
