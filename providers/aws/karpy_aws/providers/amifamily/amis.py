"""AMI discovery: EC2NodeClass ``amiSelectorTerms`` -> the images nodes boot from.

An alias (``family@version``) names the AMIs AWS publishes for EKS through public SSM parameters,
one per architecture and variant (standard, NVIDIA, Neuron); other terms find images directly
with DescribeImages. For each (architecture, variant) the newest non-deprecated image wins, and
the result is ordered the same way every time, because the launch template name and drift
detection are derived from it. Time comes in as ``now``; the SSM prefix is a parameter so tests
can serve the aliases from a place moto lets them write.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from karpy.apis.v1.labels import ARCH_AMD64, ARCH_ARM64
from karpy_aws.apis.ec2nodeclass import AMISelectorTerm
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.selectors import freeze_tags, tag_filters
from karpy_aws.session import AWSClient

DEFAULT_SSM_PREFIX: Final = "/aws/service"
DEFAULT_OWNERS: Final = ("self", "amazon")
ALIAS_LATEST: Final = "latest"
# AL2 AMIs are no longer published from this Kubernetes version on.
AL2_LAST_MINOR: Final = 32
_GET_PARAMETERS_BATCH: Final = 10
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class AMIFamily(enum.StrEnum):
    """``spec.amiFamily``: selects user-data format and default block devices."""

    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"
    CUSTOM = "Custom"


class Variant(enum.StrEnum):
    """Which accelerators an AMI is built for; "any" for images found without an alias."""

    STANDARD = "standard"
    NVIDIA = "nvidia"
    NEURON = "neuron"
    ANY = "any"


ALIAS_FAMILIES: Final[Mapping[str, AMIFamily]] = {
    "al2": AMIFamily.AL2,
    "al2023": AMIFamily.AL2023,
    "bottlerocket": AMIFamily.BOTTLEROCKET,
    "windows2019": AMIFamily.WINDOWS2019,
    "windows2022": AMIFamily.WINDOWS2022,
    "windows2025": AMIFamily.WINDOWS2025,
}
_WINDOWS_YEAR: Final = {
    AMIFamily.WINDOWS2019: "2019",
    AMIFamily.WINDOWS2022: "2022",
    AMIFamily.WINDOWS2025: "2025",
}
# EC2's architecture names -> Kubernetes' (kubernetes.io/arch).
EC2_ARCH_TO_K8S: Final[Mapping[str, str]] = {"x86_64": ARCH_AMD64, "arm64": ARCH_ARM64}


@attrs.frozen
class Alias:
    """A parsed ``family@version`` alias."""

    family: AMIFamily
    version: str

    def __str__(self) -> str:
        name = next(k for k, v in ALIAS_FAMILIES.items() if v is self.family)
        return f"{name}@{self.version}"


def parse_alias(text: str) -> Alias:
    """Parse ``amiSelectorTerms[].alias``; raise ConfigurationError saying what is wrong."""
    family_name, sep, version = text.partition("@")
    if not sep or not family_name or not version:
        raise ConfigurationError(
            f"amiSelectorTerms.alias: {text!r} must have the form family@version "
            "(for example al2023@latest)"
        )
    family = ALIAS_FAMILIES.get(family_name.lower())
    if family is None:
        raise ConfigurationError(
            f"amiSelectorTerms.alias: unknown family {family_name!r}; "
            f"expected one of {', '.join(sorted(ALIAS_FAMILIES))}"
        )
    if family in _WINDOWS_YEAR and version != ALIAS_LATEST:
        raise ConfigurationError(
            f"amiSelectorTerms.alias: {text!r}: Windows aliases accept only @latest"
        )
    if version != ALIAS_LATEST and not version.startswith("v"):
        raise ConfigurationError(
            f"amiSelectorTerms.alias: {text!r}: version must be 'latest' or start with 'v' "
            "(for example v20240807)"
        )
    return Alias(family, version)


def validate_ami_terms(terms: Sequence[AMISelectorTerm]) -> None:
    """What the EC2NodeClass CRD's schema cannot say about ``amiSelectorTerms``: an ``owner``
    needs ``name`` or ``tags`` alongside, and an alias must name a family and version karpy
    knows. The rest (1..30 terms, at least one field per term, ``alias``/``id``/``ssmParameter``
    exclusive, an alias term alone) is declared once, on the model, and the apiserver enforces
    it when the NodeClass is written."""
    for index, term in enumerate(terms):
        where = f"amiSelectorTerms[{index}]"
        if term.alias is not None:
            parse_alias(term.alias)
        if term.owner is not None and term.name is None and not term.tags:
            raise ConfigurationError(f"{where}: 'owner' needs 'name' or 'tags' alongside")


@attrs.frozen(kw_only=True)
class AliasParameter:
    """One SSM parameter an alias expands to, and what the image it names is for."""

    name: str
    arch: str  # kubernetes.io/arch value
    variant: Variant


def _minor(k8s_version: str) -> int:
    major, _, minor = k8s_version.partition(".")
    if major != "1" or not minor.isdigit():
        raise ConfigurationError(
            f"kubernetes version {k8s_version!r} must look like 1.<minor> (for example 1.31)"
        )
    return int(minor)


def alias_parameters(
    alias: Alias, *, k8s_version: str, prefix: str = DEFAULT_SSM_PREFIX
) -> tuple[AliasParameter, ...]:
    """The SSM parameter names ``alias`` resolves through, per arch and variant (pure)."""
    minor = _minor(k8s_version)
    latest = alias.version == ALIAS_LATEST
    k8s = k8s_version
    out: list[AliasParameter] = []
    if alias.family is AMIFamily.AL2:
        if minor > AL2_LAST_MINOR:
            raise ConfigurationError(
                f"amiSelectorTerms.alias: {alias} is not published for Kubernetes {k8s} "
                f"(AL2 ends at 1.{AL2_LAST_MINOR}); use al2023"
            )
        for path, image_prefix, arch, variant in (
            ("amazon-linux-2", "amazon-eks-node", ARCH_AMD64, Variant.STANDARD),
            ("amazon-linux-2-arm64", "amazon-eks-arm64-node", ARCH_ARM64, Variant.STANDARD),
            ("amazon-linux-2-gpu", "amazon-eks-gpu-node", ARCH_AMD64, Variant.NVIDIA),
            ("amazon-linux-2-gpu", "amazon-eks-gpu-node", ARCH_AMD64, Variant.NEURON),
        ):
            leaf = "recommended" if latest else f"{image_prefix}-{k8s}-{alias.version}"
            out.append(
                AliasParameter(
                    name=f"{prefix}/eks/optimized-ami/{k8s}/{path}/{leaf}/image_id",
                    arch=arch,
                    variant=variant,
                )
            )
    elif alias.family is AMIFamily.AL2023:
        for ec2_arch, variant in (
            ("x86_64", Variant.STANDARD),
            ("arm64", Variant.STANDARD),
            ("x86_64", Variant.NVIDIA),
            ("arm64", Variant.NVIDIA),
            ("x86_64", Variant.NEURON),
        ):
            leaf = (
                "recommended"
                if latest
                else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k8s}-{alias.version}"
            )
            out.append(
                AliasParameter(
                    name=f"{prefix}/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/"
                    f"{variant}/{leaf}/image_id",
                    arch=EC2_ARCH_TO_K8S[ec2_arch],
                    variant=variant,
                )
            )
    elif alias.family is AMIFamily.BOTTLEROCKET:
        version = ALIAS_LATEST if latest else alias.version.removeprefix("v")
        for flavour, ec2_arch, variant in (
            ("", "x86_64", Variant.STANDARD),
            ("", "arm64", Variant.STANDARD),
            ("-nvidia", "x86_64", Variant.NVIDIA),
            ("-nvidia", "arm64", Variant.NVIDIA),
        ):
            out.append(
                AliasParameter(
                    name=f"{prefix}/bottlerocket/aws-k8s-{k8s}{flavour}/{ec2_arch}/{version}/"
                    "image_id",
                    arch=EC2_ARCH_TO_K8S[ec2_arch],
                    variant=variant,
                )
            )
    else:
        year = _WINDOWS_YEAR[alias.family]
        out.append(
            AliasParameter(
                name=f"{prefix}/ami-windows-latest/Windows_Server-{year}-English-Core-"
                f"EKS_Optimized-{k8s}/image_id",
                arch=ARCH_AMD64,
                variant=Variant.STANDARD,
            )
        )
    return tuple(out)


@attrs.frozen(kw_only=True)
class AMI:
    """A resolved image, as the NodeClass status lists it."""

    id: str
    name: str
    arch: str  # kubernetes.io/arch value
    variant: Variant
    creation_date: datetime.datetime
    deprecated: bool


@attrs.frozen(kw_only=True)
class AMIResolution:
    """What ``amiSelectorTerms`` resolved to, plus the alias parameters that did not exist."""

    amis: tuple[AMI, ...]
    missing_parameters: tuple[str, ...] = ()


def _parse_time(value: Any) -> datetime.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    text = str(value).replace("Z", "+00:00")
    parsed = datetime.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _image(raw: Mapping[str, Any], *, variant: Variant, now: datetime.datetime) -> AMI | None:
    arch = EC2_ARCH_TO_K8S.get(str(raw.get("Architecture", "")))
    if arch is None or raw.get("State", "available") != "available":
        return None
    deprecation = _parse_time(raw.get("DeprecationTime"))
    return AMI(
        id=str(raw["ImageId"]),
        name=str(raw.get("Name", "")),
        arch=arch,
        variant=variant,
        creation_date=_parse_time(raw.get("CreationDate")) or _EPOCH,
        deprecated=deprecation is not None and deprecation <= now,
    )


def newest_per_requirements(amis: Sequence[AMI]) -> tuple[AMI, ...]:
    """Keep, per (arch, variant), the newest non-deprecated image — or the newest deprecated one
    if nothing else is left — and order the result stably (pure)."""
    best: dict[tuple[str, Variant], AMI] = {}
    for ami in amis:
        key = (ami.arch, ami.variant)
        current = best.get(key)
        if current is None or _rank(ami) < _rank(current):
            best[key] = ami
    return tuple(sorted(best.values(), key=_rank))


def _rank(ami: AMI) -> tuple[bool, float, str, str]:
    return (ami.deprecated, -ami.creation_date.timestamp(), ami.name, ami.id)


async def _get_parameters(ssm: AWSClient, names: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    values: dict[str, str] = {}
    missing: list[str] = []
    for start in range(0, len(names), _GET_PARAMETERS_BATCH):
        batch = list(names[start : start + _GET_PARAMETERS_BATCH])
        response = await ssm.call("GetParameters", Names=batch)
        values.update({p["Name"]: p["Value"] for p in response.get("Parameters", [])})
        missing.extend(response.get("InvalidParameters", []))
    return values, missing


async def _describe(ec2: AWSClient, **params: Any) -> list[dict[str, Any]]:
    images: list[dict[str, Any]] = await ec2.paginate(
        "DescribeImages", result_key="Images", IncludeDeprecated=True, **params
    )
    return images


async def resolve_amis(
    ec2: AWSClient,
    ssm: AWSClient,
    *,
    terms: Sequence[AMISelectorTerm],
    k8s_version: str,
    now: datetime.datetime,
    ssm_prefix: str = DEFAULT_SSM_PREFIX,
) -> AMIResolution:
    """Resolve ``amiSelectorTerms`` to AMIs (newest non-deprecated per arch and variant).

    Raises ConfigurationError for invalid terms (unknown alias family, bad version, AL2 on a
    too-new Kubernetes) and karpy_aws.errors.AWSError when AWS fails. Alias parameters that do
    not exist are reported in ``missing_parameters``; an empty ``amis`` means nothing matched.
    """
    validate_ami_terms(terms)
    found: list[AMI] = []
    missing: list[str] = []
    alias_terms = [t for t in terms if t.alias is not None]
    if alias_terms:
        assert alias_terms[0].alias is not None  # noqa: S101 -- narrowed by the filter above
        params = alias_parameters(
            parse_alias(alias_terms[0].alias), k8s_version=k8s_version, prefix=ssm_prefix
        )
        values, missing = await _get_parameters(ssm, sorted({p.name for p in params}))
        ids = sorted({values[p.name] for p in params if p.name in values})
        if ids:
            by_id = {i["ImageId"]: i for i in await _describe(ec2, ImageIds=ids)}
            for param in params:
                raw = by_id.get(values.get(param.name, ""))
                image = None if raw is None else _image(raw, variant=param.variant, now=now)
                if image is not None:
                    found.append(image)
    ssm_terms = [t.ssm_parameter for t in terms if t.ssm_parameter is not None]
    if ssm_terms:
        values, absent = await _get_parameters(ssm, ssm_terms)
        missing.extend(absent)
        if values:
            raws = await _describe(ec2, ImageIds=sorted(set(values.values())))
            found.extend(a for r in raws if (a := _image(r, variant=Variant.ANY, now=now)))
    for term in terms:
        if term.alias is not None or term.ssm_parameter is not None:
            continue
        raws = await _describe(ec2, **_describe_params(term))
        found.extend(a for r in raws if (a := _image(r, variant=Variant.ANY, now=now)))
    return AMIResolution(amis=newest_per_requirements(found), missing_parameters=tuple(missing))


def _describe_params(term: AMISelectorTerm) -> dict[str, Any]:
    if term.id is not None:
        return {"Filters": [{"Name": "image-id", "Values": [term.id]}]}
    filters = tag_filters(freeze_tags(term.tags))
    if term.name is not None:
        filters.append({"Name": "name", "Values": [term.name]})
    owners = [term.owner] if term.owner is not None else list(DEFAULT_OWNERS)
    return {"Filters": filters, "Owners": owners}
