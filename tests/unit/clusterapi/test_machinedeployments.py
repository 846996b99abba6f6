"""MachineDeployments read as instance types: shape, labels, taints, zone, price and room."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from karpy.apis.kube.common import LabelSelectorOperator
from karpy.apis.v1 import labels as wk
from karpy.cloudprovider.registry import ProviderConfigError
from karpy.core.resources import CPU, MEMORY, PODS
from karpy_clusterapi import options_from_settings
from karpy_clusterapi.apis.nodeclass import Selector, SelectorRequirement
from karpy_clusterapi.providers.machinedeployments import (
    MachineDeploymentError,
    Pricing,
    instance_type,
    needs_template,
    node_taints,
    parse,
    price,
    selects,
    template_hash,
    with_template_status,
)

LABELS = "capacity.cluster-autoscaler.kubernetes.io/labels"
TAINTS = "capacity.cluster-autoscaler.kubernetes.io/taints"
PRICING = Pricing(per_vcpu=Decimal("0.03"), per_gib=Decimal("0.005"))


def md(annotations: dict[str, str], *, replicas: int = 0, **template: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "fleet",
            "name": "workers",
            "uid": "u",
            "resourceVersion": "1",
            "labels": {"pool": "a"},
            "annotations": annotations,
        },
        "spec": {"clusterName": "c", "replicas": replicas, "template": {"spec": template}},
    }


SHAPE = {
    "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
    "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
}


def test_the_shape_comes_from_the_scale_from_zero_annotations() -> None:
    it = instance_type(
        parse(
            md(
                {
                    **SHAPE,
                    "capacity.cluster-autoscaler.kubernetes.io/maxPods": "58",
                    "capacity.cluster-autoscaler.kubernetes.io/gpu-count": "1",
                    LABELS: "disk=ssd,kubernetes.io/arch=arm64",
                },
                failureDomain="rack-2",
            )
        ),
        pricing=PRICING,
        default_zone="default",
    )
    assert it.name == "workers"
    assert it.capacity.get_amount(CPU) == 4000
    assert it.capacity.get_amount(MEMORY) == 16 * 2**30 * 1000
    assert it.capacity.get_amount(PODS) == 58000
    assert it.capacity.get_amount("nvidia.com/gpu") == 1000
    labels = it.requirements.labels()
    assert labels["disk"] == "ssd"
    assert labels[wk.LABEL_ARCH] == "arm64"
    assert labels["karpenter.cluster.x-k8s.io/machinedeployment"] == "workers"
    (offering,) = it.offerings
    assert offering.zone == "rack-2"
    assert offering.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND
    assert offering.price == pytest.approx(4 * 0.03 + 16 * 0.005)
    assert offering.available


def test_without_a_failure_domain_the_zone_is_the_default() -> None:
    it = instance_type(parse(md(SHAPE)), pricing=PRICING, default_zone="dc-1")
    assert it.offerings[0].zone == "dc-1"


def test_a_price_annotation_wins_over_the_uniform_cost() -> None:
    found = parse(md({**SHAPE, "karpenter.cluster.x-k8s.io/price": "0.5"}))
    assert price(found, PRICING) == 0.5


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        pytest.param({}, "capacity.cluster-autoscaler.kubernetes.io/cpu", id="no-cpu"),
        pytest.param(
            {**SHAPE, "capacity.cluster-autoscaler.kubernetes.io/memory": "lots"},
            "capacity.cluster-autoscaler.kubernetes.io/memory",
            id="bad-memory",
        ),
        pytest.param(
            {**SHAPE, "karpenter.cluster.x-k8s.io/price": "-1"},
            "karpenter.cluster.x-k8s.io/price",
            id="negative-price",
        ),
        pytest.param(
            {**SHAPE, "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "many"},
            "node-group-max-size",
            id="bad-max-size",
        ),
        pytest.param(
            {
                **SHAPE,
                "capacity.cluster-autoscaler.kubernetes.io/labels": "topology.kubernetes.io/zone=x",
            },
            "topology.kubernetes.io/zone",
            id="zone-label",
        ),
    ],
)
def test_annotations_that_do_not_parse_are_named(annotations: dict[str, str], named: str) -> None:
    with pytest.raises(MachineDeploymentError, match="fleet/workers") as refused:
        instance_type(parse(md(annotations)), pricing=PRICING, default_zone="d")
    assert named in str(refused.value)


def test_at_its_max_size_the_offering_is_unavailable() -> None:
    limit = {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3"}
    full = instance_type(
        parse(md({**SHAPE, **limit}, replicas=3)), pricing=PRICING, default_zone="d"
    )
    room = instance_type(
        parse(md({**SHAPE, **limit}, replicas=2)), pricing=PRICING, default_zone="d"
    )
    assert not full.offerings[0].available
    assert room.offerings[0].available


def test_taints_annotation() -> None:
    found = parse(md({TAINTS: "gpu=true:NoSchedule,spot:NoExecute"}))
    assert [(t.key, t.value, t.effect) for t in node_taints(found)] == [
        ("gpu", "true", "NoSchedule"),
        ("spot", None, "NoExecute"),
    ]
    bad = parse(md({TAINTS: "gpu=true:Sometimes"}))
    with pytest.raises(MachineDeploymentError, match="taints"):
        node_taints(bad)


def test_selector_semantics() -> None:
    labels = {"pool": "a", "tier": "web"}
    assert selects(Selector(), labels)
    assert selects(Selector(match_labels={"pool": "a"}), labels)
    assert not selects(Selector(match_labels={"pool": "b"}), labels)

    def expr(op: LabelSelectorOperator, *values: str) -> Selector:
        return Selector(
            match_expressions=(SelectorRequirement(key="tier", operator=op, values=values),)
        )

    assert selects(expr(LabelSelectorOperator.IN, "web", "db"), labels)
    assert not selects(expr(LabelSelectorOperator.NOT_IN, "web"), labels)
    assert selects(expr(LabelSelectorOperator.EXISTS), labels)
    assert not selects(expr(LabelSelectorOperator.DOES_NOT_EXIST), labels)
    assert selects(expr(LabelSelectorOperator.NOT_IN, "web"), {"pool": "a"})


def test_the_template_hash_follows_version_infrastructure_and_bootstrap() -> None:
    base = {
        "version": "v1.33.0",
        "infrastructureRef": {"apiGroup": "infra", "kind": "VM", "name": "t1"},
        "bootstrap": {"dataSecretName": "boot"},
    }
    same = template_hash(dict(base))
    assert template_hash(base) == same
    assert template_hash({**base, "version": "v1.34.0"}) != same
    assert (
        template_hash({**base, "infrastructureRef": {**base["infrastructureRef"], "name": "t2"}})
        != same
    )
    assert template_hash({**base, "bootstrap": {"dataSecretName": "boot2"}}) != same
    assert template_hash({**base, "failureDomain": "rack-9"}) == same


def test_settings() -> None:
    options = options_from_settings(
        {"namespace": "fleet", "price-per-vcpu": "0.1", "price-per-gib": "0", "default-zone": "dc"}
    )
    assert options.namespace == "fleet"
    assert options.pricing == Pricing(per_vcpu=Decimal("0.1"), per_gib=Decimal(0))
    assert options.default_zone == "dc"
    assert options_from_settings({}).namespace is None
    with pytest.raises(ProviderConfigError, match="'price-per-gib'"):
        options_from_settings({"price-per-gib": "cheap"})
    with pytest.raises(ProviderConfigError, match="unknown setting 'zone'"):
        options_from_settings({"zone": "a"})


def test_without_annotations_the_shape_comes_from_the_infrastructure_template_status() -> None:
    found = parse(
        md({}, infrastructureRef={"apiGroup": "infra.example", "kind": "VMTemplate", "name": "t"})
    )
    assert found.infrastructure == ("infra.example", "VMTemplate", "t")
    assert needs_template(found)
    described = with_template_status(
        found,
        {
            "status": {
                "capacity": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"},
                "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"},
            }
        },
    )
    it = instance_type(described, pricing=PRICING, default_zone="d")
    assert it.capacity.get_amount(CPU) == 16000
    assert it.capacity.get_amount("nvidia.com/gpu") == 2000
    assert it.requirements.labels()[wk.LABEL_ARCH] == "arm64"
    annotated = parse(md({**SHAPE}))
    assert not needs_template(annotated)
    with pytest.raises(MachineDeploymentError, match=r"status\.capacity\.cpu"):
        instance_type(found, pricing=PRICING, default_zone="d")
