"""Machine (karpenter.sh/v1alpha5), served read-only.

Karpenter v0.28-v0.31 launched through Machines; v1 launches through NodeClaims, and so does
karpy. The kind is served so that tools and scripts that list Machines keep working (they find
none), and every create or update is refused with a message pointing at NodeClaims, rather than
accepting a Machine that nothing would ever launch.
"""

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from karpy.apis.kube.common import Taint
from karpy.apis.meta import Condition, ObjectMeta, Quantity, conditions_field
from karpy.apis.schema import Rule, field
from karpy.apis.v1 import labels
from karpy.apis.v1alpha5.provisioner import ProviderRef, Requirement

API_VERSION = f"{labels.GROUP}/v1alpha5"

READ_ONLY_MESSAGE = (
    "karpenter.sh/v1alpha5 Machine is read-only in karpy: nodes are launched through "
    "karpenter.sh/v1 NodeClaims (create a Provisioner or a NodePool instead)"
)


@attrs.frozen(kw_only=True)
class MachineSpec:
    requirements: tuple[Requirement, ...] = field(
        factory=tuple, doc="Constraints on the machine.", crd_default=False, max_items=100
    )
    taints: tuple[Taint, ...] = field(
        factory=tuple, doc="Node taints.", crd_default=False, max_items=100
    )
    startup_taints: tuple[Taint, ...] = field(
        factory=tuple, doc="Startup taints.", crd_default=False, max_items=100
    )
    machine_template_ref: ProviderRef | None = field(
        default=None, doc="The node template the machine was launched from."
    )


@attrs.frozen(kw_only=True)
class MachineStatus:
    node_name: str | None = field(default=None, doc="Name of the machine's Node.")
    provider_id: str | None = field(default=None, wire="providerID", doc="Cloud provider id.")
    capacity: Mapping[str, Quantity] = field(factory=dict, doc="Capacity.", crd_default=False)
    allocatable: Mapping[str, Quantity] = field(factory=dict, doc="Allocatable.", crd_default=False)
    conditions: tuple[Condition, ...] = conditions_field()


@attrs.frozen(kw_only=True)
class Machine:
    """A v0.28-v0.31 Machine; karpy serves the kind but never creates or accepts one."""

    GROUP: ClassVar[str] = labels.GROUP
    VERSION: ClassVar[str] = "v1alpha5"
    KIND: ClassVar[str] = "Machine"
    PLURAL: ClassVar[str] = "machines"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: MachineSpec = field(
        factory=MachineSpec,
        required=True,
        doc="Refused: Machines are read-only in karpy.",
        rules=(Rule(rule="false", message=READ_ONLY_MESSAGE),),
    )
    status: MachineStatus = field(factory=MachineStatus, doc="Observed state.", crd_default=False)
    api_version: str = field(default=API_VERSION, crd_default=False)
    kind: str = field(default="Machine", crd_default=False)
