"""Kubernetes Pod -> the scheduling core's pod view, naming the field of anything it refuses.

The core (`karpy.core.pods.Pod`) knows nothing of the API models, so that it can be tested and
benchmarked without a cluster; this module is the one place a decoded Pod becomes a core Pod.
It keeps every input of the effective-request formula (containers, init containers with
restartPolicy=Always sidecars, overhead), nodeSelector, node affinity, tolerations, topology spread,
pod (anti-)affinity, host ports, the topology of the pod's volumes, priority, an owner key and a
creation rank. Pure: no I/O and no clock. Bad input raises `TranslationError`, whose message starts
with the object and the field path, so one bad pod can be reported and skipped while the rest of
a batch is scheduled.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

import attrs

from karpy.apis.kube import common as kc
from karpy.apis.kube.pod import Container as KubeContainer
from karpy.apis.kube.pod import PodAffinity, PodSpec, Volume
from karpy.apis.kube.pod import PodAffinityTerm as KubePodAffinityTerm
from karpy.apis.kube.pod import TopologySpreadConstraint as KubeSpread
from karpy.apis.kube.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    StorageClass,
)
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.cloudprovider.requirements import resources_from_quantities
from karpy.core import pods as cp
from karpy.core.requirements import Requirement, RequirementError, Requirements
from karpy.core.resources import QuantityError, Resources
from karpy.core.taints import Effect, Toleration, TolerationOperator

ALL_ADDRESSES = "0.0.0.0"  # noqa: S104 -- Kubernetes' default hostIP, "every address"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
# A local or hostPath PV pins its node by hostname; a new node can never satisfy that, and
# Karpenter ignores the term rather than refuse the pod.
_IGNORED_VOLUME_KEYS = frozenset({wk.LABEL_HOSTNAME})


class TranslationError(ValueError):
    """An object the core cannot represent; the message names the object and the field."""


@attrs.frozen
class ObjectError:
    """One object left out of a snapshot, and why (the message names the field)."""

    kind: str
    namespace: str
    name: str
    uid: str
    message: str


@attrs.frozen
class VolumeIndex:
    """The storage objects a pod's volumes resolve through, by (namespace, name) / name."""

    claims: Mapping[tuple[str, str], PersistentVolumeClaim] = attrs.field(factory=dict)
    volumes: Mapping[str, PersistentVolume] = attrs.field(factory=dict)
    classes: Mapping[str, StorageClass] = attrs.field(factory=dict)


def resources_of(values: Mapping[str, str], *, field: str) -> Resources:
    """A resource list as core Resources; raises TranslationError naming `field`."""
    try:
        return resources_from_quantities(values, field=field)
    except QuantityError as e:
        raise TranslationError(str(e)) from e


def _requirement(key: str, operator: str, values: Iterable[str], *, field: str) -> Requirement:
    try:
        return Requirement.new(key, operator, values)
    except RequirementError as e:
        raise TranslationError(f"{field}: {e}") from e


def node_selector_term(term: kc.NodeSelectorTerm, *, field: str) -> Requirements:
    """One node selector term's matchExpressions, ANDed (matchFields are not modelled by the
    core; Karpenter reads only matchExpressions too)."""
    return Requirements(
        _requirement(r.key, r.operator, r.values, field=f"{field}.matchExpressions[{i}]")
        for i, r in enumerate(term.match_expressions)
    )


def label_selector(selector: kc.LabelSelector | None, *, field: str) -> cp.LabelSelector:
    """A Kubernetes label selector; None matches nothing, as in Kubernetes."""
    if selector is None:
        return cp.NOTHING
    exprs = [
        _requirement(r.key, r.operator, r.values, field=f"{field}.matchExpressions[{i}]")
        for i, r in enumerate(selector.match_expressions)
    ]
    return cp.LabelSelector.of(dict(selector.match_labels), exprs)


def toleration(tol: kc.Toleration) -> Toleration:
    """A toleration (operator defaults to Equal, as Kubernetes defaults it)."""
    return Toleration(
        key=tol.key or "",
        operator=TolerationOperator(tol.operator or TolerationOperator.EQUAL),
        value=tol.value or "",
        effect=Effect(tol.effect) if tol.effect is not None else None,
    )


def _container(c: KubeContainer, *, field: str, init: bool) -> cp.Container:
    requests = resources_of(c.resources.requests, field=f"{field}.resources.requests")
    # The apiserver defaults a missing request to its limit; do the same for models that
    # never went through it.
    limit_only = {k: v for k, v in c.resources.limits.items() if k not in c.resources.requests}
    if limit_only:
        requests += resources_of(limit_only, field=f"{field}.resources.limits")
    return cp.Container(c.name, requests, restart_always=init and c.restart_policy == "Always")


def _host_ports(
    containers: Sequence[KubeContainer], *, field: str, sidecars_only: bool = False
) -> list[cp.HostPort]:
    out: list[cp.HostPort] = []
    for i, c in enumerate(containers):
        if sidecars_only and c.restart_policy != "Always":
            continue
        for j, port in enumerate(c.ports):
            if not port.host_port:
                continue
            if not 0 < port.host_port < 65536:
                msg = f"{field}[{i}].ports[{j}].hostPort: {port.host_port} is not in 1-65535"
                raise TranslationError(msg)
            out.append(
                cp.HostPort(port.host_port, str(port.protocol), port.host_ip or ALL_ADDRESSES)
            )
    return out


def _affinity_term(
    term: KubePodAffinityTerm, *, field: str, pod_labels: Mapping[str, str]
) -> cp.PodAffinityTerm:
    if not term.topology_key:
        raise TranslationError(f"{field}.topologyKey: must not be empty")
    selector = label_selector(term.label_selector, field=f"{field}.labelSelector")
    # matchLabelKeys / mismatchLabelKeys add `key In/NotIn [the pod's value]` to the selector,
    # as the apiserver merges them (a no-op when it already has).
    extra = [
        Requirement(k, False, frozenset({pod_labels[k]}))
        for k in term.match_label_keys
        if k in pod_labels
    ]
    extra += [
        Requirement(k, True, frozenset({pod_labels[k]}))
        for k in term.mismatch_label_keys
        if k in pod_labels
    ]
    if extra and not selector.nothing:
        selector = cp.LabelSelector(selector.requirements.add(*extra))
    ns_selector = (
        label_selector(term.namespace_selector, field=f"{field}.namespaceSelector")
        if term.namespace_selector is not None
        else None
    )
    return cp.PodAffinityTerm(
        selector, term.topology_key, frozenset(term.namespaces), namespace_selector=ns_selector
    )


def _affinity_terms(
    terms: Sequence[KubePodAffinityTerm], *, field: str, pod_labels: Mapping[str, str]
) -> tuple[cp.PodAffinityTerm, ...]:
    return tuple(
        _affinity_term(t, field=f"{field}[{i}]", pod_labels=pod_labels) for i, t in enumerate(terms)
    )


def _spread(c: KubeSpread, *, field: str) -> cp.TopologySpreadConstraint:
    if c.max_skew < 1:
        raise TranslationError(f"{field}.maxSkew: must be at least 1, got {c.max_skew}")
    if c.min_domains is not None and c.min_domains < 1:
        raise TranslationError(f"{field}.minDomains: must be at least 1, got {c.min_domains}")
    if not c.topology_key:
        raise TranslationError(f"{field}.topologyKey: must not be empty")
    return cp.TopologySpreadConstraint(
        topology_key=c.topology_key,
        max_skew=c.max_skew,
        selector=label_selector(c.label_selector, field=f"{field}.labelSelector"),
        when_unsatisfiable=cp.WhenUnsatisfiable(c.when_unsatisfiable),
        min_domains=c.min_domains,
        node_affinity_policy=cp.InclusionPolicy(c.node_affinity_policy or "Honor"),
        node_taints_policy=cp.InclusionPolicy(c.node_taints_policy or "Ignore"),
        match_label_keys=tuple(c.match_label_keys),
    )


def _volume_alternatives(
    pv: PersistentVolume | None, sc: StorageClass | None, *, field: str
) -> list[Requirements] | None:
    """The node requirements one volume imposes, as OR-ed alternatives (None: no constraint)."""
    if pv is not None:
        affinity = pv.spec.node_affinity
        if affinity is None or affinity.required is None:
            return None
        alts = []
        for i, term in enumerate(affinity.required.node_selector_terms):
            reqs = node_selector_term(term, field=f"{field}.nodeSelectorTerms[{i}]")
            for key in _IGNORED_VOLUME_KEYS & set(reqs.keys()):
                reqs = reqs.without(key)
            alts.append(reqs)
        return alts if alts and all(alts) else None
    if sc is None:
        return None
    alts = [
        Requirements(
            _requirement(e.key, "In", e.values, field=f"{field}.matchLabelExpressions[{j}]")
            for j, e in enumerate(term.match_label_expressions)
        )
        for term in sc.allowed_topologies
    ]
    return alts or None


def _claim_spec(
    meta: ObjectMeta, vol: Volume, index: VolumeIndex, *, namespace: str, where: str
) -> PersistentVolumeClaimSpec | None:
    """The claim spec a volume resolves to (None: not a claim, so no topology)."""
    if vol.persistent_volume_claim is not None:
        name = vol.persistent_volume_claim.claim_name
    elif vol.ephemeral is not None:
        name = f"{meta.name}-{vol.name}"
        template = vol.ephemeral.volume_claim_template
        if (namespace, name) not in index.claims:
            # The ephemeral-volume controller creates the claim after the pod: until then
            # the template says which StorageClass will provision it.
            return template.spec if template is not None else None
    else:
        return None
    pvc = index.claims.get((namespace, name))
    if pvc is None:
        raise TranslationError(f"{where}: PersistentVolumeClaim {namespace}/{name} not found")
    if pvc.metadata.deletion_timestamp is not None:
        raise TranslationError(
            f"{where}: PersistentVolumeClaim {namespace}/{name} is being deleted"
        )
    return pvc.spec


def volume_requirements(
    meta: ObjectMeta, spec: PodSpec, index: VolumeIndex, *, namespace: str
) -> tuple[Requirements, ...]:
    """The pod's volume topology as alternatives: each volume's terms are ORed, volumes ANDed.

    A claim that does not resolve (missing or deleting PVC, missing PV or StorageClass) or that
    waits for an Immediate-binding provisioner is an error: Karpenter skips such pods until
    their storage is settled, since where it lands decides where the pod may run.
    """
    per_volume: list[list[Requirements]] = []
    for i, vol in enumerate(spec.volumes):
        where = f"spec.volumes[{i}]" + (
            ".persistentVolumeClaim.claimName" if vol.persistent_volume_claim else ".ephemeral"
        )
        claim = _claim_spec(meta, vol, index, namespace=namespace, where=where)
        if claim is None:
            continue
        pv: PersistentVolume | None = None
        sc: StorageClass | None = None
        if claim.volume_name:
            pv = index.volumes.get(claim.volume_name)
            if pv is None:
                raise TranslationError(f"{where}: PersistentVolume {claim.volume_name} not found")
        elif claim.storage_class_name:
            sc = index.classes.get(claim.storage_class_name)
            if sc is None:
                msg = f"{where}: StorageClass {claim.storage_class_name} not found"
                raise TranslationError(msg)
            if sc.volume_binding_mode != WAIT_FOR_FIRST_CONSUMER:
                msg = (
                    f"{where}: claim is unbound and StorageClass {sc.metadata.name} binds"
                    " Immediately; waiting for its volume"
                )
                raise TranslationError(msg)
        alts = _volume_alternatives(pv, sc, field=where)
        if alts is not None:
            per_volume.append(alts)
    if not per_volume:
        return ()
    combined = []
    for combo in itertools.product(*per_volume):
        merged = combo[0]
        for reqs in combo[1:]:
            merged = merged.merge(reqs)
        combined.append(merged)
    return tuple(combined)


def owner_key(meta: ObjectMeta, *, namespace: str) -> str | None:
    """``group/Kind/namespace/name`` of the controlling owner (``core`` for the core group)."""
    for ref in meta.owner_references:
        if ref.controller:
            group = ref.api_version.rpartition("/")[0] or "core"
            return f"{group}/{ref.kind}/{namespace}/{ref.name}"
    return None


def pod_view(
    meta: ObjectMeta,
    spec: PodSpec,
    *,
    uid: str,
    creation: int = 0,
    volumes: VolumeIndex | None = None,
) -> cp.Pod:
    """The core view of a pod (or a DaemonSet's pod template); raises TranslationError."""
    namespace = meta.namespace or "default"
    pod_labels = dict(meta.labels)
    affinity = spec.affinity
    node_aff = affinity.node_affinity if affinity else None
    pod_aff = affinity.pod_affinity if affinity else None
    anti = affinity.pod_anti_affinity if affinity else None
    required = node_aff.required_during_scheduling_ignored_during_execution if node_aff else None
    required_terms = tuple(
        node_selector_term(t, field=f"spec.affinity.nodeAffinity.required.nodeSelectorTerms[{i}]")
        for i, t in enumerate(required.node_selector_terms if required else ())
    )
    preferred = tuple(
        cp.PreferredSchedulingTerm(
            p.weight,
            node_selector_term(p.preference, field=f"spec.affinity.nodeAffinity.preferred[{i}]"),
        )
        for i, p in enumerate(
            node_aff.preferred_during_scheduling_ignored_during_execution if node_aff else ()
        )
    )
    inits = spec.init_containers
    return cp.Pod(
        uid=cp.PodUID(uid),
        namespace=namespace,
        name=meta.name or "",
        labels=pod_labels,
        owner=owner_key(meta, namespace=namespace),
        containers=tuple(
            _container(c, field=f"spec.containers[{i}]", init=False)
            for i, c in enumerate(spec.containers)
        ),
        init_containers=tuple(
            _container(c, field=f"spec.initContainers[{i}]", init=True) for i, c in enumerate(inits)
        ),
        overhead=resources_of(spec.overhead, field="spec.overhead"),
        node_selector=dict(spec.node_selector),
        required_node_affinity=required_terms,
        preferred_node_affinity=preferred,
        tolerations=tuple(toleration(t) for t in spec.tolerations),
        topology_spread=tuple(
            _spread(c, field=f"spec.topologySpreadConstraints[{i}]")
            for i, c in enumerate(spec.topology_spread_constraints)
        ),
        pod_affinity=_affinity_terms(
            pod_aff.required_during_scheduling_ignored_during_execution if pod_aff else (),
            field="spec.affinity.podAffinity.required",
            pod_labels=pod_labels,
        ),
        preferred_pod_affinity=_weighted(
            pod_aff, field="spec.affinity.podAffinity.preferred", pod_labels=pod_labels
        ),
        pod_anti_affinity=_affinity_terms(
            anti.required_during_scheduling_ignored_during_execution if anti else (),
            field="spec.affinity.podAntiAffinity.required",
            pod_labels=pod_labels,
        ),
        preferred_pod_anti_affinity=_weighted(
            anti, field="spec.affinity.podAntiAffinity.preferred", pod_labels=pod_labels
        ),
        host_ports=tuple(
            _host_ports(spec.containers, field="spec.containers")
            + _host_ports(inits, field="spec.initContainers", sidecars_only=True)
        ),
        volume_requirements=(
            volume_requirements(meta, spec, volumes, namespace=namespace) if volumes else ()
        ),
        priority=spec.priority or 0,
        creation=creation,
    )


def _weighted(
    aff: PodAffinity | None, *, field: str, pod_labels: Mapping[str, str]
) -> tuple[cp.WeightedPodAffinityTerm, ...]:
    terms = aff.preferred_during_scheduling_ignored_during_execution if aff else ()
    return tuple(
        cp.WeightedPodAffinityTerm(
            w.weight,
            _affinity_term(w.pod_affinity_term, field=f"{field}[{i}]", pod_labels=pod_labels),
        )
        for i, w in enumerate(terms)
    )
