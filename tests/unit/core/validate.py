"""An independent checker of a plan's hard constraints, written without the solver's code paths.

Used by the property tests: whatever the solver decides, these must hold.
"""

from __future__ import annotations

from collections import defaultdict

from karpy.apis.v1 import labels as wk
from karpy.core.pods import Pod
from karpy.core.requirements import Requirement
from karpy.core.resources import Resources
from karpy.core.scheduling import Results
from karpy.core.scheduling.pool import daemon_overhead
from karpy.core.snapshot import NODES_LIMIT, ClusterSnapshot, NodePool
from karpy.core.taints import Effect, untolerated


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
    bins: dict[str, list[Pod]] = defaultdict(list)
    zone_of: dict[str, str | None] = {}
    for claim in results.nodeclaims:
        pool = pools[claim.nodepool]
        assert 0 < len(claim.instance_types) <= max_types
        types = {t.name: t for t in snap.instance_types[claim.nodepool]}
        members = [by_uid[u] for u in claim.pods]
        bins[claim.name] = members
        zone_of[claim.name] = claim.zones[0] if len(claim.zones) == 1 else None
        need = Resources()
        for p in members:
            need = need + p.requests()
        overhead = daemon_overhead(snap.daemonsets, pool.template_requirements(), pool.taints)
        for name in claim.instance_types:
            alloc = types[name].allocatable
            assert (need + overhead).fits(alloc), f"{claim.name}: pods overflow {name}"
        for r in pool.requirements:
            if r.min_values is not None and r.key == wk.LABEL_INSTANCE_TYPE:
                kept = len(claim.instance_types) >= r.min_values
                assert kept or (claim.min_values_relaxed and not strict_min_values), (
                    f"{claim.name} breaks minValues {r.min_values}"
                )
        for p in members:
            hard = tuple(t for t in pool.taints if t.effect != Effect.PREFER_NO_SCHEDULE)
            assert untolerated(hard, p.tolerations) is None, f"{p.key} ignores a taint"
            for key, value in p.node_selector:
                pinned = claim.requirements.single_value(key)
                assert pinned == value, f"{p.key}: {key}={value} not pinned on {claim.name}"
            if p.required_node_affinity:
                assert any(
                    all(_subset(claim.requirements.get(t.key), t) for t in term)
                    for term in p.required_node_affinity
                ), f"{p.key}: required node affinity broken on {claim.name}"
    for node in snap.nodes:
        members = [by_uid[n.pod] for n in results.nominations if n.node == node.name]
        bins[node.name] = list(node.pods) + members
        zone_of[node.name] = node.label_map().get(wk.LABEL_TOPOLOGY_ZONE)
        used = Resources()
        for p in bins[node.name]:
            used = used + p.requests()
        assert used.fits(node.allocatable), f"{node.name} overcommitted"
    _limits(snap, results)
    _topology(bins, zone_of)
    _zone_skew(snap, bins, zone_of)


def _subset(have: Requirement | None, want: Requirement) -> bool:
    if have is None:
        return want.allows_absent()
    if have.complement:
        return want.complement and want.values <= have.values and want.greater_than is None
    return all(want.has(v) for v in have.values)


def _limits(snap: ClusterSnapshot, results: Results) -> None:
    for pool in snap.nodepools:
        if not pool.limits:
            continue
        types = {t.name: t for t in snap.instance_types[pool.name]}
        total: dict[str, int] = defaultdict(int)
        count = 0
        for node in snap.nodes:
            if node.nodepool == pool.name:
                count += 1
                for k, v in node.capacity.items():
                    total[k] += v
        for claim in results.nodeclaims:
            if claim.nodepool != pool.name:
                continue
            count += 1
            for k in pool.limits:
                total[k] += max(types[n].capacity.get_amount(k) for n in claim.instance_types)
        for k, limit in pool.limits.items():
            used = count * 1000 if k == NODES_LIMIT else total[k]
            assert used <= limit, f"nodepool {pool.name} over its {k} limit"


def _topology(bins: dict[str, list[Pod]], zone_of: dict[str, str | None]) -> None:
    everyone = [(b, p) for b, members in bins.items() for p in members]
    for b, p in everyone:
        for term in p.pod_anti_affinity:
            for b2, q in everyone:
                if q is p or not term.selector.matches(q.label_map()):
                    continue
                if term.topology_key == wk.LABEL_HOSTNAME:
                    assert b2 != b, f"{p.key} shares {b} with {q.key} despite anti-affinity"
                elif term.topology_key == wk.LABEL_TOPOLOGY_ZONE and zone_of[b] is not None:
                    assert zone_of[b2] != zone_of[b], f"{p.key} shares a zone with {q.key}"
        for spread in p.topology_spread:
            if spread.when_unsatisfiable != "DoNotSchedule":
                continue
            if spread.topology_key == wk.LABEL_HOSTNAME:
                same = sum(1 for q in bins[b] if spread.selector.matches(q.label_map()))
                assert same <= spread.max_skew, f"hostname spread broken on {b}"
            if spread.topology_key == wk.LABEL_TOPOLOGY_ZONE:
                assert zone_of[b] is not None, f"{p.key} is spread by zone on a zoneless bin"
        for term in p.pod_affinity:
            if term.topology_key == wk.LABEL_TOPOLOGY_ZONE:
                assert zone_of[b] is not None, f"{p.key} has zonal affinity on a zoneless bin"
                assert any(
                    zone_of[b2] == zone_of[b] and term.selector.matches(q.label_map())
                    for b2, q in everyone
                ), f"{p.key}: no pod it is affine to in its zone"


def _zone_skew(
    snap: ClusterSnapshot, bins: dict[str, list[Pod]], zone_of: dict[str, str | None]
) -> None:
    """Zonal DoNotSchedule spread: over every zone a node could be in, max - min <= maxSkew
    (for pods without zone selectors, whose eligible domains are all zones)."""
    zones: set[str] = set()
    for pool in snap.nodepools:
        template = pool.template_requirements()
        for it in snap.instance_types.get(pool.name, ()):
            zones |= {o.zone for o in it.offerings if o.available and o.matches(template)}
    zones |= {z for n in snap.nodes if (z := n.label_map().get(wk.LABEL_TOPOLOGY_ZONE))}
    everyone = [(b, p) for b, members in bins.items() for p in members]
    for _, p in everyone:
        for spread in p.topology_spread:
            if spread.topology_key != wk.LABEL_TOPOLOGY_ZONE or p.node_selector:
                continue
            counts = dict.fromkeys(zones, 0)
            for b2, q in everyone:
                z = zone_of[b2]
                if (
                    z is not None
                    and q.namespace == p.namespace
                    and spread.selector.matches(q.label_map())
                ):
                    counts[z] = counts.get(z, 0) + 1
            skew = max(counts.values()) - min(counts.values())
            assert skew <= spread.max_skew, f"zonal spread of {p.key} has skew {skew}"
