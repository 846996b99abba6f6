"""The committed CRDs and API reference are exactly what the models generate.

A change to a model without regenerating deploy/crds would ship a schema that disagrees with
the codec; this test makes that impossible to merge.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy.apis.crds import all_crds, main, render_crd, rendered_files, stale_files
from karpy.apis.v1 import labels
from karpy.apis.v1.common import allowed_restricted_keys
from karpy_aws.apis import labels as awslabels


def test_committed_files_match_the_generator() -> None:
    stale = stale_files()
    assert stale == [], f"regenerate with `python -m karpy.apis.crds`: {stale}"
    assert main(["--check"]) == 0


def test_generated_yaml_parses_back_to_the_rendered_crd() -> None:
    files = {path.name: text for path, text in rendered_files().items()}
    for crd in all_crds():
        assert yaml.safe_load(files[crd.file_name]) == render_crd(crd)


def _schema(kind: str) -> dict[str, Any]:
    crd = next(c for c in all_crds() if kind == c.model.KIND)
    schema: dict[str, Any] = render_crd(crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _rules(node: Any) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    if isinstance(node, dict):
        found += node.get("x-kubernetes-validations", [])
        for v in node.values():
            found += _rules(v)
    elif isinstance(node, list):
        for v in node:
            found += _rules(v)
    return found


def test_nodepool_defaults_match_karpenter() -> None:
    spec = _schema("NodePool")["properties"]["spec"]["properties"]
    disruption = spec["disruption"]
    assert disruption["properties"]["budgets"]["default"] == [{"nodes": "10%"}]
    assert disruption["properties"]["consolidationPolicy"]["default"] == "WhenEmptyOrUnderutilized"
    assert disruption["properties"]["consolidateAfter"]["default"] == "0s"
    template_spec = spec["template"]["properties"]["spec"]
    assert template_spec["properties"]["expireAfter"]["default"] == "720h"
    assert template_spec["required"] == ["nodeClassRef", "requirements"]
    assert spec["weight"]["minimum"] == 1
    assert spec["weight"]["maximum"] == 100


def test_every_rule_has_a_message_and_no_rule_repeats_within_a_node() -> None:
    for crd in all_crds():
        for rule in _rules(render_crd(crd)):
            assert rule["message"]
            assert rule["rule"]


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("NodePool", "'schedule' must be set with 'duration'"),
        ("NodePool", "nodeClassRef.group is immutable"),
        ("NodePool", "nodeClassRef.kind is immutable"),
        ("NodePool", 'label domain "karpenter.sh" is restricted'),
        ("NodePool", 'label "karpenter.sh/nodepool" is restricted'),
        ("NodeClaim", "spec is immutable"),
        ("EC2NodeClass", "must specify exactly one of ['role', 'instanceProfile']"),
        ("EC2NodeClass", "must have only one blockDeviceMappings with rootVolume"),
    ],
)
def test_karpenters_rules_are_present(kind: str, message: str) -> None:
    assert message in {r["message"] for r in _rules(_schema(kind))}


def test_ami_selector_terms_are_validated_by_the_schema() -> None:
    """The AMI term rules are declared once, on the model; the apiserver enforces them (the AWS
    provider checks only what a schema cannot: an owner alone, an alias family it knows)."""
    spec = _schema("EC2NodeClass")["properties"]["spec"]["properties"]
    terms = spec["amiSelectorTerms"]
    assert (terms["minItems"], terms["maxItems"]) == (1, 30)
    messages = {r["message"] for r in _rules(terms)}
    assert "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']" in (
        messages
    )
    for exclusive in ("alias", "id", "ssmParameter"):
        assert any(m.startswith(f"'{exclusive}' is mutually exclusive") for m in messages)


def test_subresources_columns_and_names() -> None:
    by_kind = {c.model.KIND: render_crd(c) for c in all_crds()}
    pool = by_kind["NodePool"]["spec"]
    assert pool["versions"][0]["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    columns = [
        c["name"] for c in pool["versions"][0]["additionalPrinterColumns"] if "priority" not in c
    ]
    assert columns == ["NodeClass", "Nodes", "Ready", "Age"]
    claim = by_kind["NodeClaim"]["spec"]["versions"][0]
    columns = [c["name"] for c in claim["additionalPrinterColumns"] if "priority" not in c]
    assert columns == ["Type", "Capacity", "Zone", "Node", "Ready", "Age"]
    assert by_kind["EC2NodeClass"]["spec"]["names"]["shortNames"] == ["ec2nc", "ec2ncs"]
    for kind, crd in by_kind.items():
        # CapacityBuffer is namespaced, as Cluster Autoscaler serves it.
        assert crd["spec"]["scope"] == ("Namespaced" if kind == "CapacityBuffer" else "Cluster")
        assert crd["spec"]["versions"][0]["subresources"]["status"] == {}
    buffer = by_kind["CapacityBuffer"]["spec"]
    assert buffer["group"] == "autoscaling.x-k8s.io"
    assert buffer["names"]["shortNames"] == ["cb"]
    assert "categories" not in buffer["names"]


def test_well_known_labels_stay_allowed_in_requirements() -> None:
    assert labels.LABEL_INSTANCE_TYPE in allowed_restricted_keys()
    assert awslabels.LABEL_AWS_INSTANCE_FAMILY in allowed_restricted_keys()
    assert labels.LABEL_HOSTNAME not in allowed_restricted_keys()


def test_every_documented_field_has_a_description() -> None:
    from karpy.apis.docs import _walk
    from karpy.apis.registry import crd_kinds

    undocumented = [
        f"{cls.KIND}.{path}"
        for cls in crd_kinds()
        for path, _, _, description, _ in _walk(cls, "")
        if not description or description.startswith("Required")
    ]
    assert undocumented == []
