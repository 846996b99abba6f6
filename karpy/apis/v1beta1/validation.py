"""The v1beta1 admission rules, in Python, for `karpy convert`, which runs with no apiserver.

As for v1alpha5 (karpy.apis.v1alpha5.validation), a manifest `convert` refuses is one
`kubectl apply` refuses too, with the apiserver's field paths: label and requirement keys out
of restricted domains, taints, and consolidateAfter beside WhenEmpty.
"""

from __future__ import annotations

from karpy.apis.v1alpha5 import validation as v1alpha5
from karpy.apis.v1beta1.nodepool import ConsolidationPolicy, NodePool


def validate_nodepool(pool: NodePool) -> list[str]:
    """Every problem the v1beta1 schema would refuse, each prefixed with its field path."""
    problems: list[str] = []
    if not pool.metadata.name:
        problems.append("metadata.name: Required value")
    template = pool.spec.template
    for i, req in enumerate(template.spec.requirements):
        path = f"spec.template.spec.requirements[{i}]"
        problem = v1alpha5.label_key_problem(req.key)
        if problem is not None:
            problems.append(f'{path}.key: Invalid value: "{req.key}": {problem}')
        if req.min_values is not None and len(req.values) < req.min_values:
            problems.append(
                f"{path}.minValues: Invalid value: {req.min_values}: requirements with "
                "'minValues' must have at least that many values specified in the 'values' field"
            )
    problems.extend(
        v1alpha5.labels_problems("spec.template.metadata.labels", template.metadata.labels)
    )
    problems.extend(v1alpha5.taints_problems("spec.template.spec.taints", template.spec.taints))
    problems.extend(
        v1alpha5.taints_problems("spec.template.spec.startupTaints", template.spec.startup_taints)
    )
    disruption = pool.spec.disruption
    if (
        disruption.consolidation_policy is ConsolidationPolicy.WHEN_EMPTY
        and disruption.consolidate_after is None
    ):
        problems.append(
            "spec.disruption: Invalid value: consolidateAfter must be specified with "
            "consolidationPolicy=WhenEmpty"
        )
    return problems
