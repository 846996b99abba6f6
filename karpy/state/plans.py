"""A solver's NodeClaimPlan as the NodeClaim object the provisioner (or the disruption queue,
for a replacement) creates.

The scheduling core says what a new node must be (requirements narrowed by its pods, the
instance types that fit, the summed requests); the NodePool's template says everything else
(labels, taints, the NodeClass, expiry). Karpenter merges the two in one place, and so does this
module, so the lifecycle controller and drift detection read NodeClaims of one shape. Pure: no
I/O, no clock; the apiserver picks the random name suffix through ``generateName``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from karpy.apis.meta import ObjectMeta, OwnerReference
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClaimRequirement, RequirementOperator
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.requirements import quantities_from_resources, requirements_to_api
from karpy.core.requirements import RequirementError
from karpy.core.scheduling.results import NodeClaimPlan
from karpy.state.nodepools import hash_annotations

MAX_INSTANCE_TYPES: Final = 60
"""Instance types a template-made NodeClaim lists at most (Karpenter's MaxInstanceTypes)."""
LOGGED_INSTANCE_TYPES: Final = 5
"""How many instance types a log line names before it gives only the count."""


class PlanError(ValueError):
    """A plan cannot become a NodeClaim (e.g. a requirement the apiserver would refuse)."""


def nodeclaim_from_plan(plan: NodeClaimPlan, nodepool: NodePool) -> NodeClaim:
    """The NodeClaim to create for `plan` from `nodepool`'s template.

    Named ``<nodepool>-`` plus a random suffix (generateName), owned by the NodePool (so it is
    garbage collected with it), labelled with the template's labels and ``karpenter.sh/nodepool``,
    annotated with the NodePool's template hash (``karpenter.sh/nodepool-hash`` and its version,
    computed from the template now, as Karpenter does, so static drift is judged against the
    template the node was made from).
    Requirements are the plan's (which carry the instance-type and capacity-type ``In`` lists);
    taints, startup taints, nodeClassRef, expireAfter and terminationGracePeriod come from the
    template. Raises PlanError naming the NodePool when the plan does not belong to it or a
    requirement cannot be written.
    """
    name = nodepool.metadata.name or ""
    if plan.nodepool != name:
        msg = f"NodeClaim plan {plan.name}: planned for NodePool {plan.nodepool!r}, not {name!r}"
        raise PlanError(msg)
    if not nodepool.metadata.uid:
        msg = f"NodePool {name}: metadata.uid is missing; it cannot own a NodeClaim"
        raise PlanError(msg)
    try:
        requirements = requirements_to_api(plan.requirements)
    except RequirementError as error:
        msg = f"NodePool {name}: NodeClaim plan {plan.name}: {error}"
        raise PlanError(msg) from error
    template = nodepool.spec.template
    labels = {**template.metadata.labels, wk.LABEL_NODEPOOL: name}
    try:
        stamp = hash_annotations(nodepool)
    except ValueError as error:
        raise PlanError(str(error)) from error
    annotations = {**template.metadata.annotations, **stamp}
    if plan.min_values_relaxed:
        annotations[wk.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] = "true"
    owner = OwnerReference(
        api_version=nodepool.api_version,
        kind=nodepool.kind,
        name=name,
        uid=nodepool.metadata.uid,
        block_owner_deletion=True,
    )
    return NodeClaim(
        metadata=ObjectMeta(
            generate_name=f"{name}-",
            labels=labels,
            annotations=annotations,
            owner_references=(owner,),
        ),
        spec=NodeClaimSpec(
            requirements=requirements,
            node_class_ref=template.spec.node_class_ref,
            resources=ResourceRequests(requests=quantities_from_resources(plan.requests)),
            taints=template.spec.taints,
            startup_taints=template.spec.startup_taints,
            expire_after=template.spec.expire_after,
            termination_grace_period=template.spec.termination_grace_period,
        ),
    )


def nodeclaim_from_template(nodepool: NodePool, *, instance_types: Sequence[str] = ()) -> NodeClaim:
    """A NodeClaim straight from `nodepool`'s template, as a static NodePool makes them: the
    template's requirements, no pod requests. `instance_types`, when given, are the compatible
    types cheapest first, added as a `node.kubernetes.io/instance-type In` requirement (the
    first MAX_INSTANCE_TYPES of them, as Karpenter truncates). Raises PlanError as
    `nodeclaim_from_plan`."""
    name = nodepool.metadata.name or ""
    if not nodepool.metadata.uid:
        msg = f"NodePool {name}: metadata.uid is missing; it cannot own a NodeClaim"
        raise PlanError(msg)
    template = nodepool.spec.template
    try:
        stamp = hash_annotations(nodepool)
    except ValueError as error:
        raise PlanError(str(error)) from error
    owner = OwnerReference(
        api_version=nodepool.api_version,
        kind=nodepool.kind,
        name=name,
        uid=nodepool.metadata.uid,
        block_owner_deletion=True,
    )
    return NodeClaim(
        metadata=ObjectMeta(
            generate_name=f"{name}-",
            labels={**template.metadata.labels, wk.LABEL_NODEPOOL: name},
            annotations={**template.metadata.annotations, **stamp},
            owner_references=(owner,),
        ),
        spec=NodeClaimSpec(
            requirements=(
                *(
                    NodeClaimRequirement(
                        key=r.key, operator=r.operator, values=r.values, min_values=r.min_values
                    )
                    for r in template.spec.requirements
                ),
                *(
                    (
                        NodeClaimRequirement(
                            key=wk.LABEL_INSTANCE_TYPE,
                            operator=RequirementOperator.IN,
                            values=tuple(instance_types[:MAX_INSTANCE_TYPES]),
                        ),
                    )
                    if instance_types
                    else ()
                ),
            ),
            node_class_ref=template.spec.node_class_ref,
            taints=template.spec.taints,
            startup_taints=template.spec.startup_taints,
            expire_after=template.spec.expire_after,
            termination_grace_period=template.spec.termination_grace_period,
        ),
    )


def summarize_instance_types(names: Sequence[str]) -> str:
    """The first few names and how many more, for a log field: ``"a, b, c and 7 other(s)"``."""
    head = ", ".join(names[:LOGGED_INSTANCE_TYPES])
    rest = len(names) - LOGGED_INSTANCE_TYPES
    return f"{head} and {rest} other(s)" if rest > 0 else head
