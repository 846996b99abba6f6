"""What several controllers read off a NodePool the same way: its template hash (the one place
that says which template fields karpy hashes; see karpy.core.drift for why those), and its
extended-resource initialization timeout, and its disruption budgets as the core reads them.

The provisioner stamps the hash on every NodeClaim it creates, the nodepool.hash controller
keeps it on the NodePool and the nodeclaim.disruption controller compares the two; all three
call `nodepool_hash` here (below every controller, so none imports another). Pure.
"""

from __future__ import annotations

from datetime import timedelta

from karpy.apis.duration import parse_duration
from karpy.apis.kube.common import Taint
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodepool import Budget, NodePool
from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.drift import HASH_VERSION, TaintFields, TemplateFields, template_hash


def _seconds(value: str | None, *, field_name: str) -> float | None:
    if value is None:
        return None
    parsed = parse_duration(value, field_name=field_name)
    return None if parsed is None else parsed.total_seconds()


def _taints(taints: tuple[Taint, ...]) -> tuple[TaintFields, ...]:
    return tuple(TaintFields(key=t.key, value=t.value or "", effect=str(t.effect)) for t in taints)


def template_fields(nodepool: NodePool) -> TemplateFields:
    """The hashed fields of `nodepool`'s spec.template (requirements are not among them).

    Raises ValueError naming the NodePool and field for a malformed duration."""
    template = nodepool.spec.template
    spec = template.spec
    where = f"nodepool {nodepool.metadata.name!r} spec.template.spec"
    ref = spec.node_class_ref
    return TemplateFields(
        labels=dict(template.metadata.labels),
        annotations=dict(template.metadata.annotations),
        taints=_taints(spec.taints),
        startup_taints=_taints(spec.startup_taints),
        node_class_ref=(ref.group, ref.kind, ref.name),
        expire_after=_seconds(spec.expire_after, field_name=f"{where}.expireAfter"),
        termination_grace_period=_seconds(
            spec.termination_grace_period, field_name=f"{where}.terminationGracePeriod"
        ),
    )


def nodepool_hash(nodepool: NodePool) -> str:
    """The `karpenter.sh/nodepool-hash` value of `nodepool`'s current template."""
    return template_hash(template_fields(nodepool))


def hash_annotations(nodepool: NodePool) -> dict[str, str]:
    """The hash and hash-version annotations for `nodepool` and the NodeClaims made from it."""
    return {
        wk.ANNOTATION_NODEPOOL_HASH: nodepool_hash(nodepool),
        wk.ANNOTATION_NODEPOOL_HASH_VERSION: HASH_VERSION,
    }


def extended_resource_timeout(
    nodepool: NodePool | None, *, default: timedelta | None
) -> timedelta | None:
    """How long a registered node of `nodepool` may go without an extended resource its
    NodeClaim requested before it is replaced; None: it waits for ever.

    The NodePool's karpy.sh/extended-resource-initialization-timeout annotation (a duration, or
    Never) overrides `default` (the global option, None when off). Raises ValueError naming the
    NodePool and the annotation for a value that is neither a positive duration nor Never."""
    if nodepool is None:
        return default
    key = wk.ANNOTATION_EXTENDED_RESOURCE_INITIALIZATION_TIMEOUT
    value = nodepool.metadata.annotations.get(key)
    if value is None:
        return default
    where = f"nodepool {nodepool.metadata.name!r} annotation {key}"
    timeout = parse_duration(value, field_name=where)
    if timeout is not None and timeout <= timedelta(0):
        msg = f"{where}: must be greater than zero, or Never; got {value!r}"
        raise ValueError(msg)
    return timeout


def _budget(budget: Budget, index: int) -> BudgetSpec:
    reasons = frozenset(str(r) for r in budget.reasons)
    if budget.duration is None:
        return BudgetSpec(nodes=budget.nodes, schedule=budget.schedule, reasons=reasons)
    field = f"spec.disruption.budgets[{index}].duration"
    try:
        duration = parse_duration(budget.duration, field_name=field)
    except ValueError as error:
        return BudgetSpec(nodes=budget.nodes, error=str(error))
    if duration is None:
        return BudgetSpec(nodes=budget.nodes, error=f"{field}: Never is not a window length")
    return BudgetSpec(
        nodes=budget.nodes,
        schedule=budget.schedule,
        duration=duration.total_seconds(),
        reasons=reasons,
    )


def pool_budgets(nodepool: NodePool) -> tuple[BudgetSpec, ...]:
    """`nodepool`'s disruption budgets as the core's budget arithmetic reads them (a budget
    whose duration does not parse carries the error, and fails closed)."""
    return tuple(_budget(b, i) for i, b in enumerate(nodepool.spec.disruption.budgets))
