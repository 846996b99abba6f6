"""v1beta1 <-> v1 for NodePool and NodeClaim: Karpenter's v1 migration, as pure functions.

The conversion webhook runs these for the apiserver (each direction, on every v1beta1 request)
and `karpy convert` runs `*_to_v1` offline, so a manifest reads the same either way. The rules
are Karpenter's: WhenUnderutilized becomes WhenEmptyOrUnderutilized with consolidateAfter 0s
(v1beta1 consolidated underutilized nodes as soon as it could), expireAfter moves from the
disruption block to the template spec, and nodeClassRef trades apiVersion for group (kind and
group filled with the provider's NodeClass when v1beta1 left them out). `kubelet` has no place
in a v1 NodePool or NodeClaim: it is refused here naming the field (`karpy convert` moves it
to the NodeClass before calling these).

v1 -> v1beta1 is total and the inverse of v1beta1 -> v1 on what v1beta1 can say: the v1beta1
schema also carries the fields v1 added, so nothing is lost either way.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from karpy.apis.v1 import nodeclaim as v1claim
from karpy.apis.v1 import nodepool as v1pool
from karpy.apis.v1.common import NodeClassReference as V1NodeClassReference
from karpy.apis.v1alpha5.translate import TranslationError
from karpy.apis.v1beta1 import nodepool as beta

NodeClassKinds = Mapping[tuple[str, str], str]
"""(group, kind) of each NodeClass karpy knows -> the version its v1beta1 references name."""


@attrs.frozen(kw_only=True)
class NodeClassDefaults:
    """What a v1beta1 nodeClassRef means when it leaves kind or apiVersion out (the provider's
    NodeClass), and the version written back for each known NodeClass."""

    group: str
    kind: str
    versions: NodeClassKinds = attrs.field(factory=dict)

    def api_version(self, group: str, kind: str) -> str:
        return f"{group}/{self.versions.get((group, kind), 'v1')}"


def _ref_to_v1(
    ref: beta.NodeClassReference, defaults: NodeClassDefaults, path: str
) -> V1NodeClassReference:
    if ref.api_version is None or ref.api_version == "":
        group = defaults.group
    else:
        group, slash, version = ref.api_version.partition("/")
        if not slash or not group or not version or "/" in version:
            raise TranslationError(
                "nodeClassRef",
                [f"{path}.apiVersion: Invalid value: {ref.api_version!r}: expected group/version"],
            )
    return V1NodeClassReference(group=group, kind=ref.kind or defaults.kind, name=ref.name)


def _ref_from_v1(ref: V1NodeClassReference, defaults: NodeClassDefaults) -> beta.NodeClassReference:
    return beta.NodeClassReference(
        name=ref.name, kind=ref.kind, api_version=defaults.api_version(ref.group, ref.kind)
    )


def _refuse_kubelet(kubelet: object, path: str) -> None:
    if kubelet is not None:
        raise TranslationError("kubelet", [f"{path}: Forbidden: {beta.KUBELET_MESSAGE}"])


def _disruption_to_v1(disruption: beta.Disruption) -> v1pool.Disruption:
    if disruption.consolidation_policy is beta.ConsolidationPolicy.WHEN_EMPTY:
        policy = v1pool.ConsolidationPolicy.WHEN_EMPTY
    elif disruption.consolidation_policy is beta.ConsolidationPolicy.BALANCED:
        policy = v1pool.ConsolidationPolicy.BALANCED
    else:
        policy = v1pool.ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    return v1pool.Disruption(
        consolidation_policy=policy,
        # v1beta1 consolidated underutilized nodes without waiting: 0s keeps that.
        consolidate_after=(
            "0s" if disruption.consolidate_after is None else disruption.consolidate_after
        ),
        budgets=disruption.budgets,
    )


def _disruption_from_v1(disruption: v1pool.Disruption, expire_after: str) -> beta.Disruption:
    policy = beta.ConsolidationPolicy(
        "WhenUnderutilized"
        if disruption.consolidation_policy is v1pool.ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
        else disruption.consolidation_policy.value
    )
    after: str | None = disruption.consolidate_after
    if policy is not beta.ConsolidationPolicy.WHEN_EMPTY and after == "0s":
        after = None  # v1beta1's implicit wait for WhenUnderutilized
    return beta.Disruption(
        consolidation_policy=policy,
        consolidate_after=after,
        expire_after=expire_after,
        budgets=disruption.budgets,
    )


def nodepool_to_v1(pool: beta.NodePool, *, defaults: NodeClassDefaults) -> v1pool.NodePool:
    """The v1 NodePool a v1beta1 one means. Raises TranslationError naming the field when it
    sets `kubelet` or a malformed nodeClassRef.apiVersion."""
    spec = pool.spec
    template = spec.template.spec
    _refuse_kubelet(template.kubelet, "spec.template.spec.kubelet")
    return v1pool.NodePool(
        metadata=pool.metadata,
        spec=v1pool.NodePoolSpec(
            template=v1pool.NodeClaimTemplate(
                metadata=spec.template.metadata,
                spec=v1pool.NodeClaimTemplateSpec(
                    requirements=template.requirements,
                    node_class_ref=_ref_to_v1(
                        template.node_class_ref, defaults, "spec.template.spec.nodeClassRef"
                    ),
                    taints=template.taints,
                    startup_taints=template.startup_taints,
                    expire_after=spec.disruption.expire_after,
                    termination_grace_period=template.termination_grace_period,
                ),
            ),
            disruption=_disruption_to_v1(spec.disruption),
            limits=spec.limits,
            weight=spec.weight,
        ),
        status=pool.status,
    )


def nodepool_from_v1(pool: v1pool.NodePool, *, defaults: NodeClassDefaults) -> beta.NodePool:
    """The v1beta1 view of a v1 NodePool. Raises TranslationError for a static pool
    (spec.replicas), which v1beta1 cannot express and karpy does not serve."""
    spec = pool.spec
    if spec.replicas is not None:
        raise TranslationError(
            "replicas", ["spec.replicas: Forbidden: static NodePools have no v1beta1 form"]
        )
    template = spec.template.spec
    return beta.NodePool(
        metadata=pool.metadata,
        spec=beta.NodePoolSpec(
            template=beta.NodeClaimTemplate(
                metadata=spec.template.metadata,
                spec=beta.NodeClaimTemplateSpec(
                    requirements=template.requirements,
                    node_class_ref=_ref_from_v1(template.node_class_ref, defaults),
                    taints=template.taints,
                    startup_taints=template.startup_taints,
                    termination_grace_period=template.termination_grace_period,
                ),
            ),
            disruption=_disruption_from_v1(spec.disruption, template.expire_after),
            limits=spec.limits,
            weight=spec.weight,
        ),
        status=pool.status,
    )


def nodeclaim_to_v1(claim: beta.NodeClaim, *, defaults: NodeClassDefaults) -> v1claim.NodeClaim:
    """The v1 NodeClaim a v1beta1 one means; refuses `kubelet` as `nodepool_to_v1` does."""
    spec = claim.spec
    _refuse_kubelet(spec.kubelet, "spec.kubelet")
    return v1claim.NodeClaim(
        metadata=claim.metadata,
        spec=v1claim.NodeClaimSpec(
            requirements=spec.requirements,
            node_class_ref=_ref_to_v1(spec.node_class_ref, defaults, "spec.nodeClassRef"),
            resources=spec.resources,
            taints=spec.taints,
            startup_taints=spec.startup_taints,
            expire_after=spec.expire_after,
            termination_grace_period=spec.termination_grace_period,
        ),
        status=claim.status,
    )


def nodeclaim_from_v1(claim: v1claim.NodeClaim, *, defaults: NodeClassDefaults) -> beta.NodeClaim:
    """The v1beta1 view of a v1 NodeClaim (total)."""
    spec = claim.spec
    return beta.NodeClaim(
        metadata=claim.metadata,
        spec=beta.NodeClaimSpec(
            requirements=spec.requirements,
            node_class_ref=_ref_from_v1(spec.node_class_ref, defaults),
            resources=spec.resources,
            taints=spec.taints,
            startup_taints=spec.startup_taints,
            expire_after=spec.expire_after,
            termination_grace_period=spec.termination_grace_period,
        ),
        status=claim.status,
    )
