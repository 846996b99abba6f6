"""NodePool/NodeClaim wire values <-> the scheduling core's Requirements and Resources.

Every provider reads a NodeClaim's requirements and writes its capacity; the provisioner reads a
NodePool's template and writes NodeClaim specs. The API models keep the CRD's shape (operator
strings, values as written, quantities as strings), the core works on normalised sets and
milli-units. Doing the translation once, here, means one meaning for deprecated label keys
(``beta.kubernetes.io/arch`` reads as ``kubernetes.io/arch``), for Gte/Lte, for minValues and
for quantity rounding everywhere. Pure: no I/O, no clock; bad input raises an error that names
the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from karpy.apis.meta import Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClaimRequirement,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodepool import NodePool
from karpy.core.requirements import Operator, Requirement, RequirementError, Requirements
from karpy.core.resources import QuantityError, Resources, format_quantity, parse_quantity

WireRequirement = NodeSelectorRequirementWithMinValues | NodeClaimRequirement


def requirement_from_api(req: WireRequirement, *, where: str = "requirement") -> Requirement:
    """One wire requirement as a core Requirement (key normalised, Gte/Lte as bounds).

    Raises RequirementError whose message starts with ``where`` (e.g. ``spec.requirements[2]``).
    """
    try:
        return Requirement.new(req.key, req.operator, req.values, min_values=req.min_values)
    except RequirementError as e:
        raise RequirementError(f"{where}: {e}") from e


def requirements_from_api(
    reqs: Iterable[WireRequirement], *, field: str = "spec.requirements"
) -> Requirements:
    """All of a spec's requirements; several on one key intersect, as Kubernetes ANDs them."""
    return Requirements(requirement_from_api(r, where=f"{field}[{i}]") for i, r in enumerate(reqs))


def nodepool_requirements(nodepool: NodePool) -> Requirements:
    """What every node of the pool satisfies: the template's requirements, its labels (as
    ``In [value]``) and ``karpenter.sh/nodepool In [name]``, as Karpenter builds them."""
    template = nodepool.spec.template
    reqs = requirements_from_api(
        template.spec.requirements, field="spec.template.spec.requirements"
    )
    labels = dict(template.metadata.labels)
    if nodepool.metadata.name is not None:
        labels[wk.LABEL_NODEPOOL] = nodepool.metadata.name
    return reqs.merge(Requirements.from_labels(labels))


def _wire_expression(
    op: Operator, values: tuple[str, ...]
) -> tuple[RequirementOperator, tuple[str, ...]] | None:
    """One of ``Requirement.expressions()`` as the wire carries it, or None when it cannot.

    The wire's bounds are one non-negative integer each. Gte 0 is stored as "greater than -1",
    which the digits-only Gt cannot carry, so it is written as Gte 0. A pod may ask for a
    negative bound (node affinity takes any int64), which no NodeClaim may carry: a lower bound
    below zero is left out, and an upper bound below zero as well. The NodeClaim loses nothing
    by it, since its instance types were chosen under the exact bound and are listed by name.
    """
    if op in (Operator.GT, Operator.LT):
        bound = int(values[0])
        if op is Operator.GT and bound == -1:
            return RequirementOperator.GTE, ("0",)
        if bound < (-1 if op is Operator.GT else 0):
            return None
    return RequirementOperator(op.value), values


def requirement_to_api(req: Requirement) -> tuple[NodeClaimRequirement, ...]:
    """The wire entries meaning exactly ``req`` (one, or several on the same key when a NotIn
    carries integer bounds too; Kubernetes ANDs entries that share a key).

    Raises RequirementError for an ``In`` narrowed below its minValues: the apiserver refuses
    such an entry, so the caller must relax minValues (Karpenter's BestEffort) or give up.
    """
    if req.values and not req.complement and len(req.values) < (req.min_values or 0):
        raise RequirementError(
            f"requirement {req.key!r}: In has {len(req.values)} values, fewer than minValues"
            f" {req.min_values}"
        )
    wire = [e for op, values in req.expressions() if (e := _wire_expression(op, values))]
    entries = wire or [(RequirementOperator.EXISTS, ())]
    return tuple(
        NodeClaimRequirement(key=req.key, operator=op, values=values, min_values=req.min_values)
        for op, values in entries
    )


def requirements_to_api(reqs: Requirements) -> tuple[NodeClaimRequirement, ...]:
    """All requirements as NodeClaim spec entries, sorted by key (stable for hashing and diffs)."""
    return tuple(entry for req in reqs for entry in requirement_to_api(req))


def resources_from_quantities(
    quantities: Mapping[str, str | int | float], *, field: str = "resources"
) -> Resources:
    """A Kubernetes resource list (``{"cpu": "1500m"}``) as core Resources (milli-units).

    Raises QuantityError naming ``field`` and the resource.
    """
    pairs: list[tuple[str, int]] = []
    for name, value in quantities.items():
        try:
            pairs.append((name, parse_quantity(value)))
        except QuantityError as e:
            raise QuantityError(f"{field}[{name}]: {e}") from e
    return Resources(tuple(pairs))


def quantities_from_resources(resources: Resources) -> dict[str, Quantity]:
    """Core Resources as exact quantity strings (cpu in cores or ``m``, memory in binary
    suffixes where they divide); parsing the result gives back the same milli-units."""
    return {name: Quantity(format_quantity(name, amount)) for name, amount in resources.items_}
