"""OpenAPI v3 structural schemas derived from the attrs models.

The apiserver validates and defaults custom objects from the CRD's structural schema. Deriving
that schema from the same classes the codec decodes (types, wire names, defaults, constraints
and CEL rules from `karpy.apis.schema`) means a manifest the apiserver accepts always decodes,
and a default the apiserver fills in is the default the Python model has.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, NewType, Union, get_args, get_origin

import attrs

from karpy.apis.codec import CONVERTER
from karpy.apis.meta import QUANTITY_PATTERN, IntOrString, Quantity
from karpy.apis.schema import Constraints, FieldInfo, info, wire_name

Schema = dict[str, Any]

# Fields every top-level kind has; the apiserver owns their schema.
TOP_LEVEL = ("api_version", "kind", "metadata")


def _strip_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def type_schema(tp: Any, constraints: Constraints | None = None) -> Schema:
    """The schema of one Python type, with `constraints` merged in."""
    c = constraints or Constraints()
    tp = _strip_optional(tp)
    origin = get_origin(tp)
    out: Schema
    if tp is Quantity:
        out = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    elif tp == IntOrString:
        out = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    elif isinstance(tp, NewType):
        return type_schema(tp.__supertype__, c)
    elif tp is bool:
        out = {"type": "boolean"}
    elif tp is int:
        out = {"type": "integer"}
    elif tp is float:
        out = {"type": "number"}
    elif tp is str:
        out = {"type": "string"}
    elif tp is datetime:
        out = {"type": "string", "format": "date-time"}
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        out = {"type": "string", "enum": [m.value for m in tp]}
    elif origin is tuple:
        out = {"type": "array", "items": type_schema(get_args(tp)[0], c.items)}
    elif origin is not None and issubclass(origin, Mapping):
        out = {"type": "object", "additionalProperties": type_schema(get_args(tp)[1], c.values)}
    elif isinstance(tp, type) and attrs.has(tp):
        out = object_schema(tp)
    else:
        msg = f"no OpenAPI mapping for type {tp!r}"
        raise TypeError(msg)
    extra = c.to_openapi()
    if "x-kubernetes-validations" in out and "x-kubernetes-validations" in extra:
        extra["x-kubernetes-validations"] = (
            out["x-kubernetes-validations"] + extra["x-kubernetes-validations"]
        )
    out.update(extra)
    return out


def default_of(a: attrs.Attribute[Any]) -> Any:
    """The attribute's default as wire data, or None when it has none worth publishing."""
    d: Any = a.default
    if d is attrs.NOTHING:
        return None
    if isinstance(d, attrs.Factory):  # type: ignore[arg-type]  # attrs types Factory as a function
        d = d.factory()
    if d is None:
        return None
    wire = CONVERTER.unstructure(d)
    if wire in ([], {}, ()):
        return None
    return wire


def is_required(a: attrs.Attribute[Any], meta: FieldInfo) -> bool:
    if meta.required is not None:
        return meta.required
    return a.default is attrs.NOTHING


def fields_of(cls: type[Any]) -> Iterator[attrs.Attribute[Any]]:
    attrs.resolve_types(cls)
    yield from attrs.fields(cls)


def field_schema(a: attrs.Attribute[Any]) -> Schema:
    meta = info(a)
    schema = type_schema(a.type, meta.constraints)
    if meta.doc:
        schema = {"description": meta.doc, **schema}
    if meta.crd_default:
        default = default_of(a)
        if default is not None:
            schema["default"] = default
    return schema


def object_schema(cls: type[Any], *, top_level: bool = False) -> Schema:
    """The schema of an attrs class: properties, required list and class-level CEL rules."""
    props: Schema = {}
    required: list[str] = []
    for a in fields_of(cls):
        name = wire_name(a)
        if top_level and a.name in TOP_LEVEL:
            props[name] = {"type": "object"} if a.name == "metadata" else {"type": "string"}
            continue
        props[name] = field_schema(a)
        if is_required(a, info(a)):
            required.append(name)
    out: Schema = {"type": "object"}
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    if doc:
        out["description"] = doc
    out["properties"] = dict(sorted(props.items()))
    if required:
        out["required"] = sorted(required)
    rules = getattr(cls, "__rules__", ())
    if rules:
        out["x-kubernetes-validations"] = [r.to_openapi() for r in rules]
    return out
