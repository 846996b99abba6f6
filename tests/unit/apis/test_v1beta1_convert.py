"""v1beta1 <-> v1 conversion (karpy.apis.v1beta1.convert): Karpenter's migration rules case by
case, and the round-trip properties the conversion webhook relies on (the apiserver stores v1
and converts on every v1beta1 read, so a value changed on the way would be written back)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.apis.codec import from_dict, to_dict
from karpy.apis.v1 import nodeclaim as v1claim
from karpy.apis.v1 import nodepool as v1pool
from karpy.apis.v1alpha5.translate import TranslationError
from karpy.apis.v1beta1 import nodepool as beta
from karpy.apis.v1beta1.convert import (
    NodeClassDefaults,
    nodeclaim_from_v1,
    nodeclaim_to_v1,
    nodepool_from_v1,
    nodepool_to_v1,
)
from tests.unit.apis.strategies import models

AWS = NodeClassDefaults(
    group="karpenter.k8s.aws",
    kind="EC2NodeClass",
    versions={("karpenter.k8s.aws", "EC2NodeClass"): "v1beta1"},
)


def _beta_pool(spec: dict[str, object]) -> beta.NodePool:
    return from_dict(
        beta.NodePool,
        {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": {"name": "p"}}
        | {"spec": spec},
    )


def _template(**extra: object) -> dict[str, object]:
    return {
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
            ],
            "nodeClassRef": {"name": "default"} | extra,
        }
    }


def test_when_underutilized_becomes_when_empty_or_underutilized_after_0s() -> None:
    v1 = nodepool_to_v1(_beta_pool({"template": _template()}), defaults=AWS)
    assert v1.spec.disruption.consolidation_policy is (
        v1pool.ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    )
    assert v1.spec.disruption.consolidate_after == "0s"


def test_when_empty_keeps_its_consolidate_after() -> None:
    pool = _beta_pool(
        {
            "template": _template(),
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
        }
    )
    disruption = nodepool_to_v1(pool, defaults=AWS).spec.disruption
    assert disruption.consolidation_policy is v1pool.ConsolidationPolicy.WHEN_EMPTY
    assert disruption.consolidate_after == "30s"


def test_expire_after_moves_to_the_template_spec() -> None:
    pool = _beta_pool({"template": _template(), "disruption": {"expireAfter": "Never"}})
    assert nodepool_to_v1(pool, defaults=AWS).spec.template.spec.expire_after == "Never"
    default = _beta_pool({"template": _template()})
    assert nodepool_to_v1(default, defaults=AWS).spec.template.spec.expire_after == "720h"


@pytest.mark.parametrize(
    ("ref", "group", "kind"),
    [
        pytest.param({}, "karpenter.k8s.aws", "EC2NodeClass", id="unset: the provider's"),
        pytest.param(
            {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass"},
            "karpenter.k8s.aws",
            "EC2NodeClass",
            id="aws",
        ),
        pytest.param(
            {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass"},
            "karpenter.kwok.sh",
            "KWOKNodeClass",
            id="kwok",
        ),
    ],
)
def test_node_class_ref_gains_group_and_kind(ref: dict[str, str], group: str, kind: str) -> None:
    v1 = nodepool_to_v1(_beta_pool({"template": _template(**ref)}), defaults=AWS)
    assert to_dict(v1.spec.template.spec.node_class_ref) == {
        "group": group,
        "kind": kind,
        "name": "default",
    }


def test_a_malformed_api_version_is_refused_naming_the_field() -> None:
    pool = _beta_pool({"template": _template(apiVersion="v1beta1")})
    with pytest.raises(TranslationError, match=r"spec\.template\.spec\.nodeClassRef\.apiVersion"):
        nodepool_to_v1(pool, defaults=AWS)


def test_kubelet_is_refused_naming_the_field() -> None:
    template = _template()
    template["spec"] = dict(template["spec"], kubelet={"maxPods": 110})  # type: ignore[call-overload]
    with pytest.raises(TranslationError, match=r"spec\.template\.spec\.kubelet: .*EC2NodeClass"):
        nodepool_to_v1(_beta_pool({"template": template}), defaults=AWS)


def test_limits_weight_budgets_labels_and_taints_carry_over() -> None:
    template = _template()
    template["metadata"] = {"labels": {"team": "a"}}
    template["spec"] = dict(  # type: ignore[call-overload]
        template["spec"], taints=[{"key": "gpu", "effect": "NoSchedule"}]
    )
    pool = _beta_pool(
        {
            "template": template,
            "limits": {"cpu": "1000"},
            "weight": 10,
            "disruption": {"budgets": [{"nodes": "0", "schedule": "@daily", "duration": "10m"}]},
        }
    )
    wire = to_dict(nodepool_to_v1(pool, defaults=AWS))["spec"]
    assert wire["limits"] == {"cpu": "1000"}
    assert wire["weight"] == 10
    assert wire["disruption"]["budgets"] == [
        {"nodes": "0", "schedule": "@daily", "duration": "10m"}
    ]
    assert wire["template"]["metadata"] == {"labels": {"team": "a"}}
    assert wire["template"]["spec"]["taints"] == [{"key": "gpu", "effect": "NoSchedule"}]


def test_a_static_pool_has_no_v1beta1_form() -> None:
    v1 = nodepool_to_v1(_beta_pool({"template": _template()}), defaults=AWS)
    static = attrs.evolve(v1, spec=attrs.evolve(v1.spec, replicas=3))
    with pytest.raises(TranslationError, match=r"spec\.replicas"):
        nodepool_from_v1(static, defaults=AWS)


def test_v1_reads_back_as_v1beta1_with_karpenter_names() -> None:
    v1 = nodepool_to_v1(_beta_pool({"template": _template()}), defaults=AWS)
    wire = to_dict(nodepool_from_v1(v1, defaults=AWS))
    assert wire["apiVersion"] == "karpenter.sh/v1beta1"
    assert wire["spec"]["disruption"] == {
        "consolidationPolicy": "WhenUnderutilized",
        "expireAfter": "720h",
        "budgets": [{"nodes": "10%"}],
    }
    assert wire["spec"]["template"]["spec"]["nodeClassRef"] == {
        "name": "default",
        "kind": "EC2NodeClass",
        "apiVersion": "karpenter.k8s.aws/v1beta1",
    }


# ---------------------------------------------------------------------------- properties

_GROUPS = st.sampled_from(["karpenter.k8s.aws", "karpenter.kwok.sh", "example.com"])
_KINDS = st.sampled_from(["EC2NodeClass", "KWOKNodeClass", "Custom"])


@st.composite
def _v1_refs(draw: st.DrawFn) -> object:
    from karpy.apis.v1.common import NodeClassReference

    return NodeClassReference(group=draw(_GROUPS), kind=draw(_KINDS), name=draw(st.text()))


@st.composite
def _v1_pools(draw: st.DrawFn) -> v1pool.NodePool:
    pool = draw(models(v1pool.NodePool))
    template = attrs.evolve(pool.spec.template.spec, node_class_ref=draw(_v1_refs()))
    return attrs.evolve(
        pool,
        api_version=v1pool.API_VERSION,
        kind="NodePool",
        spec=attrs.evolve(
            pool.spec,
            replicas=None,
            template=attrs.evolve(pool.spec.template, spec=template),
        ),
    )


@settings(max_examples=25)
@given(pool=_v1_pools())
def test_v1_nodepool_round_trips_through_v1beta1(pool: v1pool.NodePool) -> None:
    assert nodepool_to_v1(nodepool_from_v1(pool, defaults=AWS), defaults=AWS) == pool


@st.composite
def _beta_pools(draw: st.DrawFn) -> beta.NodePool:
    pool = draw(models(beta.NodePool))
    group, kind = draw(_GROUPS), draw(_KINDS)
    ref = beta.NodeClassReference(
        name=draw(st.text()), kind=kind, api_version=AWS.api_version(group, kind)
    )
    disruption = pool.spec.disruption
    if disruption.consolidation_policy is not beta.ConsolidationPolicy.WHEN_EMPTY and (
        disruption.consolidate_after == "0s"
    ):
        # v1beta1 spells "no wait" by leaving consolidateAfter out; both mean 0s in v1.
        disruption = attrs.evolve(disruption, consolidate_after=None)
    if disruption.consolidation_policy is beta.ConsolidationPolicy.WHEN_EMPTY and (
        disruption.consolidate_after is None
    ):
        # The v1beta1 schema requires it with WhenEmpty (DISRUPTION_RULES).
        disruption = attrs.evolve(disruption, consolidate_after="30s")
    template = attrs.evolve(pool.spec.template.spec, node_class_ref=ref, kubelet=None)
    return attrs.evolve(
        pool,
        api_version=beta.API_VERSION,
        kind="NodePool",
        spec=attrs.evolve(
            pool.spec,
            disruption=disruption,
            template=attrs.evolve(pool.spec.template, spec=template),
        ),
    )


@settings(max_examples=25)
@given(pool=_beta_pools())
def test_v1beta1_nodepool_round_trips_through_v1(pool: beta.NodePool) -> None:
    assert nodepool_from_v1(nodepool_to_v1(pool, defaults=AWS), defaults=AWS) == pool


@st.composite
def _v1_claims(draw: st.DrawFn) -> v1claim.NodeClaim:
    claim = draw(models(v1claim.NodeClaim))
    return attrs.evolve(
        claim,
        api_version=v1claim.API_VERSION,
        kind="NodeClaim",
        spec=attrs.evolve(claim.spec, node_class_ref=draw(_v1_refs())),
    )


@settings(max_examples=25)
@given(claim=_v1_claims())
def test_v1_nodeclaim_round_trips_through_v1beta1(claim: v1claim.NodeClaim) -> None:
    assert nodeclaim_to_v1(nodeclaim_from_v1(claim, defaults=AWS), defaults=AWS) == claim


def test_nodeclaim_kubelet_is_refused_naming_the_field() -> None:
    claim = from_dict(
        beta.NodeClaim,
        {
            "metadata": {"name": "c"},
            "spec": {
                "requirements": [],
                "nodeClassRef": {"name": "default"},
                "kubelet": {"maxPods": 10},
            },
        },
    )
    with pytest.raises(TranslationError, match=r"spec\.kubelet"):
        nodeclaim_to_v1(claim, defaults=AWS)
