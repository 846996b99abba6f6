"""Pieces NodePool and NodeClaim share: requirements with minValues, the NodeClass reference
and the CEL rules that keep users out of label domains karpy owns.

A NodeClaim spec is a narrowed copy of its NodePool's template spec, so both must validate
requirements, taints and references identically; the rules are written once here.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable

import attrs

from karpy.apis.meta import LABEL_VALUE_PATTERN, QUALIFIED_NAME_PATTERN
from karpy.apis.schema import DeferredRules, Rule, field, item
from karpy.apis.v1 import labels

# ---------------------------------------------------------------------------- label rules

# The rules name the installed providers' label names too (`ProviderLabels`), which come with
# their CRD declarations through the ``karpy.apis`` entry point. Those modules import the models
# defined here, so the rules are built when a schema is rendered (`DeferredRules`), not at import.


def _provider_labels() -> tuple[labels.ProviderLabels, ...]:
    # Imported on use: the registry imports the models whose rules this module defines.
    from karpy.apis.registry import provider_labels

    return provider_labels()


def restricted_label_domains() -> frozenset[str]:
    """Label domains users may not set in a NodePool template: karpy's and every installed
    provider's."""
    return labels.RESTRICTED_LABEL_DOMAINS.union(*(p.domains for p in _provider_labels()))


def allowed_restricted_keys() -> frozenset[str]:
    """Keys in restricted domains that users may still name in requirements and labels: the
    well-known labels (karpy's and the providers'), the deprecated spellings karpy normalises,
    v1alpha5's provisioner name, and the keys providers allow in requirements."""
    own = (
        labels.WELL_KNOWN_LABELS
        | frozenset(labels.NORMALIZED_LABELS)
        | {labels.LABEL_PROVISIONER_NAME}
    )
    return own.union(*(p.well_known | p.requirement_keys for p in _provider_labels()))


def nodeclaim_allowed_keys() -> frozenset[str]:
    """The keys allowed in NodePool requirements, and what the provisioner injects into
    NodeClaims (the providers' NodeClass labels)."""
    return allowed_restricted_keys().union(*(p.nodeclaim_keys for p in _provider_labels()))


def _cel_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in sorted(values)) + "]"


def _in_domain(dom: str, domain: str) -> str:
    return f"({dom} == '{domain}' || {dom}.endsWith('.{domain}'))"


def _key_allowed_expr(var: str, domain: str, allowed: frozenset[str]) -> str:
    dom = f"({var}.contains('/') ? {var}.split('/')[0] : '')"
    exceptions = [d for d in sorted(labels.LABEL_DOMAIN_EXCEPTIONS) if d.endswith("." + domain)]
    listed = [k for k in allowed if _key_in_domain(k, domain)]
    permitted = [f"{var} in {_cel_list(listed)}"] if listed else []
    permitted += [_in_domain(dom, exc) for exc in exceptions]
    permitted.append(f"!{_in_domain(dom, domain)}")
    return " || ".join(permitted)


def _key_in_domain(key: str, domain: str) -> bool:
    prefix = key.split("/")[0] if "/" in key else ""
    return prefix == domain or prefix.endswith("." + domain)


def label_key_rules(
    *, allowed: Callable[[], frozenset[str]], over_map: bool, forbid_nodepool: bool
) -> tuple[DeferredRules]:
    """Rules refusing keys in restricted domains (karpy's own, the providers' and Kubernetes'),
    but for the keys `allowed` returns; built when the schema is rendered.

    `over_map` builds rules for a labels map (checked key by key) instead of a single key.
    `forbid_nodepool` also refuses karpenter.sh/nodepool, which karpy sets itself.
    """
    return (
        DeferredRules(
            functools.partial(
                _label_key_rules,
                allowed=allowed,
                over_map=over_map,
                forbid_nodepool=forbid_nodepool,
            )
        ),
    )


def _label_key_rules(
    *, allowed: Callable[[], frozenset[str]], over_map: bool, forbid_nodepool: bool
) -> tuple[Rule, ...]:
    keys = allowed()
    var = "k" if over_map else "self"

    def wrap(expr: str) -> str:
        return f"self.all(k, {expr})" if over_map else expr

    rules = [
        Rule(
            rule=wrap(_key_allowed_expr(var, domain, keys)),
            message=f'label domain "{domain}" is restricted',
        )
        for domain in sorted(restricted_label_domains())
    ]
    rules.append(
        Rule(
            rule=wrap(f"{var} != '{labels.LABEL_HOSTNAME}'"),
            message=f'label "{labels.LABEL_HOSTNAME}" is restricted',
        )
    )
    if forbid_nodepool:
        rules.append(
            Rule(
                rule=wrap(f"{var} != '{labels.LABEL_NODEPOOL}'"),
                message=f'label "{labels.LABEL_NODEPOOL}" is restricted',
            )
        )
    return tuple(rules)


# ---------------------------------------------------------------------------- requirements


class RequirementOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"
    GTE = "Gte"
    LTE = "Lte"


_NUMERIC = "['Gt', 'Lt', 'Gte', 'Lte']"

REQUIREMENT_RULES = (
    Rule(
        rule="self.operator == 'In' ? (has(self.values) && self.values.size() != 0) : true",
        message="requirements with operator 'In' must have a value defined",
        field_path=".values",
    ),
    Rule(
        rule=(
            f"self.operator in {_NUMERIC} ? "
            "(has(self.values) && self.values.size() == 1 && "
            "self.values[0].matches('^[0-9]+$')) : true"
        ),
        message=(
            "requirements with operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single "
            "non-negative integer value"
        ),
        field_path=".values",
    ),
    Rule(
        rule=(
            "self.operator in ['Exists', 'DoesNotExist'] ? "
            "(!has(self.values) || self.values.size() == 0) : true"
        ),
        message="requirements with operator 'Exists' or 'DoesNotExist' must not have values",
        field_path=".values",
    ),
    Rule(
        rule=(
            "(self.operator == 'In' && has(self.minValues)) ? "
            "(has(self.values) && self.values.size() >= self.minValues) : true"
        ),
        message=(
            "requirements with 'minValues' must have at least that many values specified in "
            "the 'values' field"
        ),
        field_path=".minValues",
    ),
)


def _requirement_key(*, allowed: Callable[[], frozenset[str]], forbid_nodepool: bool) -> str:
    result: str = field(
        doc="The label key the requirement constrains.",
        pattern=QUALIFIED_NAME_PATTERN,
        max_length=316,
        rules=label_key_rules(allowed=allowed, over_map=False, forbid_nodepool=forbid_nodepool),
    )
    return result


def _values() -> tuple[str, ...]:
    result: tuple[str, ...] = field(
        factory=tuple,
        doc="Values for In/NotIn; one non-negative integer for Gt/Lt/Gte/Lte.",
        crd_default=False,
        list_type="atomic",
        max_items=1000,
        items=item(max_length=63, pattern=LABEL_VALUE_PATTERN),
    )
    return result


def _min_values() -> int | None:
    result: int | None = field(
        default=None,
        doc=(
            "Minimum number of distinct values that must stay possible for this key "
            "(for example at least 10 instance types, for spot flexibility)."
        ),
        minimum=1,
        maximum=50,
    )
    return result


_OPERATOR_DOC = "In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte."


@attrs.frozen(kw_only=True)
class NodeSelectorRequirementWithMinValues:
    """A node selector requirement (NodePool template) with an optional minValues."""

    __rules__ = REQUIREMENT_RULES

    key: str = _requirement_key(allowed=allowed_restricted_keys, forbid_nodepool=True)
    operator: RequirementOperator = field(doc=_OPERATOR_DOC)
    values: tuple[str, ...] = _values()
    min_values: int | None = _min_values()


@attrs.frozen(kw_only=True)
class NodeClaimRequirement:
    """The same requirement on a NodeClaim, where karpenter.sh/nodepool is allowed."""

    __rules__ = REQUIREMENT_RULES

    key: str = _requirement_key(allowed=nodeclaim_allowed_keys, forbid_nodepool=False)
    operator: RequirementOperator = field(doc=_OPERATOR_DOC)
    values: tuple[str, ...] = _values()
    min_values: int | None = _min_values()


# ---------------------------------------------------------------------------- nodeClassRef


@attrs.frozen(kw_only=True)
class NodeClassReference:
    """Points at the provider NodeClass (EC2NodeClass, KWOKNodeClass, ...)."""

    group: str = field(
        doc="API group of the NodeClass, e.g. karpenter.k8s.aws.",
        pattern=r"^[^/]*$",
        max_length=253,
        rules=(Rule(rule="self != ''", message="group may not be empty"),),
    )
    kind: str = field(
        doc="Kind of the NodeClass, e.g. EC2NodeClass.",
        max_length=63,
        rules=(Rule(rule="self != ''", message="kind may not be empty"),),
    )
    name: str = field(
        doc="Name of the NodeClass.",
        max_length=253,
        rules=(Rule(rule="self != ''", message="name may not be empty"),),
    )


NODECLASSREF_IMMUTABLE_RULES = (
    Rule(
        rule="self.group == oldSelf.group",
        message="nodeClassRef.group is immutable",
        reason="FieldValueForbidden",
        field_path=".group",
    ),
    Rule(
        rule="self.kind == oldSelf.kind",
        message="nodeClassRef.kind is immutable",
        reason="FieldValueForbidden",
        field_path=".kind",
    ),
)

TEMPLATE_LABEL_RULES = (
    Rule(
        rule=f"self.all(k, k.matches(r'{QUALIFIED_NAME_PATTERN}'))",
        message="label keys must be qualified names (optional DNS prefix and '/', then a name)",
    ),
    *label_key_rules(allowed=allowed_restricted_keys, over_map=True, forbid_nodepool=True),
)
