"""Round-trip properties: every model survives encode -> decode unchanged.

The codec is the only door between karpy and the wire, so a value that changes on the way
through would silently corrupt what karpy writes back to the apiserver.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.apis.codec import decode, encode, to_dict
from karpy.apis.crds import all_crds, render_crd
from karpy.apis.registry import all_models, registry
from tests.unit.apis.strategies import models

ALL_MODELS = sorted(all_models(), key=lambda c: f"{c.__module__}.{c.__qualname__}")
KINDS = sorted(registry().values(), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _no_nulls(value: Any) -> bool:
    if isinstance(value, dict):
        return all(v is not None and _no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(v is not None and _no_nulls(v) for v in value)
    return True


@pytest.mark.parametrize("cls", ALL_MODELS, ids=lambda c: c.__qualname__)
@settings(max_examples=10)
@given(data=st.data())
def test_every_model_round_trips(cls: type[Any], data: st.DataObject) -> None:
    obj = data.draw(models(cls))
    wire = encode(obj)
    assert decode(cls, wire) == obj
    assert _no_nulls(orjson.loads(wire))


@pytest.mark.parametrize("cls", KINDS, ids=lambda c: c.__qualname__)
@settings(max_examples=10)
@given(data=st.data())
def test_top_level_kinds_carry_api_version_and_kind(cls: type[Any], data: st.DataObject) -> None:
    out = to_dict(data.draw(models(cls)))
    assert isinstance(out["apiVersion"], str)
    assert isinstance(out["kind"], str)


def test_registry_maps_each_kind_to_its_default_api_version_and_kind() -> None:
    for (api_version, kind), cls in registry().items():
        fields = attrs.fields_dict(cls)
        assert fields["api_version"].default == api_version
        assert fields["kind"].default == kind == cls.KIND


def _undeclared_keys(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Keys in `value` that the OpenAPI `schema` would prune (not declared anywhere)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        missing = []
        for key, item in value.items():
            if props is not None and key in props:
                missing += _undeclared_keys(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                missing += _undeclared_keys(item, extra, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                missing.append(f"{path}.{key}")
        return missing
    if isinstance(value, list):
        return [m for item in value for m in _undeclared_keys(item, schema.get("items", {}), path)]
    return []


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c.model.KIND)
@settings(max_examples=10)
@given(data=st.data())
def test_every_encoded_field_is_declared_in_the_crd_schema(crd: Any, data: st.DataObject) -> None:
    schema = render_crd(crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    encoded = to_dict(data.draw(models(crd.model)))
    encoded.pop("metadata", None)
    assert _undeclared_keys(encoded, schema, "$") == []
