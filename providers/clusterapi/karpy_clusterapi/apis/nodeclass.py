"""ClusterAPINodeClass (karpenter.cluster.x-k8s.io/v1alpha1): which MachineDeployments a NodePool
may grow and shrink.

The upstream provider's kind, field for field (``spec.scalableResourceSelector``, status
conditions), so its users' objects apply unchanged. Its status is written by the provider's
``clusterapi.nodeclass`` pass: Ready once the selector matches at least one MachineDeployment in
the management cluster, with the matching MachineDeployments listed.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

import attrs

from karpy.apis.kube.common import LabelSelectorOperator
from karpy.apis.meta import Condition, ObjectMeta, conditions_field
from karpy.apis.schema import Rule, field
from karpy_clusterapi.apis.labels import GROUP

VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

SELECTOR_RULES: Final = (
    Rule(
        rule=(
            "!has(self.matchExpressions) || self.matchExpressions.all(e, "
            "e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) "
            ": (!has(e.values) || size(e.values) == 0))"
        ),
        message=(
            "matchExpressions[].values must be non-empty for In and NotIn, and empty for Exists "
            "and DoesNotExist"
        ),
    ),
)


@attrs.frozen(kw_only=True)
class SelectorRequirement:
    """One label requirement of a selector (Kubernetes' LabelSelectorRequirement)."""

    key: str = field(doc="The label key.", min_length=1, max_length=316)
    operator: LabelSelectorOperator = field(doc="In, NotIn, Exists or DoesNotExist.")
    values: tuple[str, ...] = field(
        factory=tuple, doc="The values for In and NotIn; empty for Exists and DoesNotExist."
    )


@attrs.frozen(kw_only=True)
class Selector:
    """A Kubernetes label selector; empty selects everything."""

    match_labels: Mapping[str, str] = field(
        factory=dict, doc="Labels that must all be present with these values."
    )
    match_expressions: tuple[SelectorRequirement, ...] = field(
        factory=tuple, doc="Requirements that must all hold."
    )


@attrs.frozen(kw_only=True)
class ClusterAPINodeClassSpec:
    scalable_resource_selector: Selector = field(
        doc=(
            "Selects, by their labels, the MachineDeployments of the management cluster whose "
            "machines this NodeClass launches. An empty selector selects every MachineDeployment."
        ),
        rules=SELECTOR_RULES,
    )


@attrs.frozen(kw_only=True)
class SelectedMachineDeployment:
    namespace: str = field(doc="The MachineDeployment's namespace.")
    name: str = field(doc="The MachineDeployment's name.")


@attrs.frozen(kw_only=True)
class ClusterAPINodeClassStatus:
    conditions: tuple[Condition, ...] = conditions_field()
    machine_deployments: tuple[SelectedMachineDeployment, ...] = field(
        factory=tuple,
        doc="The MachineDeployments the selector matches, as last resolved.",
        crd_default=False,
    )


@attrs.frozen(kw_only=True)
class ClusterAPINodeClass:
    """A NodeClass over Cluster API MachineDeployments."""

    GROUP: ClassVar[str] = GROUP
    VERSION: ClassVar[str] = VERSION
    KIND: ClassVar[str] = "ClusterAPINodeClass"
    PLURAL: ClassVar[str] = "clusterapinodeclasses"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: ClusterAPINodeClassSpec = field(doc="Which MachineDeployments this NodeClass launches.")
    status: ClusterAPINodeClassStatus = field(
        factory=ClusterAPINodeClassStatus,
        doc="Whether the selector matches MachineDeployments, and which.",
        crd_default=False,
    )
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="ClusterAPINodeClass", crd_default=False)
