"""An independent checker of a plan's hard constraints, written without the solver's code paths.

Used by the property tests: whatever the solver decides, these must hold. Everything here is
recomputed from the snapshot and the plan with its own small rules — effective requests,
toleration matching, label matching, DaemonSet overhead, domain counting — and never through the
solver's helpers, so a bug shared by a helper and its caller cannot hide.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import LabelSelector, Pod, PodAffinityTerm, PodUID, TopologySpreadConstraint
from karpy.core.requirements import Requirement, Requirements
from karpy.core.scheduling import NodeClaimPlan, Results
from karpy.core.scheduling.cost import COST, dearest_milli, node_milli
from karpy.core.snapshot import NODES_LIMIT, ClusterSnapshot, Node, NodePool
from karpy.core.taints import Effect, Taint, Toleration, TolerationOperator
from karpy_aws.apis import labels as awslabels

HOSTNAME = wk.LABEL_HOSTNAME
ZONE = wk.LABEL_TOPOLOGY_ZONE
CAPACITY_TYPE = wk.LABEL_CAPACITY_TYPE
INSTANCE_TYPE = wk.LABEL_INSTANCE_TYPE
HARD_EFFECTS = frozenset({Effect.NO_SCHEDULE, Effect.NO_EXECUTE})
# Labels a launched node gets from its instance type or the cloud even when no requirement names
# them; a DaemonSet selecting one of them may run there.
DEFINED_LATER = frozenset(wk.WELL_KNOWN_LABELS | awslabels.AWS_WELL_KNOWN_LABELS | {HOSTNAME})


# --------------------------------------------------------------------------- small rules
def _tolerates(tol: Toleration, taint: Taint) -> bool:
    if tol.effect is not None and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    return tol.operator is TolerationOperator.EXISTS or tol.value == taint.value


def _blocking_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration covers (PreferNoSchedule is soft)."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect in HARD_EFFECTS and not any(_tolerates(t, taint) for t in tols):
            return taint
    return None


def _admits(req: Requirement, value: str) -> bool:
    """Does a label ``value`` satisfy ``req``?"""
    ok = (value not in req.values) if req.complement else (value in req.values)
    if ok and (req.greater_than is not None or req.less_than is not None):
        try:
            number = int(value)
        except ValueError:
            return False
        if req.greater_than is not None and number <= req.greater_than:
            return False
        if req.less_than is not None and number >= req.less_than:
            return False
    return ok


def _absent_ok(req: Requirement) -> bool:
    """Does a node *without* the label satisfy ``req`` (NotIn, DoesNotExist)?"""
    bounded = req.greater_than is not None or req.less_than is not None
    return (req.complement and bool(req.values) and not bounded) or (
        not req.complement and not req.values
    )


def _label_ok(req: Requirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    return _absent_ok(req) if value is None else _admits(req, value)


def _selector_ok(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    return not selector.nothing and all(_label_ok(r, labels) for r in selector.requirements)


def _subset(have: Requirement | None, want: Requirement) -> bool:
    """Is every value ``have`` allows (a NodeClaim's requirement) also allowed by ``want``?"""
    if have is None:
        return _absent_ok(want)
    if not have.complement:
        return all(_admits(want, v) for v in have.values) and (
            bool(have.values) or _absent_ok(want)
        )
    if not want.complement or not want.values <= have.values:
        return False
    if want.greater_than is not None and (
        have.greater_than is None or have.greater_than < want.greater_than
    ):
        return False
    return want.less_than is None or (
        have.less_than is not None and have.less_than <= want.less_than
    )


def _selector_reqs(pod: Pod) -> list[Requirement]:
    return [Requirement(k, False, frozenset({v})) for k, v in pod.node_selector]


def _requests(pod: Pod) -> dict[str, int]:
    """Effective requests (KEP-753): max(containers + sidecars, each init + sidecars before it),
    plus overhead and one pod slot."""
    sidecars: dict[str, int] = defaultdict(int)
    peak: dict[str, int] = defaultdict(int)
    for init in pod.init_containers:
        step = dict(sidecars)
        for name, amount in init.requests.items():
            step[name] = step.get(name, 0) + amount
            if init.restart_always:
                sidecars[name] += amount
        for name, amount in step.items():
            peak[name] = max(peak[name], amount)
    total: dict[str, int] = defaultdict(int, sidecars)
    for container in pod.containers:
        for name, amount in container.requests.items():
            total[name] += amount
    out = {n: max(total.get(n, 0), peak.get(n, 0)) for n in set(total) | set(peak)}
    for name, amount in pod.overhead.items():
        out[name] = out.get(name, 0) + amount
    out["pods"] = out.get("pods", 0) + 1000
    return out


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + amount


def _overflow(need: Mapping[str, int], allocatable: Mapping[str, int]) -> list[str]:
    return sorted(n for n, a in need.items() if a > allocatable.get(n, 0))


def _term_selects(
    term: PodAffinityTerm,
    owner: Pod,
    other: Pod,
    namespaces: Mapping[str, Iterable[tuple[str, str]]],
) -> bool:
    """Does ``owner``'s (anti-)affinity term pick ``other`` (namespaces, then labels)?"""
    if term.namespace_selector is not None:
        sel = term.namespace_selector
        picked = set(term.namespaces)
        if not sel.requirements:
            picked = set(namespaces) | {other.namespace}
        else:
            picked |= {ns for ns, lbls in namespaces.items() if _selector_ok(sel, dict(lbls))}
    else:
        picked = set(term.namespaces) or {owner.namespace}
    return other.namespace in picked and _selector_ok(term.selector, other.label_map())


def _type_compatible(it: InstanceType, reqs: Requirements) -> str | None:
    """A key on which ``reqs`` rules the type out (keys both define), else None."""
    mine = {r.key: r for r in reqs}
    for tr in it.requirements:
        want = mine.get(tr.key)
        if want is None or tr.complement:
            continue
        if not any(_admits(want, v) for v in tr.values) and not (
            not tr.values and _absent_ok(want)
        ):
            return tr.key
    return None


def _offering_ok(reqs: Requirements, zone: str, capacity_type: str) -> bool:
    z, ct = reqs.get(ZONE), reqs.get(CAPACITY_TYPE)
    return (z is None or _admits(z, zone)) and (ct is None or _admits(ct, capacity_type))


# --------------------------------------------------------------------------- bins
@attrs.define
class _Bin:
    """A NodeClaim or node in the plan, with every pod it ends with."""

    name: str
    pods: list[Pod]
    claim: NodeClaimPlan | None = None
    types: tuple[InstanceType, ...] = ()
    labels: dict[str, str] = attrs.field(factory=dict)

    def domains(self, key: str) -> frozenset[str]:
        """Values ``key`` may take on this bin (empty: the node will not carry the label)."""
        if key == HOSTNAME:
            return frozenset({self.name})
        claim = self.claim
        if claim is None:
            value = self.labels.get(key)
            return frozenset() if value is None else frozenset({value})
        if key == ZONE:
            return frozenset(claim.zones)
        if key == CAPACITY_TYPE:
            return frozenset(claim.capacity_types)
        if key == INSTANCE_TYPE:
            return frozenset(claim.instance_types)
        req = claim.requirements.get(key)
        if req is not None and not req.complement:
            return req.values
        values: set[str] = set()
        for it in self.types:
            tr = it.requirements.get(key)
            if tr is not None and not tr.complement:
                values |= {v for v in tr.values if req is None or _admits(req, v)}
        return frozenset(values)


def check(
    snap: ClusterSnapshot,
    pending: list[Pod],
    results: Results,
    max_types: int,
    *,
    strict_min_values: bool = True,
) -> None:
    """Assert every invariant; the message says which one broke."""
    by_uid = {p.uid: p for p in pending}
    placed = results.placed()
    unplaced = [e.uid for e in results.unplaced]
    assert len(unplaced) == len(set(unplaced)), "a pod is listed unplaced twice"
    assert not set(placed) & set(unplaced), "a pod is both placed and unplaced"
    assert set(placed) | set(unplaced) == set(by_uid), "a pod was lost or invented"
    pools: dict[str, NodePool] = {p.name: p for p in snap.nodepools}
    bins: list[_Bin] = []
    for claim in results.nodeclaims:
        pool = pools[claim.nodepool]
        catalog = {t.name: t for t in snap.instance_types[claim.nodepool]}
        assert all(n in catalog for n in claim.instance_types), f"{claim.name}: unknown type"
        types = tuple(catalog[n] for n in claim.instance_types)
        members = [by_uid[u] for u in claim.pods]
        bins.append(_Bin(claim.name, members, claim, types))
        _claim(snap, pool, claim, types, members, max_types, strict_min_values)
    nominated: dict[str, list[Pod]] = defaultdict(list)
    for nomination in results.nominations:
        nominated[nomination.node].append(by_uid[nomination.pod])
    nodes = {n.name: n for n in snap.nodes}
    assert set(nominated) <= set(nodes), "a pod is nominated onto a node that does not exist"
    for node in snap.nodes:
        _nominations(snap, node, nominated[node.name])
        bins.append(_Bin(node.name, [*node.pods, *nominated[node.name]], labels=node.label_map()))
    pending_uids = frozenset(placed)
    _host_ports(bins, pending_uids)
    _limits(snap, results)
    _anti_affinity(snap, bins, pending_uids)
    _affinity(snap, bins, pending_uids)
    _spread(snap, bins, pending_uids)


# --------------------------------------------------------------------------- NodeClaims
def _claim(
    snap: ClusterSnapshot,
    pool: NodePool,
    claim: NodeClaimPlan,
    types: tuple[InstanceType, ...],
    members: list[Pod],
    max_types: int,
    strict_min_values: bool,
) -> None:
    name = claim.name
    assert 0 < len(types) <= max_types, f"{name}: {len(types)} instance types"
    assert len(set(claim.instance_types)) == len(types), f"{name}: a type is listed twice"
    reqs = claim.requirements
    template = [
        *pool.requirements,
        *(Requirement(k, False, frozenset({v})) for k, v in pool.labels),
        Requirement(wk.LABEL_NODEPOOL, False, frozenset({pool.name})),
    ]
    for want in template:
        assert _subset(reqs.get(want.key), want), f"{name} breaks its nodepool's {want.key}"
    assert claim.zones, f"{name}: no zone"
    assert claim.capacity_types, f"{name}: no capacity type"
    for zone in claim.zones:
        for ct in claim.capacity_types:
            assert _offering_ok(reqs, zone, ct), f"{name}: lists {zone}/{ct} it does not allow"
    for it in types:
        bad = _type_compatible(it, reqs)
        assert bad is None, f"{name}: {it.name} does not meet the claim's {bad}"
        offers = [
            o
            for o in it.offerings
            if o.available
            and _offering_ok(reqs, o.zone, o.capacity_type)
            and o.zone in claim.zones
            and o.capacity_type in claim.capacity_types
        ]
        assert offers, f"{name}: {it.name} has no available offering the claim allows"
    for zone in claim.zones:
        assert any(
            o.available and o.zone == zone and o.capacity_type in claim.capacity_types
            for it in types
            for o in it.offerings
        ), f"{name}: zone {zone} is listed but no listed type is sold there"
    for ct in claim.capacity_types:
        assert any(
            o.available and o.capacity_type == ct and o.zone in claim.zones
            for it in types
            for o in it.offerings
        ), f"{name}: capacity type {ct} is listed but no listed type is sold so"
    price = min(
        o.price
        for o in types[0].offerings
        if o.available and o.zone in claim.zones and o.capacity_type in claim.capacity_types
    )
    assert abs(claim.price - price) < 1e-9, f"{name}: price is not its first type's cheapest"
    _min_values(pool, claim, types, strict_min_values)
    need: dict[str, int] = {}
    for p in members:
        _add(need, _requests(p))
    for it in types:
        total = dict(need)
        for ds in snap.daemonsets:
            if _daemon_may_run(ds.pod, pool, reqs, it):
                _add(total, _requests(ds.pod))
        over = _overflow(total, it.allocatable)
        assert not over, f"{name}: pods and daemonsets overflow {it.name} in {over}"
    for p in members:
        taint = _blocking_taint(pool.taints, p.tolerations)
        assert taint is None, f"{p.key} ignores taint {taint} on {name}"
        for want in _selector_reqs(p):
            have = reqs.get(want.key)
            pinned = have is not None and not have.complement and have.values == want.values
            assert pinned, f"{p.key}: nodeSelector {want.key} not pinned on {name}"

        if p.required_node_affinity:
            assert any(
                all(_subset(reqs.get(t.key), t) for t in term) for term in p.required_node_affinity
            ), f"{p.key}: required node affinity broken on {name}"
        if p.volume_requirements:
            assert any(
                all(_subset(reqs.get(t.key), t) for t in alt) for alt in p.volume_requirements
            ), f"{p.key}: volume topology broken on {name}"


def _min_values(
    pool: NodePool, claim: NodeClaimPlan, types: tuple[InstanceType, ...], strict: bool
) -> None:
    for r in pool.requirements:
        if r.min_values is None:
            continue
        values: set[str] = set()
        for it in types:
            if r.key == INSTANCE_TYPE:
                values.add(it.name)
            elif (tr := it.requirements.get(r.key)) is not None and not tr.complement:
                values |= tr.values
        kept = len(values) >= r.min_values
        assert kept or (claim.min_values_relaxed and not strict), (
            f"{claim.name} breaks minValues {r.min_values} on {r.key}"
        )


def _daemon_may_run(pod: Pod, pool: NodePool, reqs: Requirements, it: InstanceType) -> bool:
    """Could this DaemonSet's pod run on a node of this claim launched as ``it``? Unknown label
    values count as a yes, so the overhead is never underestimated."""
    if _blocking_taint(pool.taints, pod.tolerations) is not None:
        return False

    def possible(req: Requirement) -> bool:
        have = reqs.get(req.key)
        offered = it.requirements.get(req.key)
        values: set[str] | None = None
        if offered is not None and not offered.complement:
            values = set(offered.values)
        if have is not None and not have.complement:
            values = set(have.values) if values is None else values & have.values
        if values is not None and have is not None:
            values = {v for v in values if _admits(have, v)}
        if values is None:
            if have is not None and not req.complement:
                return any(_admits(have, v) for v in req.values) or (
                    _absent_ok(have) and _absent_ok(req)
                )
            if have is None and req.key not in DEFINED_LATER:
                return _absent_ok(req)
            return True
        if not values:
            return _absent_ok(req)
        return any(_admits(req, v) for v in values)

    if not all(possible(r) for r in _selector_reqs(pod)):
        return False
    terms = pod.required_node_affinity or (Requirements(),)
    return any(all(possible(r) for r in term) for term in terms)


# --------------------------------------------------------------------------- existing nodes
def _nominations(snap: ClusterSnapshot, node: Node, members: list[Pod]) -> None:
    labels = node.label_map()
    taints: tuple[Taint, ...] = node.taints
    if not node.initialized:
        startup = {t for p in snap.nodepools if p.name == node.nodepool for t in p.startup_taints}
        taints = tuple(
            t for t in taints if t.key not in wk.EPHEMERAL_TAINT_KEYS and t not in startup
        )
    used: dict[str, int] = {}
    for p in node.pods:
        _add(used, _requests(p))
    for p in members:
        _add(used, _requests(p))
        taint = _blocking_taint(taints, p.tolerations)
        assert taint is None, f"{p.key} nominated onto {node.name} despite taint {taint}"
        for want in _selector_reqs(p):
            assert _label_ok(want, labels), f"{p.key}: nodeSelector {want.key} fails on {node.name}"
        if p.required_node_affinity:
            assert any(
                all(_label_ok(r, labels) for r in term) for term in p.required_node_affinity
            ), f"{p.key}: required node affinity fails on {node.name}"
        if p.volume_requirements:
            assert any(all(_label_ok(r, labels) for r in alt) for alt in p.volume_requirements), (
                f"{p.key}: volume topology fails on {node.name}"
            )
    over = _overflow(used, node.allocatable)
    assert not members or not over, f"{node.name} overcommitted in {over}"


# --------------------------------------------------------------------------- per node and pool
def _host_ports(bins: list[_Bin], pending: frozenset[PodUID]) -> None:
    wildcard = "0.0.0.0"  # noqa: S104 -- the wildcard address, not a bind
    for b in bins:
        taken: list[tuple[Pod, int, str, str]] = []
        for p in b.pods:
            for hp in p.host_ports:
                for q, port, protocol, ip in taken:
                    clash = (
                        port == hp.port
                        and protocol == hp.protocol
                        and (ip == hp.host_ip or wildcard in (ip, hp.host_ip))
                    )
                    if clash and (p.uid in pending or q.uid in pending):
                        raise AssertionError(f"{p.key} and {q.key} both bind {port} on {b.name}")
            taken.extend((p, hp.port, hp.protocol, hp.host_ip) for hp in p.host_ports)


def _limits(snap: ClusterSnapshot, results: Results) -> None:
    for pool in snap.nodepools:
        if not pool.limits:
            continue
        types = {t.name: t for t in snap.instance_types[pool.name]}
        total: dict[str, int] = defaultdict(int)
        count = 0
        template = pool.template_requirements()
        for node in snap.nodes:
            if node.nodepool == pool.name:
                count += 1
                for k, v in node.capacity.items():
                    total[k] += v
                total[COST] += node_milli(node, snap.instance_types[pool.name])
        for claim in results.nodeclaims:
            if claim.nodepool != pool.name:
                continue
            count += 1
            for k in pool.limits:
                if k == COST:  # what the dearest offering it may launch would cost
                    total[k] += max(dearest_milli(types[n], template) for n in claim.instance_types)
                    continue
                total[k] += max(types[n].capacity.get_amount(k) for n in claim.instance_types)
        for k, limit in pool.limits.items():
            used = count * 1000 if k == NODES_LIMIT else total[k]
            assert used <= limit, f"nodepool {pool.name} over its {k} limit"


# --------------------------------------------------------------------------- topology
def _everyone(bins: list[_Bin]) -> list[tuple[_Bin, Pod]]:
    return [(b, p) for b in bins for p in b.pods]


def _anti_affinity(snap: ClusterSnapshot, bins: list[_Bin], pending: frozenset[PodUID]) -> None:
    """Required anti-affinity, both ways: no pod shares any possible domain with a pod its terms
    select (existing pods' terms included)."""
    everyone = _everyone(bins)
    for b, p in everyone:
        for term in p.pod_anti_affinity:
            mine = b.domains(term.topology_key)
            if not mine:
                continue
            for b2, q in everyone:
                if q is p or (p.uid not in pending and q.uid not in pending):
                    continue
                if not _term_selects(term, p, q, snap.namespaces):
                    continue
                shared = mine & b2.domains(term.topology_key)
                assert not shared, (
                    f"{p.key} on {b.name} and {q.key} on {b2.name} may share"
                    f" {term.topology_key}={sorted(shared)} despite anti-affinity"
                )


def _affinity(snap: ClusterSnapshot, bins: list[_Bin], pending: frozenset[PodUID]) -> None:
    """Required pod affinity: a placed pod sits in one known domain with a pod its term selects.

    The first pod of a group that selects itself may go anywhere when nothing else matches; every
    later one must follow, so with no other match the whole group shares a single domain.
    """
    everyone = _everyone(bins)
    for b, p in everyone:
        if p.uid not in pending:
            continue
        for term in p.pod_affinity:
            key = term.topology_key
            mine = b.domains(key)
            assert len(mine) == 1, f"{p.key} has {key} affinity on {b.name} with domains {mine}"
            matched = [(b2, q) for b2, q in everyone if _term_selects(term, p, q, snap.namespaces)]
            carriers = [(b2, q) for b2, q in matched if q.uid in pending and term in q.pod_affinity]
            if len(carriers) == len(matched):
                domains = {d for b2, _ in carriers for d in b2.domains(key)}
                assert p in [q for _, q in matched], f"{p.key}: nothing matches its affinity"
                assert len(domains) == 1, f"{p.key}: self-affine group split over {domains}"
            else:
                assert any(q is not p and b2.domains(key) == mine for b2, q in matched), (
                    f"{p.key}: no pod it is affine to in its {key}"
                )


def _universe(snap: ClusterSnapshot) -> dict[str, list[tuple[str, tuple[Taint, ...]]]]:
    """Every domain per key with the taints of where it comes from (NodePools' usable offerings
    and labels, existing nodes' labels)."""
    out: dict[str, list[tuple[str, tuple[Taint, ...]]]] = defaultdict(list)
    for pool in snap.nodepools:
        template = Requirements(
            [
                *pool.requirements,
                *(Requirement(k, False, frozenset({v})) for k, v in pool.labels),
                Requirement(wk.LABEL_NODEPOOL, False, frozenset({pool.name})),
            ]
        )
        for it in snap.instance_types.get(pool.name, ()):
            if _type_compatible(it, template) is not None:
                continue
            offers = [
                o
                for o in it.offerings
                if o.available and _offering_ok(template, o.zone, o.capacity_type)
            ]
            if not offers:
                continue
            for o in offers:
                out[ZONE].append((o.zone, pool.taints))
                out[CAPACITY_TYPE].append((o.capacity_type, pool.taints))
            for tr in it.requirements:
                if tr.complement or tr.key in (ZONE, CAPACITY_TYPE):
                    continue
                want = template.get(tr.key)
                out[tr.key].extend(
                    (v, pool.taints) for v in tr.values if want is None or _admits(want, v)
                )
        for req in template:
            if not req.complement and req.key not in (ZONE, CAPACITY_TYPE, INSTANCE_TYPE):
                out[req.key].extend((v, pool.taints) for v in req.values)
    for node in snap.nodes:
        for key, value in node.label_map().items():
            out[key].append((value, node.taints))
    return out


def _spread_selects(spread: TopologySpreadConstraint, owner: Pod, other: Pod) -> bool:
    if other.namespace != owner.namespace:
        return False
    labels, mine = other.label_map(), owner.label_map()
    if any(k in mine and labels.get(k) != mine[k] for k in spread.match_label_keys):
        return False
    return _selector_ok(spread.selector, labels)


def _eligible(
    universe: Mapping[str, list[tuple[str, tuple[Taint, ...]]]],
    spread: TopologySpreadConstraint,
    pod: Pod,
) -> set[str] | None:
    """The domains the spread's minimum is taken over; None when it cannot be told."""
    key = spread.topology_key
    own: list[Requirement] = [r for r in _selector_reqs(pod) if r.key == key]
    if spread.node_affinity_policy == "Honor" and pod.required_node_affinity:
        if len(pod.required_node_affinity) > 1:
            return None  # which term the pod was placed under is the solver's business
        own.extend(r for r in pod.required_node_affinity[0] if r.key == key)
    out: set[str] = set()
    for value, taints in universe.get(key, ()):
        if spread.node_affinity_policy == "Honor" and not all(_admits(r, value) for r in own):
            continue
        if spread.node_taints_policy == "Honor" and _blocking_taint(taints, pod.tolerations):
            continue
        out.add(value)
    return out


def _spread(snap: ClusterSnapshot, bins: list[_Bin], pending: frozenset[PodUID]) -> None:
    """DoNotSchedule spread over the placed pods. Counts only grow while the solver places, so
    for the last pod that entered a domain, count(domain) - min(eligible counts) <= maxSkew must
    still hold at the end. Hostname domains are unbounded (a new node can always open), so there
    the count per node is at most maxSkew."""
    universe = _universe(snap)
    everyone = _everyone(bins)
    for b, p in everyone:
        if p.uid not in pending:
            continue
        for spread in p.topology_spread:
            if spread.when_unsatisfiable != "DoNotSchedule":
                continue
            key = spread.topology_key
            if key == HOSTNAME:
                same = sum(1 for q in b.pods if _spread_selects(spread, p, q))
                assert same <= spread.max_skew, f"hostname spread of {p.key} broken on {b.name}"
                continue
            mine = b.domains(key)
            assert len(mine) == 1, f"{p.key} is spread by {key} on {b.name} with domains {mine}"
            eligible = _eligible(universe, spread, p)
            if eligible is None:
                continue
            counts: dict[str, int] = dict.fromkeys(eligible, 0)
            countable = True
            for b2, q in everyone:
                if not _spread_selects(spread, p, q):
                    continue
                where = b2.domains(key)
                if len(where) > 1:
                    countable = False  # a matching pod whose domain is not decided yet
                elif where:
                    (d,) = where
                    counts[d] = counts.get(d, 0) + 1
            if not countable:
                continue
            few = spread.min_domains is not None and len(eligible) < spread.min_domains
            low = 0 if few or not eligible else min(counts[e] for e in eligible)
            (d,) = mine
            skew = counts.get(d, 0) - low
            assert skew <= spread.max_skew, f"{key} spread of {p.key} has skew {skew} in {d}"
