"""The one place where karpy's attrs models meet JSON: cattrs for shape, orjson for bytes.

Modelled on cattrs' preconf modules: `configure_converter(conv)` applies the wire rules to any
converter and `make_converter()` builds a fresh, configured one. The rules:

* Attribute names are snake_case in Python and lowerCamelCase on the wire; a field declared
  with `field(wire=...)` overrides the spelling (`providerID`, `kmsKeyID`, `clusterDNS`).
* On output, attributes that are None are omitted, and so are empty lists, maps and nested
  objects whose default is empty too (Go's `omitempty`): an unset optional field is absent
  rather than `null`, and decoding the absent field gives the same value back. An empty
  value whose default is not empty (`budgets: []`) is written out. A merge patch
  that must clear a list (finalizers) has to say so explicitly with `[]`; build such patches
  by hand.
* Times are RFC 3339 in UTC with a `Z` suffix, seconds precision unless the value has
  microseconds (then six fractional digits, as MicroTime). Naive datetimes are refused.
* `Quantity` stays the exact string the user wrote; JSON numbers (`cpu: 1`) become strings.
* `IntOrString` accepts an int or a string and writes it back unchanged.
* Sequences decode to tuples (the models are frozen); maps decode to dicts.
* Unknown fields are ignored on input: core kinds carry far more than karpy reads, and the
  apiserver already prunes unknown fields of karpy's CRDs (`unknown_fields` lists them, for
  input a person wrote). Missing required fields and values of the wrong type raise
  `DecodeError`, naming the kind and the wire path of the field.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from karpy.apis.meta import IntOrString, Quantity
from karpy.apis.schema import wire_name

T = TypeVar("T")


class DecodeError(ValueError):
    """Input that does not fit a model; `problems` lists each bad field with its wire path."""

    def __init__(self, kind: str, problems: list[str]) -> None:
        self.kind = kind
        self.problems = problems
        super().__init__(f"invalid {kind}: " + "; ".join(problems))


# ---------------------------------------------------------------------------- scalar hooks


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a Z suffix (fraction only when there are microseconds)."""
    if value.tzinfo is None:
        msg = f"naive datetime {value!r} has no timezone; karpy writes only UTC times"
        raise ValueError(msg)
    utc = value.astimezone(UTC)
    spec = "microseconds" if utc.microsecond else "seconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def parse_time(value: object, _: object = None) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        parsed = datetime.fromisoformat(value)
    else:
        msg = f"expected an RFC 3339 time string, got {type(value).__name__}"
        raise TypeError(msg)
    if parsed.tzinfo is None:
        msg = f"time {value!r} has no timezone offset"
        raise ValueError(msg)
    return parsed.astimezone(UTC)


def _quantity(value: object, _: object = None) -> Quantity:
    if isinstance(value, bool):
        msg = "expected a quantity such as 500m or 4Gi, got a boolean"
        raise TypeError(msg)
    if isinstance(value, str | int | float):
        return Quantity(str(value))
    msg = f"expected a quantity such as 500m or 4Gi, got {type(value).__name__}"
    raise TypeError(msg)


def _int_or_string(value: object, _: object = None) -> IntOrString:
    if isinstance(value, int | str) and not isinstance(value, bool):
        return value
    msg = f"expected an integer or a string, got {type(value).__name__}"
    raise TypeError(msg)


def _optional_int_or_string(value: object, _: object = None) -> IntOrString | None:
    return None if value is None else _int_or_string(value)


def _str(value: object, _: object = None) -> str:
    if isinstance(value, str):
        return value
    msg = f"expected a string, got {type(value).__name__}"
    raise TypeError(msg)


def _int(value: object, _: object = None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    msg = f"expected an integer, got {type(value).__name__}"
    raise TypeError(msg)


def _bool(value: object, _: object = None) -> bool:
    if isinstance(value, bool):
        return value
    msg = f"expected a boolean, got {type(value).__name__}"
    raise TypeError(msg)


# ---------------------------------------------------------------------------- enums


def _enum_member(value: object, cls: type[enum.Enum]) -> enum.Enum:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in cls)
        msg = f"{value!r} is not one of {allowed}"
        raise ValueError(msg) from None


def _enum_value(value: enum.Enum) -> Any:
    return value.value


# ---------------------------------------------------------------------------- attrs classes


def _is_collection(tp: Any) -> bool:
    tp = _strip_optional(tp)
    origin = typing.get_origin(tp)
    return origin is tuple or (origin is not None and issubclass(origin, Mapping))


def _strip_optional(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else tp
    return tp


def _default_encodes_empty(conv: cattrs.Converter, a: attrs.Attribute[Any]) -> bool:
    """Whether an empty value of this field may be omitted: only when decoding the absent
    field gives an empty value back (its default encodes to `{}` or `[]`)."""
    default: Any = a.default
    if default is attrs.NOTHING or default is None:
        return False
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]  # typed as a function
        default = default.factory()
    if not (attrs.has(type(default)) or _is_collection(a.type)):
        return False
    return conv.unstructure(default) in ({}, [])


def _omitting(
    fn: Callable[[Any], dict[str, Any]], omit_empty: frozenset[str]
) -> Callable[[Any], dict[str, Any]]:
    """Drop None everywhere, and `{}`/`[]` for the fields in `omit_empty` (Go's omitempty).

    An empty value is kept when its default is not empty: `Affinity()` is not the same as no
    affinity, and `budgets: []` is not the same as the default `[{nodes: 10%}]`.
    """

    def unstructure(obj: Any) -> dict[str, Any]:
        return {
            k: v for k, v in fn(obj).items() if v is not None and not (k in omit_empty and not v)
        }

    return unstructure


def configure_converter(conv: cattrs.Converter) -> None:
    """Apply karpy's wire rules (see the module docstring) to `conv`."""
    conv.register_unstructure_hook(datetime, format_time)
    conv.register_structure_hook(datetime, parse_time)
    conv.register_structure_hook(Quantity, _quantity)
    conv.register_structure_hook(IntOrString, _int_or_string)
    conv.register_structure_hook(IntOrString | None, _optional_int_or_string)
    conv.register_unstructure_hook(IntOrString, lambda v: v)
    # cattrs would coerce 1 -> "1" or "yes" -> True; the wire is typed, so refuse instead.
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(bool, _bool)
    # Enum members leave as their plain values, so to_dict() output is builtins only.
    conv.register_unstructure_hook(enum.StrEnum, _enum_value)
    conv.register_structure_hook(enum.StrEnum, _enum_member)
    conv.register_structure_hook(enum.Enum, _enum_member)
    conv.register_unstructure_hook(enum.Enum, _enum_value)

    def structure_factory(cl: type[Any]) -> Callable[[Any, Any], Any]:
        renames: dict[str, Any] = {a.name: override(rename=wire_name(a)) for a in attrs.fields(cl)}
        return make_dict_structure_fn(cl, conv, _cattrs_forbid_extra_keys=False, **renames)

    def unstructure_factory(cl: type[Any]) -> Callable[[Any], dict[str, Any]]:
        attrs.resolve_types(cl)
        renames: dict[str, Any] = {a.name: override(rename=wire_name(a)) for a in attrs.fields(cl)}
        omit_empty = frozenset(
            wire_name(a) for a in attrs.fields(cl) if _default_encodes_empty(conv, a)
        )
        return _omitting(make_dict_unstructure_fn(cl, conv, **renames), omit_empty)

    conv.register_structure_hook_factory(attrs.has, structure_factory)
    conv.register_unstructure_hook_factory(attrs.has, unstructure_factory)


def make_converter(*, detailed_validation: bool = True) -> cattrs.Converter:
    """A fresh converter with karpy's wire rules.

    `detailed_validation` makes failures name every bad field (slower: cattrs tracks paths).
    """
    conv = cattrs.Converter(detailed_validation=detailed_validation)
    configure_converter(conv)
    return conv


CONVERTER = make_converter()
# Decoding is on the hot path (every watched pod); well-formed input takes this converter,
# about 1.7x faster, and only input that fails is decoded again by CONVERTER for the error.
_FAST_CONVERTER = make_converter(detailed_validation=False)


# ---------------------------------------------------------------------------- helpers


def _wire_path(path: str) -> str:
    """cattrs paths name Python attributes; users know the wire names."""
    names = _wire_names()
    out = []
    for part in path.split("."):
        base, sep, index = part.partition("[")
        out.append(names.get(base, base) + sep + index)
    return ".".join(out)


_WIRE_NAMES: dict[str, str] = {}


def _wire_names() -> Mapping[str, str]:
    if not _WIRE_NAMES:
        from karpy.apis.registry import all_models  # imported late: registry imports this module

        for cls in all_models():
            for a in attrs.fields(cls):
                _WIRE_NAMES[a.name] = wire_name(a)
    return _WIRE_NAMES


def from_dict(cls: type[T], data: Any) -> T:
    """Structure a JSON-like value into `cls`, raising DecodeError that names the field."""
    kind = getattr(cls, "KIND", cls.__name__)
    if not isinstance(data, Mapping):
        raise DecodeError(kind, [f"expected an object, got {type(data).__name__}"])
    try:
        return _FAST_CONVERTER.structure(data, cls)
    except Exception:  # any failure is decoded again, slowly, to name the bad fields
        return _decode_reporting_fields(cls, kind, data)


def _decode_reporting_fields(cls: type[T], kind: str, data: Mapping[str, Any]) -> T:
    try:
        return CONVERTER.structure(data, cls)
    except cattrs.BaseValidationError as exc:
        problems = [
            msg.rsplit(" @ ", 1)[0] + " @ " + _wire_path(msg.rsplit(" @ ", 1)[1])
            if " @ " in msg
            else msg
            for msg in cattrs.transform_error(exc, path="$")
        ]
        raise DecodeError(kind, problems) from exc


def decode(cls: type[T], data: bytes | str | Mapping[str, Any]) -> T:
    """Decode JSON bytes/str or an already-parsed dict into `cls`."""
    parsed = orjson.loads(data) if isinstance(data, bytes | str) else data
    return from_dict(cls, parsed)


def unknown_fields(cls: type[Any], data: Any) -> list[str]:
    """Wire paths (`$.spec.affinity.nodeAffinty`) of the keys in `data` that `cls` does not
    declare, at any depth.

    Decoding ignores unknown fields (see the module docstring), which is right for what the
    apiserver sends; input a person writes (simulation scenarios) checks this too, so a typo
    is reported instead of silently dropped.
    """
    found: list[str] = []
    _collect_unknown(cls, data, "$", found)
    return found


def _collect_unknown(tp: Any, data: Any, path: str, found: list[str]) -> None:
    tp = _strip_optional(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if attrs.has(tp) and isinstance(data, Mapping):
        declared = {wire_name(a): a for a in attrs.fields(attrs.resolve_types(tp))}
        for key, value in data.items():
            attribute = declared.get(key)
            if attribute is None:
                found.append(f"{path}.{key}")
            else:
                _collect_unknown(attribute.type, value, f"{path}.{key}", found)
    elif origin is tuple and args and isinstance(data, list):
        for i, item in enumerate(data):
            _collect_unknown(args[0], item, f"{path}[{i}]", found)
    elif (
        origin is not None
        and issubclass(origin, Mapping)
        and len(args) == 2
        and isinstance(data, Mapping)
    ):
        for key, value in data.items():
            _collect_unknown(args[1], value, f"{path}.{key}", found)


def to_dict(obj: object) -> dict[str, Any]:
    """Unstructure a model into JSON-ready builtins (wire names, None omitted)."""
    out = CONVERTER.unstructure(obj)
    if not isinstance(out, dict):
        msg = f"{type(obj).__name__} is not an API object"
        raise TypeError(msg)
    return out


def encode(obj: object) -> bytes:
    """Encode a model as JSON bytes."""
    return orjson.dumps(to_dict(obj))
