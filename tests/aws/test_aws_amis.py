"""AMI resolution: alias -> SSM parameters per family/arch/variant, DescribeImages terms, newest."""

from __future__ import annotations

import datetime

import pytest

from karpy_aws import errors
from karpy_aws.apis.ec2nodeclass import AMISelectorTerm
from karpy_aws.providers.amifamily.amis import (
    AMI,
    AMIFamily,
    Variant,
    alias_parameters,
    newest_per_requirements,
    parse_alias,
    resolve_amis,
)
from karpy_aws.session import AWSSession

from .conftest import ACCOUNT, AMI_IDS, K8S_VERSION, SSM_PREFIX

pytestmark = pytest.mark.aws

NOW = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)


async def _resolve(session: AWSSession, *terms: AMISelectorTerm):  # type: ignore[no-untyped-def]
    return await resolve_amis(
        await session.client("ec2"),
        await session.client("ssm"),
        terms=list(terms),
        k8s_version=K8S_VERSION,
        now=NOW,
        ssm_prefix=SSM_PREFIX,
    )


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        pytest.param(
            "al2023@latest",
            {
                ("amd64", Variant.STANDARD): "al2023x86new",
                ("arm64", Variant.STANDARD): "al2023arm",
                ("amd64", Variant.NVIDIA): "al2023gpu",
                ("amd64", Variant.NEURON): "al2023neuron",
            },
            id="al2023",
        ),
        pytest.param(
            "al2@latest",
            {
                ("amd64", Variant.STANDARD): "al2x86",
                ("arm64", Variant.STANDARD): "al2arm",
                ("amd64", Variant.NVIDIA): "al2gpu",
                ("amd64", Variant.NEURON): "al2gpu",
            },
            id="al2",
        ),
        pytest.param(
            "bottlerocket@latest",
            {
                ("amd64", Variant.STANDARD): "brx86",
                ("arm64", Variant.STANDARD): "brarm",
                ("amd64", Variant.NVIDIA): "brnvidia",
            },
            id="bottlerocket",
        ),
        pytest.param(
            "al2023@v20260101",
            {("amd64", Variant.STANDARD): "al2023x86old"},
            id="pinned-version",
        ),
    ],
)
async def test_alias_resolves_one_image_per_arch_and_variant(
    session: AWSSession, alias: str, expected: dict[tuple[str, Variant], str]
) -> None:
    result = await _resolve(session, AMISelectorTerm(alias=alias))
    got = {(a.arch, a.variant): a.id for a in result.amis}
    assert got == {k: AMI_IDS[v] for k, v in expected.items()}
    # Parameters for combinations that are not published come back as missing, not as errors.
    assert len(result.missing_parameters) == len(
        alias_parameters(parse_alias(alias), k8s_version=K8S_VERSION, prefix=SSM_PREFIX)
    ) - len(expected)


async def test_alias_with_unpublished_version_resolves_nothing_and_names_parameters(
    session: AWSSession,
) -> None:
    result = await _resolve(session, AMISelectorTerm(alias="al2023@v19990101"))
    assert result.amis == ()
    assert all("v19990101" in name for name in result.missing_parameters)


async def test_name_term_picks_newest_per_arch(session: AWSSession) -> None:
    result = await _resolve(session, AMISelectorTerm(name="team-node-*"))
    assert {(a.arch, a.id) for a in result.amis} == {
        ("amd64", AMI_IDS["custom2"]),
        ("arm64", AMI_IDS["customarm"]),
    }
    assert all(a.variant is Variant.ANY for a in result.amis)


async def test_tags_and_owner_are_anded(session: AWSSession) -> None:
    mine = await _resolve(session, AMISelectorTerm(tags={"team": "blue", "os": "linux"}))
    assert [a.id for a in mine.amis] == [AMI_IDS["custom2"]]
    # moto marks every MOTO_AMIS_PATH image with owner alias "amazon", so filter by owner id.
    theirs = AMISelectorTerm(tags={"team": "blue"}, owner="137112412989")
    assert (await _resolve(session, theirs)).amis == ()
    ours = AMISelectorTerm(tags={"team": "blue"}, owner=ACCOUNT)
    assert {a.id for a in (await _resolve(session, ours)).amis} == {
        AMI_IDS["custom2"],
        AMI_IDS["customarm"],
    }


async def test_id_terms_are_ored(session: AWSSession) -> None:
    result = await _resolve(
        session,
        AMISelectorTerm(id=AMI_IDS["custom1"]),
        AMISelectorTerm(id=AMI_IDS["customarm"]),
    )
    assert {a.id for a in result.amis} == {AMI_IDS["custom1"], AMI_IDS["customarm"]}


async def test_ssm_parameter_term(session: AWSSession) -> None:
    name = f"{SSM_PREFIX}/bottlerocket/aws-k8s-{K8S_VERSION}/arm64/latest/image_id"
    result = await _resolve(session, AMISelectorTerm(ssm_parameter=name))
    assert [a.id for a in result.amis] == [AMI_IDS["brarm"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("al2023", "family@version", id="no-at"),
        pytest.param("ubuntu@latest", "unknown family 'ubuntu'", id="unknown-family"),
        pytest.param("windows2022@v2024", "only @latest", id="windows-pinned"),
        pytest.param("al2023@2024", "start with 'v'", id="bad-version"),
    ],
)
def test_bad_aliases_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=r"amiSelectorTerms\.alias") as caught:
        parse_alias(text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("terms", "message"),
    # The term rules the EC2NodeClass schema declares (count, exclusivity, an alias alone) are
    # the apiserver's to enforce: tests/unit/apis/test_crds.py checks they are in the CRD.
    [
        pytest.param([AMISelectorTerm(owner="self")], "'owner' needs", id="owner-alone"),
        pytest.param([AMISelectorTerm(alias="ubuntu@latest")], "alias", id="unknown-family"),
    ],
)
async def test_bad_terms_are_refused_before_any_call(
    session: AWSSession, terms: list[AMISelectorTerm], message: str
) -> None:
    with pytest.raises(errors.ConfigurationError, match="amiSelectorTerms") as caught:
        await _resolve(session, *terms)
    assert message in str(caught.value)


def test_al2_is_refused_on_kubernetes_past_its_end() -> None:
    with pytest.raises(errors.ConfigurationError, match=r"AL2 ends at 1\.32"):
        alias_parameters(parse_alias("al2@latest"), k8s_version="1.33")


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        pytest.param(
            "al2023@v20240807",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/"
            "amazon-eks-node-al2023-arm64-nvidia-1.31-v20240807/image_id",
            id="al2023",
        ),
        pytest.param(
            "bottlerocket@v1.30.0",
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.30.0/image_id",
            id="bottlerocket",
        ),
        pytest.param(
            "windows2022@latest",
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31"
            "/image_id",
            id="windows",
        ),
        pytest.param(
            "al2@latest",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/recommended/image_id",
            id="al2",
        ),
    ],
)
def test_alias_parameter_names(alias: str, expected: str) -> None:
    names = [p.name for p in alias_parameters(parse_alias(alias), k8s_version="1.31")]
    assert expected in names


def test_alias_round_trips_and_infers_family() -> None:
    alias = parse_alias("Bottlerocket@latest")
    assert alias.family is AMIFamily.BOTTLEROCKET
    assert str(alias) == "bottlerocket@latest"


def _ami(ami_id: str, day: int, *, deprecated: bool = False, arch: str = "amd64") -> AMI:
    return AMI(
        id=ami_id,
        name=ami_id,
        arch=arch,
        variant=Variant.ANY,
        creation_date=datetime.datetime(2026, 1, day, tzinfo=datetime.UTC),
        deprecated=deprecated,
    )


def test_newest_non_deprecated_wins_and_deprecated_is_last_resort() -> None:
    chosen = newest_per_requirements(
        [
            _ami("ami-old", 1),
            _ami("ami-newest-deprecated", 9, deprecated=True),
            _ami("ami-new", 5),
            _ami("ami-arm-deprecated", 3, deprecated=True, arch="arm64"),
        ]
    )
    assert [a.id for a in chosen] == ["ami-new", "ami-arm-deprecated"]
    assert newest_per_requirements(list(reversed(chosen))) == chosen
