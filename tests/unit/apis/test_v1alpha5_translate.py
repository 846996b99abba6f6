"""Provisioner / AWSNodeTemplate -> NodePool / EC2NodeClass, field by field, as Karpenter's v1
migration guide maps them (karpenter-reference section 1.6)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.apis.codec import from_dict, to_dict
from karpy.apis.v1 import labels
from karpy.apis.v1.nodepool import ConsolidationPolicy
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.apis.v1alpha5.translate import LegacySettings, TranslationError, translate
from karpy.apis.v1alpha5.validation import validate_provisioner
from karpy_aws.apis.legacy import NODE_CLASSES as AWS
from karpy_aws.apis.v1alpha1 import AWSNodeTemplate
from karpy_kwok.apis.legacy import NODE_CLASSES as KWOK

SETTINGS = LegacySettings(cluster_name="demo", default_instance_profile="Default")


def provisioner(**spec: Any) -> Provisioner:
    return from_dict(
        Provisioner,
        {
            "apiVersion": "karpenter.sh/v1alpha5",
            "kind": "Provisioner",
            "metadata": {"name": "default"},
            "spec": spec,
        },
    )


def test_ttl_seconds_after_empty_becomes_when_empty_with_consolidate_after() -> None:
    pool = translate(provisioner(ttlSecondsAfterEmpty=30), KWOK, {}, settings=SETTINGS).nodepool
    assert pool.spec.disruption.consolidation_policy is ConsolidationPolicy.WHEN_EMPTY
    assert pool.spec.disruption.consolidate_after == "30s"


def test_consolidation_enabled_becomes_when_empty_or_underutilized_after_0s() -> None:
    pool = translate(
        provisioner(consolidation={"enabled": True}), KWOK, {}, settings=SETTINGS
    ).nodepool
    assert (
        pool.spec.disruption.consolidation_policy is ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    )
    assert pool.spec.disruption.consolidate_after == "0s"


def test_neither_ttl_nor_consolidation_never_scales_down_as_v0_did() -> None:
    pool = translate(provisioner(), KWOK, {}, settings=SETTINGS).nodepool
    assert pool.spec.disruption.consolidate_after == "Never"
    assert pool.spec.template.spec.expire_after == "Never"


def test_ttl_seconds_until_expired_becomes_expire_after_with_a_warning() -> None:
    result = translate(provisioner(ttlSecondsUntilExpired=2592000), KWOK, {}, settings=SETTINGS)
    assert result.nodepool.spec.template.spec.expire_after == "2592000s"
    assert [w.path for w in result.warnings] == ["spec.ttlSecondsUntilExpired"]


def test_labels_taints_requirements_limits_weight_are_carried() -> None:
    result = translate(
        provisioner(
            labels={"billing-team": "my-team"},
            annotations={"a": "b"},
            taints=[{"key": "example.com/special-taint", "effect": "NoSchedule"}],
            startupTaints=[{"key": "boot", "effect": "NoSchedule"}],
            requirements=[
                {
                    "key": "karpenter.sh/capacity-type",
                    "operator": "In",
                    "values": ["spot", "on-demand"],
                }
            ],
            limits={"resources": {"cpu": "1000", "memory": "1000Gi"}},
            weight=50,
        ),
        KWOK,
        {},
        settings=SETTINGS,
    )
    spec = result.nodepool.spec
    assert spec.template.metadata.labels == {
        "billing-team": "my-team",
        labels.LABEL_PROVISIONER_NAME: "default",
    }
    assert spec.template.metadata.annotations == {"a": "b"}
    assert [t.key for t in spec.template.spec.taints] == ["example.com/special-taint"]
    assert [t.key for t in spec.template.spec.startup_taints] == ["boot"]
    reqs = {r.key: r.values for r in spec.template.spec.requirements}
    assert reqs[labels.LABEL_CAPACITY_TYPE] == ("spot", "on-demand")
    assert reqs[labels.LABEL_ARCH] == ("amd64",)  # v0.x's default, written out
    assert spec.limits == {"cpu": "1000", "memory": "1000Gi"}
    assert spec.weight == 50
    assert result.warnings == ()


def test_inline_provider_becomes_an_ec2nodeclass_named_after_the_provisioner() -> None:
    result = translate(
        provisioner(
            provider={
                "instanceProfile": "Profile",
                "subnetSelector": {"karpenter.sh/discovery": "demo"},
                "securityGroupSelector": {"aws-ids": "sg-1,sg-2"},
                "amiFamily": "Bottlerocket",
                "tags": {"team": "a"},
                "metadataOptions": {"httpTokens": "optional"},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "30Gi", "volumeType": "gp3"}}
                ],
            }
        ),
        AWS,
        {},
        settings=SETTINGS,
    )
    ref = result.nodepool.spec.template.spec.node_class_ref
    assert (ref.group, ref.kind, ref.name) == ("karpenter.k8s.aws", "EC2NodeClass", "default")
    (node_class,) = result.node_classes
    wire = to_dict(node_class.spec)
    assert wire["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "demo"}}]
    assert wire["securityGroupSelectorTerms"] == [{"id": "sg-1"}, {"id": "sg-2"}]
    assert wire["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert wire["instanceProfile"] == "Profile"
    assert wire["tags"] == {"team": "a"}
    assert wire["metadataOptions"]["httpTokens"] == "optional"
    assert wire["metadataOptions"]["httpPutResponseHopLimit"] == 2  # v0.x default kept
    assert wire["blockDeviceMappings"] == [
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "30Gi", "volumeType": "gp3"}}
    ]


def test_unset_selectors_default_to_the_cluster_tag_with_warnings() -> None:
    result = translate(provisioner(provider={}), AWS, {}, settings=SETTINGS)
    (node_class,) = result.node_classes
    assert to_dict(node_class.spec)["subnetSelectorTerms"] == [
        {"tags": {"kubernetes.io/cluster/demo": "*"}}
    ]
    assert node_class.spec.instance_profile == "Default"
    assert {w.path for w in result.warnings} == {
        "spec.provider.subnetSelector",
        "spec.provider.securityGroupSelector",
        "spec.provider.amiFamily",
    }
    assert to_dict(node_class.spec)["amiSelectorTerms"] == [{"alias": "al2023@latest"}]


def template(**spec: Any) -> AWSNodeTemplate:
    return from_dict(AWSNodeTemplate, {"metadata": {"name": "tmpl"}, "spec": spec})


def test_provider_ref_points_at_the_template_ec2nodeclass() -> None:
    result = translate(provisioner(providerRef={"name": "tmpl"}), AWS, {}, settings=SETTINGS)
    assert result.nodepool.spec.template.spec.node_class_ref.name == "tmpl"
    assert result.node_classes == ()


def test_template_fields_user_data_ami_selector_monitoring() -> None:
    translated = AWS.for_template(
        template(
            subnetSelector={"aws-ids": "subnet-1"},
            securityGroupSelector={"aws::name": "nodes"},
            amiSelector={"aws::name": "my-ami-*", "aws::owners": "self"},
            userData="#!/bin/bash\necho hi\n",
            detailedMonitoring=True,
            instanceProfile="P",
        ),
        settings=SETTINGS,
    )
    wire = to_dict(translated.node_class.spec)
    assert wire["subnetSelectorTerms"] == [{"id": "subnet-1"}]
    assert wire["securityGroupSelectorTerms"] == [{"name": "nodes"}]
    assert wire["amiSelectorTerms"] == [{"name": "my-ami-*", "owner": "self"}]
    assert wire["amiFamily"] == "AL2"
    assert wire["userData"] == "#!/bin/bash\necho hi\n"
    assert wire["detailedMonitoring"] is True


def test_kubelet_configuration_moves_to_a_per_provisioner_nodeclass() -> None:
    result = translate(
        provisioner(
            providerRef={"name": "tmpl"},
            kubeletConfiguration={
                "containerRuntime": "containerd",
                "evictionMaxPodGracePeriod": 60,
                "maxPods": 20,
            },
        ),
        AWS,
        {
            "tmpl": template(
                instanceProfile="P", subnetSelector={"a": "b"}, securityGroupSelector={"a": "b"}
            )
        },
        settings=SETTINGS,
    )
    (node_class,) = result.node_classes
    assert node_class.metadata.name == "default"
    assert result.nodepool.spec.template.spec.node_class_ref.name == "default"
    assert to_dict(node_class.spec)["kubelet"] == {"evictionMaxPodGracePeriod": 60, "maxPods": 20}
    assert "spec.kubeletConfiguration.containerRuntime" in {w.path for w in result.warnings}


def test_a_kubelet_copy_of_a_template_of_the_same_name_gets_a_name_of_its_own() -> None:
    # As in seed 003, Provisioner and AWSNodeTemplate share a name; the template's own
    # EC2NodeClass keeps the name, the Provisioner's copy with its kubelet settings does not.
    result = translate(
        provisioner(
            providerRef={"name": "default"},
            kubeletConfiguration={"evictionMaxPodGracePeriod": 60},
        ),
        AWS,
        {
            "default": template(
                instanceProfile="P", subnetSelector={"a": "b"}, securityGroupSelector={"a": "b"}
            )
        },
        settings=SETTINGS,
    )
    (node_class,) = result.node_classes
    assert node_class.metadata.name == "default-kubelet"
    assert result.nodepool.spec.template.spec.node_class_ref.name == "default-kubelet"
    assert to_dict(node_class.spec)["kubelet"] == {"evictionMaxPodGracePeriod": 60}


@pytest.mark.parametrize(
    ("provider", "field"),
    [
        ({"launchTemplate": "lt"}, "spec.provider.launchTemplate"),
        ({"amiFamily": "Ubuntu"}, "spec.provider.amiFamily"),
        ({"amiFamily": "Windows2019"}, "spec.provider.amiFamily: Windows2019: karpy does not"),
        ({"amiFamily": "Windows2022", "amiSelector": {"team": "a"}}, "spec.provider.amiFamily"),
    ],
)
def test_what_v1_cannot_express_is_refused_by_name(provider: dict[str, str], field: str) -> None:
    with pytest.raises(TranslationError) as caught:
        translate(provisioner(provider=provider), AWS, {}, settings=SETTINGS)
    assert any(p.startswith(field) for p in caught.value.problems)


def test_kwok_warns_about_aws_settings_and_kubelet_by_name() -> None:
    result = translate(
        provisioner(provider={"instanceProfile": "p"}, kubeletConfiguration={"maxPods": 3}),
        KWOK,
        {},
        settings=SETTINGS,
    )
    assert {w.path for w in result.warnings} == {"spec.provider", "spec.kubeletConfiguration"}


def test_validation_refuses_what_the_v1alpha5_webhook_refused() -> None:
    bad = provisioner(
        requirements=[
            {"key": " karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "karpenter.sh/unknown", "operator": "Exists"},
        ],
        ttlSecondsAfterEmpty=30,
        consolidation={"enabled": True},
    )
    problems = validate_provisioner(bad)
    assert problems[0].startswith(
        'spec.requirements[0].key: Invalid value: " karpenter.sh/capacity-type"'
    )
    assert problems[1].startswith('spec.requirements[1].key: Invalid value: "karpenter.sh/unknown"')
    assert "ttlSecondsAfterEmpty, consolidation.enabled" in problems[2]
