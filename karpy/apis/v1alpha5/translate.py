"""Provisioner (v1alpha5) -> NodePool (v1), field by field, as Karpenter's v1 migration guide maps
them; a pure function shared by the legacy controller and `karpy convert`, so what `convert`
writes is exactly what the served Provisioner becomes.

The NodeClass half is the provider's: a `LegacyNodeClasses` (found through the ``karpy.legacy``
entry points) turns the inline provider, the providerRef's template, or nothing at all into the
nodeClassRef and the NodeClass objects the pool needs. A field with no v1 equivalent becomes a
`FieldWarning` naming it, or a `TranslationError` when carrying on would change what gets
launched; nothing is dropped in silence.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import metadata
from typing import Any, Final, Protocol

import attrs

from karpy.apis.duration import NEVER, format_duration
from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels
from karpy.apis.v1.common import (
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodepool import (
    ConsolidationPolicy,
    Disruption,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.apis.v1alpha5.provisioner import Provisioner

# What Karpenter v0.x's webhook filled in when a Provisioner left these keys unconstrained;
# v1 would allow every value, so they are written out to launch what v0.x launched.
V0_DEFAULT_REQUIREMENTS: Final = {
    labels.LABEL_CAPACITY_TYPE: labels.CAPACITY_TYPE_ON_DEMAND,
    labels.LABEL_ARCH: labels.ARCH_AMD64,
}


@attrs.frozen
class FieldWarning:
    """A legacy field karpy carries differently (or not at all), with the reason."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class TranslationError(ValueError):
    """A legacy object that cannot be carried into v1; `problems` each start with a field path."""

    def __init__(self, what: str, problems: list[str]) -> None:
        self.what = what
        self.problems = problems
        super().__init__(f"{what}: " + "; ".join(problems))


@attrs.frozen(kw_only=True)
class LegacySettings:
    """Operator settings Karpenter v0.x filled into provider fields left unset (its global
    settings: aws.clusterName, aws.defaultInstanceProfile)."""

    cluster_name: str
    default_instance_profile: str | None = None


@attrs.frozen(kw_only=True)
class NodeClassTranslation:
    """A provider's answer for one Provisioner: where its pool points, the NodeClasses that exist
    only for it (owned by the Provisioner), and the fields it could not carry."""

    ref: NodeClassReference
    node_classes: tuple[Any, ...] = ()
    warnings: tuple[FieldWarning, ...] = ()


@attrs.frozen(kw_only=True)
class TemplateTranslation:
    """A provider's NodeClass for one legacy node template (owned by the template)."""

    node_class: Any
    warnings: tuple[FieldWarning, ...] = ()


class LegacyNodeClasses(Protocol):
    """A provider's half of the translation (declared under the ``karpy.legacy`` entry points).

    ``template_models`` are its legacy node template kinds (AWSNodeTemplate); ``templates``
    maps their names to decoded objects. Both methods raise TranslationError for input the
    provider cannot carry, naming the field.
    """

    @property
    def template_models(self) -> tuple[type[Any], ...]: ...

    def for_provisioner(
        self, provisioner: Provisioner, templates: Mapping[str, Any], *, settings: LegacySettings
    ) -> NodeClassTranslation: ...

    def for_template(self, template: Any, *, settings: LegacySettings) -> TemplateTranslation: ...


@attrs.frozen(kw_only=True)
class Translation:
    """Everything one Provisioner becomes."""

    nodepool: NodePool
    node_classes: tuple[Any, ...]
    warnings: tuple[FieldWarning, ...]


def _seconds(value: int) -> str:
    return format_duration(float(value))


def _disruption(provisioner: Provisioner) -> tuple[Disruption, list[FieldWarning]]:
    spec = provisioner.spec
    if spec.consolidation is not None and spec.consolidation.enabled:
        # v1beta1's WhenUnderutilized consolidated after an implicit 0s wait.
        return (
            Disruption(
                consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
                consolidate_after="0s",
            ),
            [],
        )
    if spec.ttl_seconds_after_empty is not None:
        return (
            Disruption(
                consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
                consolidate_after=_seconds(spec.ttl_seconds_after_empty),
            ),
            [],
        )
    # Neither: v0.x never scaled such nodes down.
    return Disruption(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY, consolidate_after=NEVER
    ), []


def _expire_after(provisioner: Provisioner) -> tuple[str, list[FieldWarning]]:
    ttl = provisioner.spec.ttl_seconds_until_expired
    if ttl is None:
        return NEVER, []  # v0.x: nodes never expired (v1's default would be 720h)
    return _seconds(ttl), [
        FieldWarning(
            "spec.ttlSecondsUntilExpired",
            f"carried as template.spec.expireAfter: {_seconds(ttl)}; v1 expiry is forceful "
            "(not limited by disruption budgets) and waits for no replacement",
        )
    ]


def _warnings_of_spec(provisioner: Provisioner) -> list[FieldWarning]:
    spec = provisioner.spec
    found: list[FieldWarning] = []
    if spec.cluster is not None:
        found.append(
            FieldWarning(
                "spec.cluster",
                "not carried: karpy takes the cluster name and endpoint from its settings "
                "(CLUSTER_NAME, CLUSTER_ENDPOINT or the karpenter-global-settings ConfigMap)",
            )
        )
    if spec.consolidation is not None and spec.consolidation.enabled is False:
        found.append(
            FieldWarning(
                "spec.consolidation.enabled",
                "false: carried as consolidationPolicy WhenEmpty with consolidateAfter "
                + (
                    _seconds(spec.ttl_seconds_after_empty)
                    if spec.ttl_seconds_after_empty is not None
                    else NEVER
                ),
            )
        )
    return found


def nodepool_from_provisioner(
    provisioner: Provisioner, *, node_class_ref: NodeClassReference
) -> tuple[NodePool, tuple[FieldWarning, ...]]:
    """The NodePool a Provisioner becomes, pointing at `node_class_ref`, and its warnings.

    The pool has the Provisioner's name, and its nodes carry karpenter.sh/provisioner-name so
    the nodeSelectors and affinities written for v0.x keep matching.
    """
    spec = provisioner.spec
    name = provisioner.metadata.name or ""
    disruption, disruption_warnings = _disruption(provisioner)
    expire_after, expiry_warnings = _expire_after(provisioner)
    requirements = [
        NodeSelectorRequirementWithMinValues(key=req.key, operator=req.operator, values=req.values)
        for req in spec.requirements
    ]
    constrained = {req.key for req in spec.requirements}
    requirements += [
        NodeSelectorRequirementWithMinValues(
            key=key, operator=RequirementOperator.IN, values=(value,)
        )
        for key, value in V0_DEFAULT_REQUIREMENTS.items()
        if key not in constrained and key not in spec.labels
    ]
    template = NodeClaimTemplate(
        metadata=NodeClaimTemplateMetadata(
            labels={**spec.labels, labels.LABEL_PROVISIONER_NAME: name},
            annotations=dict(spec.annotations),
        ),
        spec=NodeClaimTemplateSpec(
            requirements=tuple(requirements),
            node_class_ref=node_class_ref,
            taints=spec.taints,
            startup_taints=spec.startup_taints,
            expire_after=expire_after,
        ),
    )
    limits: Mapping[str, Quantity] = dict(spec.limits.resources) if spec.limits else {}
    nodepool = NodePool(
        metadata=ObjectMeta(name=name),
        spec=NodePoolSpec(
            template=template, disruption=disruption, limits=limits, weight=spec.weight
        ),
    )
    warnings = (*disruption_warnings, *expiry_warnings, *_warnings_of_spec(provisioner))
    return nodepool, warnings


def translate(
    provisioner: Provisioner,
    node_classes: LegacyNodeClasses,
    templates: Mapping[str, Any],
    *,
    settings: LegacySettings,
) -> Translation:
    """Provisioner -> NodePool plus the provider's NodeClasses for it, with every warning.

    Raises TranslationError naming the fields the provider cannot carry.
    """
    node_class = node_classes.for_provisioner(provisioner, templates, settings=settings)
    nodepool, warnings = nodepool_from_provisioner(provisioner, node_class_ref=node_class.ref)
    return Translation(
        nodepool=nodepool,
        node_classes=node_class.node_classes,
        warnings=(*warnings, *node_class.warnings),
    )


LEGACY_ENTRY_POINT_GROUP: Final = "karpy.legacy"


@functools.cache
def legacy_node_classes(provider: str) -> LegacyNodeClasses:
    """The provider's half of the translation, from the ``karpy.legacy`` entry points.

    Raises LookupError naming the installed providers when `provider` declares none.
    """
    found = {ep.name: ep for ep in metadata.entry_points(group=LEGACY_ENTRY_POINT_GROUP)}
    if provider not in found:
        msg = (
            f"provider {provider!r} declares no legacy translation "
            f"(installed: {', '.join(sorted(found)) or 'none'})"
        )
        raise LookupError(msg)
    declared: LegacyNodeClasses = found[provider].load()
    return declared
