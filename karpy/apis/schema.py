"""Field metadata that lets one attrs model drive the codec, the CRD schema and the docs.

Karpenter's Go types carry kubebuilder markers (defaults, patterns, CEL rules) next to each
field, and its CRDs are generated from them. karpy does the same: every API attribute is
declared with `field()`, whose metadata holds the wire name, the description and the OpenAPI
constraints; class-level CEL rules sit in a `__rules__` class variable. The codec reads only
the wire name; `karpy.apis.crds` reads the rest. Keeping both in one declaration means the
apiserver validates exactly the shape the Python models decode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import attrs

META_KEY: Final = "karpy"

ListType = Literal["atomic", "set", "map"]


@attrs.frozen(kw_only=True)
class Rule:
    """One CEL `x-kubernetes-validations` entry, as the apiserver evaluates it."""

    rule: str
    message: str
    field_path: str | None = None
    reason: str | None = None

    def to_openapi(self) -> dict[str, str]:
        out = {"message": self.message, "rule": self.rule}
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@attrs.frozen
class DeferredRules:
    """Rules built when a schema is rendered rather than when the model is defined: their text
    depends on what is installed (the label names providers declare, which karpy.apis finds
    through entry points whose modules import the very models being defined)."""

    build: Callable[[], tuple[Rule, ...]]


def expand_rules(rules: Iterable[Rule | DeferredRules]) -> tuple[Rule, ...]:
    """`rules` with every DeferredRules built, in order."""
    out: list[Rule] = []
    for rule in rules:
        out.extend(rule.build() if isinstance(rule, DeferredRules) else (rule,))
    return tuple(out)


@attrs.frozen(kw_only=True)
class Constraints:
    """OpenAPI v3 constraints for one value (a field, a list item or a map value)."""

    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    max_properties: int | None = None
    format: str | None = None
    rules: tuple[Rule | DeferredRules, ...] = ()
    list_type: ListType | None = None
    list_map_keys: tuple[str, ...] = ()
    items: Constraints | None = None
    values: Constraints | None = None
    preserve_unknown: bool = False

    def to_openapi(self) -> dict[str, Any]:
        """The keys this adds to the generated type schema (items/values excluded)."""
        out: dict[str, Any] = {}
        simple = {
            "pattern": self.pattern,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "minLength": self.min_length,
            "maxLength": self.max_length,
            "minItems": self.min_items,
            "maxItems": self.max_items,
            "maxProperties": self.max_properties,
            "format": self.format,
        }
        out.update({k: v for k, v in simple.items() if v is not None})
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.list_type is not None:
            out["x-kubernetes-list-type"] = self.list_type
        if self.list_map_keys:
            out["x-kubernetes-list-map-keys"] = list(self.list_map_keys)
        if self.preserve_unknown:
            out["x-kubernetes-preserve-unknown-fields"] = True
        if self.rules:
            out["x-kubernetes-validations"] = [r.to_openapi() for r in expand_rules(self.rules)]
        return out


@attrs.frozen(kw_only=True)
class FieldInfo:
    """Everything karpy knows about one API attribute besides its Python type."""

    wire: str | None = None
    doc: str = ""
    required: bool | None = None
    crd_default: bool = True
    constraints: Constraints = Constraints()


def camel(name: str) -> str:
    """snake_case -> lowerCamelCase, the Kubernetes JSON convention."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def info(a: attrs.Attribute[Any]) -> FieldInfo:
    found = a.metadata.get(META_KEY)
    return found if isinstance(found, FieldInfo) else FieldInfo()


def wire_name(a: attrs.Attribute[Any]) -> str:
    return info(a).wire or camel(a.name)


def field(
    *,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    wire: str | None = None,
    doc: str = "",
    required: bool | None = None,
    crd_default: bool = True,
    items: Constraints | None = None,
    values: Constraints | None = None,
    rules: tuple[Rule | DeferredRules, ...] = (),
    **constraints: Any,
) -> Any:
    """An attrs field with API metadata.

    `required` overrides the schema's notion (a field is required when it has no default).
    `crd_default=False` keeps a Python default out of the CRD (for values the server must
    not invent, such as status fields). `**constraints` are `Constraints` attributes.
    """
    meta = FieldInfo(
        wire=wire,
        doc=doc,
        required=required,
        crd_default=crd_default,
        constraints=Constraints(items=items, values=values, rules=rules, **constraints),
    )
    if factory is not None:
        return attrs.field(factory=factory, metadata={META_KEY: meta})
    return attrs.field(default=default, metadata={META_KEY: meta})


def item(**constraints: Any) -> Constraints:
    """Constraints for list items or map values."""
    return Constraints(**constraints)
