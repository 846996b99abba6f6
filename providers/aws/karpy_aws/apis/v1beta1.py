"""EC2NodeClass (karpenter.k8s.aws/v1beta1): the node class of Karpenter v0.32-v0.37, served
beside v1 and converted both ways by karpy's conversion webhook (and by `karpy convert`).

v1 moved AMI selection to `amiSelectorTerms` (an `alias` term names a family and version) and
lowered the IMDS hop limit default from 2 to 1. The conversion is Karpenter's: a v1beta1
`amiFamily` without selector terms becomes the alias `<family>@latest`, and the hop limit the
v1beta1 schema defaults to 2 is written out, so v0.32-v0.37 nodes keep reaching IMDS from pods.
The v1beta1 schema also carries every field v1 added (kubelet, capacity reservations, ...), so
a v1 object reads back through v1beta1 unchanged. Ubuntu, which v1 dropped, is refused naming
the field.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
from typing import Any, ClassVar, Final

import attrs

from karpy.apis.meta import ObjectMeta
from karpy.apis.schema import Rule, field
from karpy.apis.v1alpha5.translate import TranslationError
from karpy.apis.v1beta1.convert import NodeClassDefaults
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import (
    SPEC_RULES,
    AMIFamily,
    AMISelectorTerm,
    EC2NodeClass,
    EC2NodeClassSpec,
    MetadataOptions,
)
from karpy_aws.apis.ec2nodeclass_status import EC2NodeClassStatus

API_VERSION: Final = f"{awslabels.AWS_GROUP}/v1beta1"

UBUNTU_MESSAGE: Final = (
    "v1 has no Ubuntu family: set amiFamily AL2 and amiSelectorTerms naming your Ubuntu AMIs"
)


class V1Beta1AMIFamily(enum.StrEnum):
    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    UBUNTU = "Ubuntu"
    CUSTOM = "Custom"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"


_ALIASED: Final = {f.value.lower(): f for f in AMIFamily if f is not AMIFamily.CUSTOM}


@attrs.frozen(kw_only=True)
class V1Beta1MetadataOptions(MetadataOptions):
    """IMDS settings; v1beta1 defaulted the hop limit to 2."""

    http_put_response_hop_limit: int = field(
        default=2, doc="Hop limit for IMDS responses (v1beta1 default 2).", minimum=1, maximum=64
    )


@attrs.frozen(kw_only=True)
class V1Beta1EC2NodeClassSpec(EC2NodeClassSpec):
    # Wider than v1's family (Ubuntu), so that v1beta1 manifests naming it are refused by the
    # rule below, naming the field, rather than by an enum that cannot say why.
    ami_family: V1Beta1AMIFamily | None = field(  # type: ignore[assignment]
        default=None,
        doc="AMI family; without amiSelectorTerms, v1 selects the alias <family>@latest.",
        rules=(Rule(rule="self != 'Ubuntu'", message=UBUNTU_MESSAGE),),
    )
    ami_selector_terms: tuple[AMISelectorTerm, ...] = field(
        factory=tuple,
        doc="AMI discovery; optional in v1beta1 (v1: an alias for amiFamily when unset).",
        crd_default=False,
        max_items=30,
        rules=(
            Rule(
                rule="!(self.exists(x, has(x.alias)) && self.size() != 1)",
                message="'alias' is mutually exclusive, cannot be set with a combination of "
                "other amiSelectorTerms",
            ),
        ),
    )
    metadata_options: V1Beta1MetadataOptions = field(
        factory=V1Beta1MetadataOptions, doc="IMDS settings written into the launch template."
    )


@attrs.frozen(kw_only=True)
class V1Beta1EC2NodeClass:
    """A Karpenter v0.32-v0.37 EC2NodeClass; stored as v1."""

    GROUP: ClassVar[str] = awslabels.AWS_GROUP
    VERSION: ClassVar[str] = "v1beta1"
    KIND: ClassVar[str] = "EC2NodeClass"
    PLURAL: ClassVar[str] = "ec2nodeclasses"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: V1Beta1EC2NodeClassSpec = field(doc="Desired launch configuration.", rules=SPEC_RULES)
    status: EC2NodeClassStatus = field(
        factory=EC2NodeClassStatus, doc="Observed state, written by karpy.", crd_default=False
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="EC2NodeClass", crd_default=False)


def _fields(spec: Any, into: type[Any]) -> dict[str, Any]:
    return {a.name: getattr(spec, a.name) for a in attrs.fields(into)}


def to_v1(node_class: V1Beta1EC2NodeClass, defaults: NodeClassDefaults) -> EC2NodeClass:
    """The v1 EC2NodeClass a v1beta1 one means. Raises TranslationError naming the field for
    Ubuntu, and for an amiFamily that v1 cannot select without amiSelectorTerms (Custom, or
    none at all)."""
    del defaults  # a NodeClass references nothing that needs them
    spec = node_class.spec
    family = spec.ami_family
    if family is V1Beta1AMIFamily.UBUNTU:
        raise TranslationError(
            "amiFamily", [f"spec.amiFamily: Unsupported value: {UBUNTU_MESSAGE}"]
        )
    terms, v1_family = spec.ami_selector_terms, AMIFamily(family) if family else None
    if not terms:
        if family is None or family is V1Beta1AMIFamily.CUSTOM:
            raise TranslationError(
                "amiSelectorTerms",
                [
                    "spec.amiSelectorTerms: Required value: v1 needs AMI selector terms unless "
                    "amiFamily names a family it can alias (AL2, AL2023, Bottlerocket, Windows)"
                ],
            )
        terms, v1_family = (AMISelectorTerm(alias=f"{family.value.lower()}@latest"),), None
    metadata = MetadataOptions(**_fields(spec.metadata_options, MetadataOptions))
    return EC2NodeClass(
        metadata=node_class.metadata,
        spec=EC2NodeClassSpec(
            **_fields(spec, EC2NodeClassSpec)
            | {"ami_selector_terms": terms, "ami_family": v1_family, "metadata_options": metadata}
        ),
        status=node_class.status,
    )


def from_v1(node_class: EC2NodeClass, defaults: NodeClassDefaults) -> V1Beta1EC2NodeClass:
    """The v1beta1 view of a v1 EC2NodeClass (total): a lone `<family>@latest` alias reads
    as that amiFamily, anything else as it is."""
    del defaults
    spec = node_class.spec
    terms: tuple[AMISelectorTerm, ...] = spec.ami_selector_terms
    family = V1Beta1AMIFamily(spec.ami_family) if spec.ami_family else None
    if len(terms) == 1 and family is None and terms[0] == AMISelectorTerm(alias=terms[0].alias):
        name, _, version = (terms[0].alias or "").partition("@")
        if version == "latest" and name in _ALIASED:
            terms, family = (), V1Beta1AMIFamily(_ALIASED[name])
    metadata = V1Beta1MetadataOptions(**_fields(spec.metadata_options, MetadataOptions))
    return V1Beta1EC2NodeClass(
        metadata=node_class.metadata,
        spec=V1Beta1EC2NodeClassSpec(
            **_fields(spec, EC2NodeClassSpec)
            | {"ami_selector_terms": terms, "ami_family": family, "metadata_options": metadata}
        ),
        status=node_class.status,
    )
