"""The v1alpha5 admission rules, in Python, for input that never reaches an apiserver.

`karpy convert` runs offline, so it cannot lean on the CRD's patterns and CEL rules; these checks
refuse the same things (built from the same constants) with the apiserver's field paths, so a
manifest `convert` refuses is one `kubectl apply` refuses too, and the message names the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

from karpy.apis.kube.common import Taint
from karpy.apis.meta import LABEL_VALUE_PATTERN, QUALIFIED_NAME_PATTERN
from karpy.apis.v1 import labels
from karpy.apis.v1.common import (
    RequirementOperator,
    allowed_restricted_keys,
    restricted_label_domains,
)
from karpy.apis.v1alpha5.provisioner import LEGACY_OPERATORS, Provisioner, Requirement

_QUALIFIED = re.compile(QUALIFIED_NAME_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _in_domain(prefix: str, domain: str) -> bool:
    return prefix == domain or prefix.endswith("." + domain)


def label_key_problem(key: str) -> str | None:
    """Why `key` may not be a v1alpha5 label or requirement key (None when it may)."""
    if len(key) > 316 or not _QUALIFIED.match(key):
        return "must be a qualified name (optional DNS prefix and '/', then a name)"
    if key == labels.LABEL_HOSTNAME:
        return f'label "{labels.LABEL_HOSTNAME}" is restricted'
    if key == labels.LABEL_NODEPOOL:
        return f'label "{labels.LABEL_NODEPOOL}" is restricted'
    prefix = key.split("/")[0] if "/" in key else ""
    allowed = allowed_restricted_keys()
    for domain in sorted(restricted_label_domains()):
        if not _in_domain(prefix, domain) or key in allowed:
            continue
        if any(_in_domain(prefix, exc) for exc in labels.LABEL_DOMAIN_EXCEPTIONS):
            continue
        return f'label domain "{domain}" is restricted'
    return None


def _invalid(path: str, value: object, why: str) -> str:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return f"{path}: Invalid value: {shown}: {why}"


def _requirement(path: str, req: Requirement) -> Iterator[str]:
    problem = label_key_problem(req.key)
    if problem is not None:
        yield _invalid(f"{path}.key", req.key, problem)
    if req.operator not in LEGACY_OPERATORS:
        yield _invalid(f"{path}.operator", str(req.operator), "not supported by v1alpha5")
    if req.operator is RequirementOperator.IN and not req.values:
        yield f"{path}.values: Required value: operator 'In' needs at least one value"
    if req.operator in (RequirementOperator.GT, RequirementOperator.LT) and (
        len(req.values) != 1 or not req.values[0].isdigit()
    ):
        yield _invalid(f"{path}.values", list(req.values), "Gt and Lt take one integer")
    if (
        req.operator in (RequirementOperator.EXISTS, RequirementOperator.DOES_NOT_EXIST)
        and req.values
    ):
        yield _invalid(f"{path}.values", list(req.values), "Exists and DoesNotExist take none")
    for i, value in enumerate(req.values):
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            yield _invalid(f"{path}.values[{i}]", value, "must be a label value")


def labels_problems(path: str, found: Mapping[str, str]) -> list[str]:
    """Why each of `found` may not be a node label (keys and values), with its path."""
    return list(_labels(path, found))


def taints_problems(path: str, taints: Iterable[Taint]) -> list[str]:
    """Why `taints` are invalid (keys, duplicates), with their paths."""
    return list(_taints(path, taints))


def _labels(path: str, found: Mapping[str, str]) -> Iterator[str]:
    for key, value in found.items():
        problem = label_key_problem(key)
        if problem is not None:
            yield _invalid(f"{path}[{key!r}]", key, problem)
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            yield _invalid(f"{path}[{key!r}]", value, "must be a label value")


def _taints(path: str, taints: Iterable[Taint]) -> Iterator[str]:
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        if not _QUALIFIED.match(taint.key):
            yield _invalid(f"{path}[{i}].key", taint.key, "must be a qualified name")
        if (taint.key, str(taint.effect)) in seen:
            yield f"{path}[{i}]: Duplicate value: {taint.key}:{taint.effect}"
        seen.add((taint.key, str(taint.effect)))


def validate_provisioner(provisioner: Provisioner) -> list[str]:
    """Every problem the v1alpha5 schema (and Karpenter's old webhook) would refuse, each
    prefixed with its field path; empty when the Provisioner is valid."""
    problems: list[str] = []
    name = provisioner.metadata.name
    if not name:
        problems.append("metadata.name: Required value")
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        problems.append(_invalid("metadata.name", name, "must be a DNS subdomain"))
    spec = provisioner.spec
    for i, req in enumerate(spec.requirements):
        problems.extend(_requirement(f"spec.requirements[{i}]", req))
    problems.extend(_labels("spec.labels", spec.labels))
    problems.extend(_taints("spec.taints", spec.taints))
    problems.extend(_taints("spec.startupTaints", spec.startup_taints))
    if spec.weight is not None and not 1 <= spec.weight <= 100:
        problems.append(_invalid("spec.weight", spec.weight, "must be between 1 and 100"))
    for path, ttl in (
        ("spec.ttlSecondsAfterEmpty", spec.ttl_seconds_after_empty),
        ("spec.ttlSecondsUntilExpired", spec.ttl_seconds_until_expired),
    ):
        if ttl is not None and ttl < 0:
            problems.append(_invalid(path, ttl, "must be non-negative"))
    if (
        spec.ttl_seconds_after_empty is not None
        and spec.consolidation is not None
        and spec.consolidation.enabled
    ):
        problems.append(
            "spec: Invalid value: expected exactly one, got both: "
            "ttlSecondsAfterEmpty, consolidation.enabled"
        )
    if spec.provider is not None and spec.provider_ref is not None:
        problems.append(
            "spec: Invalid value: expected exactly one, got both: provider, providerRef"
        )
    return problems
