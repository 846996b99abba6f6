"""EC2NodeClass v1beta1 <-> v1 (karpy_aws.apis.v1beta1): the AMI family becomes an alias, the
v1beta1 hop limit is written out, Ubuntu is refused naming the field, and v1 objects survive a
trip through v1beta1 (the conversion webhook converts on every v1beta1 read)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.apis.codec import from_dict, to_dict
from karpy.apis.v1alpha5.translate import TranslationError
from karpy.apis.v1beta1.convert import NodeClassDefaults
from karpy_aws.apis import ec2nodeclass as v1
from karpy_aws.apis.v1beta1 import V1Beta1EC2NodeClass, from_v1, to_v1
from tests.unit.apis.strategies import models

DEFAULTS = NodeClassDefaults(group="karpenter.k8s.aws", kind="EC2NodeClass")
SPEC = {
    "role": "KarpenterNodeRole",
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
}


def _beta(**spec: object) -> V1Beta1EC2NodeClass:
    return from_dict(V1Beta1EC2NodeClass, {"metadata": {"name": "n"}, "spec": SPEC | spec})


@pytest.mark.parametrize(
    ("family", "alias"),
    [
        pytest.param("AL2", "al2@latest", id="al2"),
        pytest.param("AL2023", "al2023@latest", id="al2023"),
        pytest.param("Bottlerocket", "bottlerocket@latest", id="bottlerocket"),
        pytest.param("Windows2022", "windows2022@latest", id="windows"),
    ],
)
def test_a_family_without_terms_becomes_its_latest_alias(family: str, alias: str) -> None:
    converted = to_v1(_beta(amiFamily=family), DEFAULTS)
    assert converted.spec.ami_selector_terms == (v1.AMISelectorTerm(alias=alias),)
    assert converted.spec.ami_family is None
    assert from_v1(converted, DEFAULTS) == _beta(amiFamily=family)


def test_terms_and_family_are_kept_together() -> None:
    converted = to_v1(_beta(amiFamily="AL2023", amiSelectorTerms=[{"id": "ami-0123"}]), DEFAULTS)
    assert converted.spec.ami_family is v1.AMIFamily.AL2023
    assert converted.spec.ami_selector_terms == (v1.AMISelectorTerm(id="ami-0123"),)


def test_the_v1beta1_hop_limit_is_written_out() -> None:
    assert to_v1(_beta(amiFamily="AL2"), DEFAULTS).spec.metadata_options == v1.MetadataOptions(
        http_put_response_hop_limit=2
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"amiFamily": "Ubuntu"}, r"spec\.amiFamily.*Ubuntu", id="ubuntu"),
        pytest.param({"amiFamily": "Custom"}, r"spec\.amiSelectorTerms: Required", id="custom"),
    ],
)
def test_what_v1_cannot_select_is_refused_naming_the_field(
    spec: dict[str, object], field: str
) -> None:
    with pytest.raises(TranslationError, match=field):
        to_v1(_beta(**spec), DEFAULTS)


_ALIASES = st.sampled_from(
    ["al2@latest", "al2023@latest", "bottlerocket@latest", "al2023@v20240807", "windows2022@latest"]
)
_TERMS = st.one_of(
    _ALIASES.map(lambda alias: (v1.AMISelectorTerm(alias=alias),)),
    st.lists(
        st.builds(v1.AMISelectorTerm, id=st.sampled_from(["ami-1", "ami-2"])),
        min_size=1,
        max_size=2,
    ).map(tuple),
)


@st.composite
def _v1_classes(draw: st.DrawFn) -> v1.EC2NodeClass:
    """v1 classes varied where the conversion does anything: AMI terms, family, IMDS."""
    base = to_v1(_beta(amiFamily="AL2"), DEFAULTS)
    spec = attrs.evolve(
        base.spec,
        ami_selector_terms=draw(_TERMS),
        ami_family=draw(st.none() | st.sampled_from(list(v1.AMIFamily))),
        metadata_options=draw(models(v1.MetadataOptions)),
        user_data=draw(st.none() | st.text(max_size=5)),
    )
    return attrs.evolve(base, spec=spec)


@settings(max_examples=50)
@given(node_class=_v1_classes())
def test_v1_ec2nodeclass_round_trips_through_v1beta1(node_class: v1.EC2NodeClass) -> None:
    assert to_v1(from_v1(node_class, DEFAULTS), DEFAULTS) == node_class


def test_a_lone_latest_alias_reads_back_as_the_family() -> None:
    converted = to_v1(_beta(amiFamily="AL2"), DEFAULTS)
    assert to_dict(from_v1(converted, DEFAULTS))["spec"]["amiFamily"] == "AL2"
