"""Karpenter v1 manifests against the real apiserver with karpy's CRDs installed.

Valid manifests (Karpenter's documented examples and v1 versions of the seed walkthroughs) must
be stored unchanged and decode into karpy's models; every invalid one in the corpus must be
refused at the door with a cause that names the offending field.
"""

from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.apis.autoscaling.capacitybuffer import CapacityBuffer
from karpy.apis.codec import to_dict
from karpy.apis.registry import decode_object, registry
from tests.cluster.apis.support import is_subset

CORPUS = Path(__file__).parent / "corpus"
BASES: dict[str, dict[str, Any]] = yaml.safe_load((CORPUS / "bases.yaml").read_text())


def _load_invalid() -> list[Any]:
    cases = []
    for path in sorted((CORPUS / "invalid").glob("*.yaml")):
        for case in yaml.safe_load(path.read_text()):
            cases.append(pytest.param(case, id=f"{path.stem}-{case['name']}"))
    return cases


def _load_valid() -> list[Any]:
    docs = []
    for path in sorted((CORPUS / "valid").glob("*.yaml")):
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
            docs.append(pytest.param(doc, id=f"{path.stem}-{i}-{doc['kind']}"))
    return docs


INVALID = _load_invalid()
VALID = _load_valid()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class Resources:
    """Create/patch/get for the karpy kinds through kubernetes_asyncio's generic client
    (CapacityBuffers, namespaced, in the default namespace)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = client.CustomObjectsApi(api)

    @staticmethod
    def _where(obj: dict[str, Any]) -> tuple[str, str, str, str | None]:
        cls = registry()[(obj["apiVersion"], obj["kind"])]
        namespace = "default" if cls is CapacityBuffer else None
        return cls.GROUP, cls.VERSION, cls.PLURAL, namespace

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        group, version, plural, namespace = self._where(obj)
        created: dict[str, Any] = await (
            self._api.create_namespaced_custom_object(group, version, namespace, plural, obj)
            if namespace is not None
            else self._api.create_cluster_custom_object(group, version, plural, obj)
        )
        return created

    async def patch(self, obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        group, version, plural, namespace = self._where(obj)
        name = obj["metadata"]["name"]
        # kubernetes_asyncio sends JSON-Patch unless told otherwise (the stubs omit the option).
        options: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
        patched: dict[str, Any] = await (
            self._api.patch_namespaced_custom_object(
                group, version, namespace, plural, name, patch, **options
            )
            if namespace is not None
            else self._api.patch_cluster_custom_object(
                group, version, plural, name, patch, **options
            )
        )
        return patched

    async def get(self, obj: dict[str, Any]) -> dict[str, Any]:
        group, version, plural, namespace = self._where(obj)
        name = obj["metadata"]["name"]
        got: dict[str, Any] = await (
            self._api.get_namespaced_custom_object(group, version, namespace, plural, name)
            if namespace is not None
            else self._api.get_cluster_custom_object(group, version, plural, name)
        )
        return got


@pytest.fixture
def resources(api_client: client.ApiClient, karpy_crds: list[str]) -> Resources:
    return Resources(api_client)


def _invalid_object(case: dict[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = merge_patch(copy.deepcopy(BASES[case["base"]]), case.get("patch", {}))
    if "generate_requirements" in case:
        obj["spec"]["template"]["spec"]["requirements"] = [
            {"key": f"example.com/key-{i}", "operator": "Exists"}
            for i in range(case["generate_requirements"])
        ]
    slug = case["name"][:40].strip("-")
    obj["metadata"] = {"name": f"{slug}-{secrets.token_hex(3)}"}
    return obj


def _causes(error: ApiException) -> list[dict[str, str]]:
    status = json.loads(error.body or b"{}")
    causes: list[dict[str, str]] = status.get("details", {}).get("causes", [])
    return causes


@pytest.mark.parametrize("case", INVALID)
async def test_invalid_objects_are_refused_naming_the_field(
    resources: Resources, case: dict[str, Any]
) -> None:
    obj = _invalid_object(case)
    if "update" in case:
        await resources.create(obj)
    with pytest.raises(ApiException) as refused:
        await (resources.patch(obj, case["update"]) if "update" in case else resources.create(obj))
    assert refused.value.status == 422, refused.value.body
    causes = _causes(refused.value)
    matching = [
        c
        for c in causes
        if c.get("field") == case["field"]
        and case["message"] in c["message"]
        and c.get("reason") == case.get("reason", c.get("reason"))
    ]
    assert matching, (
        f"expected {case['field']}: {case['message']!r} {case.get('reason')}; got {causes}"
    )
    assert case["field"] in json.loads(refused.value.body or b"{}")["message"]


_QUANTITY_MAPS = frozenset({"limits", "requests", "kubeReserved", "systemReserved"})


def _quantities_as_strings(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        if key in _QUANTITY_MAPS:
            return {k: str(v) for k, v in value.items()}
        return {k: _quantities_as_strings(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_quantities_as_strings(v, key) for v in value]
    return value


@pytest.mark.parametrize("manifest", VALID)
async def test_valid_manifests_are_stored_unchanged_and_decode(
    resources: Resources, manifest: dict[str, Any]
) -> None:
    await resources.create(manifest)
    stored = await resources.get(manifest)
    assert is_subset(manifest.get("spec", {}), stored.get("spec", {}))
    assert is_subset(manifest["metadata"].get("labels", {}), stored["metadata"].get("labels", {}))
    model = decode_object(stored)
    encoded = to_dict(model)
    # Everything the server holds survives a decode/encode through karpy's models (numbers
    # written as quantities come back as strings, which is the same quantity).
    assert encoded.get("spec", {}) == _quantities_as_strings(stored.get("spec", {}))
    assert encoded.get("status", {}) == stored.get("status", {})
    assert decode_object(encoded) == model


async def test_defaults_fill_in_what_a_minimal_nodepool_omits(resources: Resources) -> None:
    pool = merge_patch(BASES["nodepool"], {"metadata": {"name": f"minimal-{secrets.token_hex(3)}"}})
    stored = await resources.create(pool)
    assert stored["spec"]["disruption"] == {
        "budgets": [{"nodes": "10%"}],
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
    }
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_corpus_is_large_enough() -> None:
    assert len(INVALID) >= 30
    assert len(VALID) >= 10


async def test_a_static_nodepool_scales_through_the_scale_subresource(
    resources: Resources, api_client: client.ApiClient
) -> None:
    """`kubectl scale nodepool --replicas` writes spec.replicas (specReplicasPath) and reads
    status.nodes (statusReplicasPath), as Karpenter's CRD declares; a dynamic pool cannot be
    made static that way either."""
    name = f"static-{secrets.token_hex(3)}"
    pool = merge_patch(copy.deepcopy(BASES["nodepool"]), {"metadata": {"name": name}})
    static = merge_patch(pool, {"spec": {"replicas": 3}})
    await resources.create(static)
    custom = client.CustomObjectsApi(api_client)
    options: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
    scaled = await custom.patch_cluster_custom_object_scale(
        "karpenter.sh", "v1", "nodepools", name, {"spec": {"replicas": 1}}, **options
    )
    assert scaled["kind"] == "Scale"
    assert scaled["spec"]["replicas"] == 1
    assert (await resources.get(static))["spec"]["replicas"] == 1
    dynamic = merge_patch(pool, {"metadata": {"name": f"dynamic-{secrets.token_hex(3)}"}})
    await resources.create(dynamic)
    with pytest.raises(ApiException) as refused:
        await custom.patch_cluster_custom_object_scale(
            "karpenter.sh",
            "v1",
            "nodepools",
            dynamic["metadata"]["name"],
            {"spec": {"replicas": 5}},
            **options,
        )
    assert "Cannot transition NodePool between static and dynamic" in str(refused.value.body)
    assert "replicas" not in (await resources.get(dynamic))["spec"]
