"""Topology: spread constraints and pod (anti-)affinity, counted per domain.

Pure and built up front: every group (a spread constraint or an affinity term, shared by all pods
that carry the same one) is created from the pending pods and the snapshot's existing pods before
the solver starts, and is then only counted into — unlike Karpenter's topology, which lists pods
through the API client while it builds. Any topology key works: hostname (each new NodeClaim is
its own domain), zone, capacity type or custom labels (domains from NodePools, instance types and
existing nodes). Existing pods' required anti-affinity terms are kept too, so that an incoming pod
they select avoids their domains.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import Offering
from karpy.core.pods import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from karpy.core.requirements import Requirement, Requirements
from karpy.core.scheduling.pool import PoolIndex
from karpy.core.scheduling.preferences import Shape
from karpy.core.snapshot import ClusterSnapshot
from karpy.core.taints import Taint, untolerated

HOSTNAME = wk.LABEL_HOSTNAME


class GroupKind(enum.StrEnum):
    """What a group constrains."""

    SPREAD = "spread"
    AFFINITY = "affinity"
    ANTI_AFFINITY = "anti-affinity"


@attrs.frozen(cache_hash=True)
class GroupKey:
    """Identity of a group: pods with equal constraints share their counts."""

    kind: GroupKind
    key: str
    selector: LabelSelector
    namespaces: frozenset[str] | None
    max_skew: int = 0
    min_domains: int | None = None
    honor_affinity: bool = True
    honor_taints: bool = False


@attrs.define
class Group:
    """Counts of selected pods (and, for anti-affinity, of the term's owners) per domain."""

    id: GroupKey
    counts: dict[str, int] = attrs.field(factory=dict)
    owners: dict[str, int] = attrs.field(factory=dict)
    total: int = 0

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Does this group's selector (and namespace set) pick a pod?"""
        ns = self.id.namespaces
        return (ns is None or namespace in ns) and self.id.selector.matches(labels)


@attrs.frozen
class Rule:
    """One check a shape must pass: ``role`` is own-spread/affinity/anti or inverse."""

    role: str
    group: Group = attrs.field(eq=False)


@attrs.frozen
class TopologyReject:
    """Why a bin fails a shape's topology; ``permanent`` when it can never pass again."""

    kind: str
    key: str
    detail: str
    permanent: bool


@attrs.frozen
class ShapeTopology:
    """Everything topology needs about one shape, computed once."""

    rules: tuple[Rule, ...]
    members: tuple[Group, ...]
    owned_anti: tuple[Group, ...]
    keys: tuple[str, ...]
    spread_domains: Mapping[GroupKey, tuple[str, ...]]
    self_match: frozenset[GroupKey]
    touches_hostname: bool = False

    @property
    def empty(self) -> bool:
        """True when the shape neither is constrained nor counts anywhere."""
        return not self.rules and not self.members and not self.owned_anti


@attrs.frozen
class DomainSource:
    """Where a domain value comes from (a NodePool or a node), with the taints found there."""

    value: str
    taints: tuple[Taint, ...]


def _namespaces(
    term: PodAffinityTerm, pod_namespace: str, namespaces: Mapping[str, Iterable[tuple[str, str]]]
) -> frozenset[str] | None:
    if term.namespace_selector is not None:
        if not term.namespace_selector.requirements:
            return None
        picked = {
            ns for ns, lbls in namespaces.items() if term.namespace_selector.matches(dict(lbls))
        }
        return frozenset(picked | set(term.namespaces))
    return term.namespaces or frozenset({pod_namespace})


def spread_selector(spread: TopologySpreadConstraint, labels: Mapping[str, str]) -> LabelSelector:
    """The selector with ``matchLabelKeys`` resolved against the pod's own labels."""
    extra = [
        Requirement(k, False, frozenset({labels[k]}))
        for k in spread.match_label_keys
        if k in labels
    ]
    if not extra:
        return spread.selector
    return LabelSelector(spread.selector.requirements.add(*extra))


class Topology:
    """All groups and their counts; the solver's only mutable topology state."""

    def __init__(
        self,
        *,
        universe: Mapping[str, tuple[DomainSource, ...]],
        namespaces: Mapping[str, Iterable[tuple[str, str]]],
    ) -> None:
        self._groups: dict[GroupKey, Group] = {}
        self._universe = universe
        self._namespaces = namespaces
        self._shape_cache: dict[Shape, ShapeTopology] = {}
        self._universe_values: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ building
    def group(self, key: GroupKey) -> Group:
        """The group for ``key``, created empty on first use."""
        found = self._groups.get(key)
        if found is None:
            found = Group(key)
            self._groups[key] = found
        return found

    def _spread_key(self, spread: TopologySpreadConstraint, shape: Shape) -> GroupKey:
        return GroupKey(
            GroupKind.SPREAD,
            spread.topology_key,
            spread_selector(spread, dict(shape.labels)),
            frozenset({shape.namespace}),
            spread.max_skew,
            spread.min_domains,
            spread.node_affinity_policy == "Honor",
            spread.node_taints_policy == "Honor",
        )

    def _term_key(self, kind: GroupKind, term: PodAffinityTerm, namespace: str) -> GroupKey:
        return GroupKey(
            kind, term.topology_key, term.selector, _namespaces(term, namespace, self._namespaces)
        )

    def register(self, shape: Shape) -> None:
        """Create the groups a pending shape constrains itself with."""
        for spread in shape.spreads:
            self.group(self._spread_key(spread, shape))
        for term in shape.affinity:
            self.group(self._term_key(GroupKind.AFFINITY, term, shape.namespace))
        for term in shape.anti_affinity:
            self.group(self._term_key(GroupKind.ANTI_AFFINITY, term, shape.namespace))

    def register_existing(self, pod: Pod) -> None:
        """Create the groups of an existing pod's required anti-affinity terms, so that pending
        pods they select keep away (Karpenter's ForPodsWithAntiAffinity)."""
        for term in pod.pod_anti_affinity:
            self.group(self._term_key(GroupKind.ANTI_AFFINITY, term, pod.namespace))

    def seed(self, pod: Pod, node_labels: Mapping[str, str]) -> None:
        """Count an existing pod on an existing node (after every group is registered)."""
        if not self._groups:
            return  # nothing pending is constrained by what runs where (the common case)
        labels = pod.label_map()
        for grp in self._groups.values():
            domain = node_labels.get(grp.id.key)
            if domain is None:
                continue
            if grp.selects(pod.namespace, labels):
                grp.counts[domain] = grp.counts.get(domain, 0) + 1
                grp.total += 1
        for term in pod.pod_anti_affinity:
            grp = self._groups[self._term_key(GroupKind.ANTI_AFFINITY, term, pod.namespace)]
            domain = node_labels.get(term.topology_key)
            if domain is not None:
                grp.owners[domain] = grp.owners.get(domain, 0) + 1

    # ------------------------------------------------------------------ per shape
    def for_shape(self, shape: Shape) -> ShapeTopology:
        """The rules, memberships and candidate domains of ``shape`` (cached)."""
        cached = self._shape_cache.get(shape)
        if cached is not None:
            return cached
        labels = dict(shape.labels)
        rules: list[Rule] = []
        spread_domains: dict[GroupKey, tuple[str, ...]] = {}
        self_match: set[GroupKey] = set()
        for spread in shape.spreads:
            grp = self.group(self._spread_key(spread, shape))
            rules.append(Rule("spread", grp))
            spread_domains[grp.id] = self._eligible_domains(grp.id, shape)
        for term in shape.affinity:
            grp = self.group(self._term_key(GroupKind.AFFINITY, term, shape.namespace))
            rules.append(Rule("affinity", grp))
            if grp.selects(shape.namespace, labels):
                self_match.add(grp.id)
        owned: list[Group] = []
        for i, term in enumerate(shape.anti_affinity):
            grp = self.group(self._term_key(GroupKind.ANTI_AFFINITY, term, shape.namespace))
            rules.append(Rule("anti-affinity", grp))
            # Only required terms keep later pods away (kube-scheduler ignores others' preferences).
            if i < shape.required_anti_affinity:
                owned.append(grp)
        members: list[Group] = []
        # Groups are created in a deterministic order (pending classes in queue order, then
        # existing pods by node name), so insertion order is stable across runs.
        for gkey, grp in self._groups.items():
            if grp.selects(shape.namespace, labels):
                members.append(grp)
                if gkey.kind is GroupKind.ANTI_AFFINITY:
                    rules.append(Rule("inverse-anti-affinity", grp))
        keys = {r.group.id.key for r in rules} | {g.id.key for g in members}
        keys |= {g.id.key for g in owned}
        touches_hostname = HOSTNAME in keys
        keys.discard(HOSTNAME)
        result = ShapeTopology(
            rules=tuple(rules),
            members=tuple(members),
            owned_anti=tuple(owned),
            keys=tuple(sorted(keys)),
            spread_domains=spread_domains,
            self_match=frozenset(self_match),
            touches_hostname=touches_hostname,
        )
        self._shape_cache[shape] = result
        return result

    def universe(self, key: str) -> tuple[str, ...]:
        """Every known domain of ``key`` (sorted)."""
        found = self._universe_values.get(key)
        if found is None:
            found = tuple(sorted({s.value for s in self._universe.get(key, ())}))
            self._universe_values[key] = found
        return found

    def _eligible_domains(self, gkey: GroupKey, shape: Shape) -> tuple[str, ...]:
        own = shape.requirements.get(gkey.key)
        out: set[str] = set()
        for source in self._universe.get(gkey.key, ()):
            if gkey.honor_affinity and own is not None and not own.has(source.value):
                continue
            if gkey.honor_taints and untolerated(source.taints, shape.tolerations) is not None:
                continue
            out.add(source.value)
        return tuple(sorted(out))

    # ------------------------------------------------------------------ decisions
    def admit(
        self,
        st: ShapeTopology,
        *,
        hostname: str,
        fixed: Mapping[str, str] | None,
        requirements: Requirements,
    ) -> dict[str, list[str]] | TopologyReject:
        """Check ``st`` against one bin.

        ``fixed`` holds an existing node's labels (domains known); for a NodeClaim it is None and
        undecided keys get an ordered list of candidate domains (best first) to pin one of.
        Returns ``{key: candidates}`` (a single-element list when the domain is known); keys the
        bin will never carry a label for are left out.
        """
        choices: dict[str, list[str] | None] = {}
        for key in st.keys:
            if fixed is not None:
                value = fixed.get(key)
                choices[key] = None if value is None else [value]
                continue
            single = requirements.single_value(key)
            if single is not None:
                choices[key] = [single]
                continue
            req = requirements.get(key)
            known = self.universe(key)
            if not known and (req is None or req.allows_absent()):
                choices[key] = None  # no NodePool, instance type or node defines this label
                continue
            choices[key] = [d for d in known if req is None or req.has(d)]
        for rule in st.rules:
            reject = self._apply(rule, st, hostname, choices)
            if reject is not None:
                return reject
        return {k: v for k, v in choices.items() if v is not None}

    def _apply(
        self,
        rule: Rule,
        st: ShapeTopology,
        hostname: str,
        choices: dict[str, list[str] | None],
    ) -> TopologyReject | None:
        grp = rule.group
        key = grp.id.key
        if key == HOSTNAME:
            return self._apply_hostname(rule, st, hostname)
        cands = choices[key]
        if cands is None:
            # The node will not carry the label: spread and affinity cannot count it, while
            # anti-affinity is trivially met (Kubernetes' rule for nodes without the key).
            if rule.role in ("spread", "affinity"):
                return TopologyReject(rule.role, key, f"no {key} label on the node", True)
            return None
        if rule.role == "spread":
            domains = st.spread_domains[grp.id]
            low = self._min_count(grp, domains)
            allowed = set(domains)
            kept = [
                d
                for d in cands
                if d in allowed and grp.counts.get(d, 0) + 1 - low <= grp.id.max_skew
            ]
            kept.sort(key=lambda d: (grp.counts.get(d, 0), d))
            if not kept:
                return TopologyReject(
                    "spread", key, f"maxSkew {grp.id.max_skew} would be exceeded", False
                )
        elif rule.role == "affinity":
            kept = [d for d in cands if grp.counts.get(d, 0) > 0]
            kept.sort(key=lambda d: (-grp.counts.get(d, 0), d))
            if not kept and grp.total == 0 and grp.id in st.self_match:
                kept = list(cands)
            if not kept:
                return TopologyReject("affinity", key, "no matching pod in domain", False)
        elif rule.role == "anti-affinity":
            kept = [d for d in cands if grp.counts.get(d, 0) == 0]
            if not kept:
                return TopologyReject("anti-affinity", key, "a matching pod is in domain", True)
        else:
            kept = [d for d in cands if grp.owners.get(d, 0) == 0]
            if not kept:
                return TopologyReject(
                    "inverse-anti-affinity", key, "an existing pod's anti-affinity", True
                )
        choices[key] = kept
        return None

    def _apply_hostname(
        self, rule: Rule, st: ShapeTopology, hostname: str
    ) -> TopologyReject | None:
        grp = rule.group
        if rule.role == "spread":
            if grp.counts.get(hostname, 0) + 1 > grp.id.max_skew:
                detail = f"maxSkew {grp.id.max_skew} per node reached"
                return TopologyReject("spread", HOSTNAME, detail, True)
        elif rule.role == "affinity":
            if grp.counts.get(hostname, 0) == 0 and not (
                grp.total == 0 and grp.id in st.self_match
            ):
                return TopologyReject("affinity", HOSTNAME, "no matching pod on node", False)
        elif rule.role == "anti-affinity":
            if grp.counts.get(hostname, 0):
                return TopologyReject("anti-affinity", HOSTNAME, "a matching pod is on node", True)
        elif grp.owners.get(hostname, 0):
            return TopologyReject(
                "inverse-anti-affinity", HOSTNAME, "an existing pod's anti-affinity", True
            )
        return None

    @staticmethod
    def _min_count(grp: Group, domains: tuple[str, ...]) -> int:
        if not domains:
            return 0
        if grp.id.min_domains is not None and len(domains) < grp.id.min_domains:
            return 0
        return min(grp.counts.get(d, 0) for d in domains)

    def record(
        self, st: ShapeTopology, *, hostname: str, domains: Mapping[str, str], weight: int = 1
    ) -> None:
        """Count one placed pod of shape ``st`` in its domains (``weight=-1`` takes it out
        again, while the improvement step considers moving it)."""
        for grp in st.members:
            key = grp.id.key
            domain = hostname if key == HOSTNAME else domains.get(key)
            if domain is not None:
                grp.counts[domain] = grp.counts.get(domain, 0) + weight
                grp.total += weight
        for grp in st.owned_anti:
            key = grp.id.key
            domain = hostname if key == HOSTNAME else domains.get(key)
            if domain is not None:
                grp.owners[domain] = grp.owners.get(domain, 0) + weight


def build_universe(
    sources: Iterable[tuple[str, str, tuple[Taint, ...]]],
) -> dict[str, tuple[DomainSource, ...]]:
    """Group ``(key, value, taints)`` triples into the per-key domain universe."""
    out: dict[str, set[DomainSource]] = {}
    for key, value, taints in sources:
        out.setdefault(key, set()).add(DomainSource(value, taints))
    return {k: tuple(sorted(v, key=lambda s: (s.value, repr(s.taints)))) for k, v in out.items()}


_OFFERING_KEYS = frozenset({wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE})


def domain_universe(
    snapshot: ClusterSnapshot, pools: Iterable[PoolIndex]
) -> dict[str, tuple[DomainSource, ...]]:
    """Every domain a node could be in, per key, with the taints found where it comes from.

    Zones and capacity types come from the offerings each NodePool can actually buy (so a zone
    where a type is only sold as spot does not count for an on-demand NodePool); other keys from
    instance-type labels and NodePool requirements; and every key from existing nodes' labels.
    """
    triples: set[tuple[str, str, tuple[Taint, ...]]] = set()
    for index in pools:
        taints = index.pool.taints
        labels: set[tuple[str, str]] = set()
        offered: set[tuple[str, str]] = set()
        for it in index.types:
            for req in it.requirements:
                if not req.complement and req.key not in _OFFERING_KEYS:
                    labels.update((req.key, v) for v in req.values)
            offered.update((o.zone, o.capacity_type) for o in it.offerings if o.available)
        # Thousands of types share a few dozen label values and (zone, capacity type) pairs:
        # check each distinct one against the template once.
        for key, value in labels:
            tmpl = index.template.get(key)
            if tmpl is None or tmpl.has(value):
                triples.add((key, value, taints))
        for zone, capacity_type in offered:
            if Offering(zone, capacity_type, 0.0).matches(index.template):
                triples.add((wk.LABEL_TOPOLOGY_ZONE, zone, taints))
                triples.add((wk.LABEL_CAPACITY_TYPE, capacity_type, taints))
        for req in index.template:
            if not req.complement and req.key not in _OFFERING_KEYS | {wk.LABEL_INSTANCE_TYPE}:
                triples.update((req.key, v, taints) for v in req.values)
    for node in snapshot.nodes:
        for key, value in node.label_map().items():
            if key != HOSTNAME:
                triples.add((key, value, node.taints))
    return build_universe(triples)
