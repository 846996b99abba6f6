"""ConversionReview answers (karpy.apis.conversion.review): what the apiserver gets back from
karpy's webhook, for success and for each way a conversion is refused."""

from __future__ import annotations

from typing import Any

from karpy.apis.conversion import review
from karpy.apis.crds import all_crds
from karpy.operator.conversion import conversion_kinds, node_class_defaults

CRDS = all_crds()
KINDS = conversion_kinds(CRDS)
DEFAULTS = node_class_defaults(CRDS, group="karpenter.k8s.aws", kind="EC2NodeClass")
METADATA = {"name": "default", "uid": "u-1", "resourceVersion": "7", "generation": 1}


def _pool(**template_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": METADATA,
        "spec": {
            "template": {
                "spec": {"requirements": [], "nodeClassRef": {"name": "default"}, **template_spec}
            },
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "24h"},
        },
    }


def _review(desired: str, *objects: dict[str, Any]) -> dict[str, Any]:
    request = {"uid": "r-1", "desiredAPIVersion": desired, "objects": list(objects)}
    return review(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request},
        kinds=KINDS,
        defaults=DEFAULTS,
    )


def test_a_v1beta1_nodepool_converts_to_v1_with_its_metadata_untouched() -> None:
    answer = _review("karpenter.sh/v1", _pool())
    response = answer["response"]
    assert answer["kind"] == "ConversionReview"
    assert response["uid"] == "r-1"
    assert response["result"] == {"status": "Success"}
    (converted,) = response["convertedObjects"]
    assert converted["apiVersion"] == "karpenter.sh/v1"
    assert converted["metadata"] == METADATA
    assert converted["spec"]["template"]["spec"]["expireAfter"] == "24h"
    assert converted["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    back = _review("karpenter.sh/v1beta1", converted)["response"]["convertedObjects"][0]
    assert back["spec"]["template"]["spec"]["nodeClassRef"] == {
        "name": "default",
        "kind": "EC2NodeClass",
        "apiVersion": "karpenter.k8s.aws/v1beta1",
    }


def test_a_refusal_names_the_object_and_the_field() -> None:
    response = _review("karpenter.sh/v1", _pool(kubelet={"maxPods": 10}))["response"]
    assert "convertedObjects" not in response
    assert response["result"]["status"] == "Failure"
    message = response["result"]["message"]
    assert message.startswith("karpenter.sh/v1beta1 NodePool 'default': ")
    assert "spec.template.spec.kubelet" in message


def test_an_undecodable_object_is_refused_naming_the_field() -> None:
    pool = _pool()
    pool["spec"]["weight"] = "heavy"
    message = _review("karpenter.sh/v1", pool)["response"]["result"]["message"]
    assert "weight" in message


def test_an_unknown_kind_or_version_is_refused() -> None:
    other = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert (
        "converts no example.com/v1 Widget"
        in (_review("example.com/v2", other)["response"]["result"]["message"])
    )
    message = _review("karpenter.sh/v1alpha9", _pool())["response"]["result"]["message"]
    assert "not served as karpenter.sh/v1alpha9" in message


def test_an_object_already_in_the_desired_version_is_returned_as_it_is() -> None:
    pool = _pool()
    assert _review("karpenter.sh/v1beta1", pool)["response"]["convertedObjects"] == [pool]
