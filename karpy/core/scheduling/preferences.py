"""The preference relaxation ladder: which soft constraints a pod is scheduled under.

Pure: a pod plus a ``Relaxation`` (how far down the ladder it is) gives a ``Shape`` — the hard
constraints the solver checks. Preferences are treated as required at first and dropped one per
failed attempt, in Karpenter's order: another required-node-affinity term, a preferred pod
affinity term, a preferred pod anti-affinity term, the heaviest preferred node-affinity term, a
ScheduleAnyway spread constraint, and finally a blanket PreferNoSchedule toleration.
"""

from __future__ import annotations

import enum

import attrs

from karpy.core.pods import (
    HostPort,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    WhenUnsatisfiable,
)
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.taints import PREFER_NO_SCHEDULE_TOLERATION, Toleration


class MinValuesPolicy(enum.StrEnum):
    """Karpenter's MIN_VALUES_POLICY: minValues are hard, or relaxed as the last resort."""

    STRICT = "Strict"
    BEST_EFFORT = "BestEffort"


class PreferencePolicy(enum.StrEnum):
    """Karpenter's PREFERENCE_POLICY: respect preferences first, or ignore them from the start."""

    RESPECT = "Respect"
    IGNORE = "Ignore"


@attrs.frozen
class Relaxation:
    """How far a pod has been relaxed; each field counts steps of one rung."""

    node_term: int = 0
    pod_affinity_dropped: int = 0
    pod_anti_affinity_dropped: int = 0
    node_preferences_dropped: int = 0
    spreads_dropped: int = 0
    tolerate_prefer_no_schedule: bool = False
    relax_min_values: bool = False


@attrs.frozen(cache_hash=True)
class Shape:
    """The hard constraints one pod is placed under (identical pods share one Shape)."""

    namespace: str
    labels: tuple[tuple[str, str], ...]
    requests: Resources
    requirements: Requirements
    tolerations: tuple[Toleration, ...]
    spreads: tuple[TopologySpreadConstraint, ...]
    affinity: tuple[PodAffinityTerm, ...]
    anti_affinity: tuple[PodAffinityTerm, ...]
    required_anti_affinity: int
    host_ports: tuple[HostPort, ...]
    volume_requirements: tuple[Requirements, ...]
    relax_min_values: bool = False


def _by_weight(items: tuple[tuple[int, int], ...]) -> list[int]:
    """Indices ordered heaviest first (ties by position), the order rungs drop them."""
    return [i for _, i in sorted(items, key=lambda wi: (-wi[0], wi[1]))]


def start(pod: Pod, policy: PreferencePolicy) -> Relaxation:
    """The first rung: everything respected, or every preference dropped under Ignore."""
    if policy is PreferencePolicy.RESPECT:
        return Relaxation()
    return Relaxation(
        node_term=0,
        pod_affinity_dropped=len(pod.preferred_pod_affinity),
        pod_anti_affinity_dropped=len(pod.preferred_pod_anti_affinity),
        node_preferences_dropped=len(pod.preferred_node_affinity),
        spreads_dropped=sum(
            1
            for s in pod.topology_spread
            if s.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY
        ),
        tolerate_prefer_no_schedule=True,
    )


def has_preferences(pod: Pod) -> bool:
    """Would the Ignore policy place `pod` under other terms than Respect, PreferNoSchedule
    taints aside: a preferred pod affinity or anti-affinity, a preferred node affinity, or a
    ScheduleAnyway spread."""
    return bool(
        pod.preferred_pod_affinity
        or pod.preferred_pod_anti_affinity
        or pod.preferred_node_affinity
        or any(
            s.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY for s in pod.topology_spread
        )
    )


def relax(
    pod: Pod,
    state: Relaxation,
    *,
    min_values: MinValuesPolicy = MinValuesPolicy.STRICT,
    prefer_no_schedule: bool = True,
) -> Relaxation | None:
    """The next rung down, or None when nothing is left to relax. Under the BestEffort
    minValues policy the very last rung lets NodeClaims fall short of minValues.
    ``prefer_no_schedule`` says whether any NodePool or node carries a PreferNoSchedule taint;
    without one, tolerating them changes nothing and the rung is skipped."""
    if state.node_term + 1 < len(pod.required_node_affinity):
        return attrs.evolve(state, node_term=state.node_term + 1)
    if state.pod_affinity_dropped < len(pod.preferred_pod_affinity):
        return attrs.evolve(state, pod_affinity_dropped=state.pod_affinity_dropped + 1)
    if state.pod_anti_affinity_dropped < len(pod.preferred_pod_anti_affinity):
        return attrs.evolve(state, pod_anti_affinity_dropped=state.pod_anti_affinity_dropped + 1)
    if state.node_preferences_dropped < len(pod.preferred_node_affinity):
        return attrs.evolve(state, node_preferences_dropped=state.node_preferences_dropped + 1)
    soft = sum(
        1 for s in pod.topology_spread if s.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY
    )
    if state.spreads_dropped < soft:
        return attrs.evolve(state, spreads_dropped=state.spreads_dropped + 1)
    if prefer_no_schedule and not state.tolerate_prefer_no_schedule:
        return attrs.evolve(state, tolerate_prefer_no_schedule=True)
    if min_values is MinValuesPolicy.BEST_EFFORT and not state.relax_min_values:
        return attrs.evolve(state, relax_min_values=True)
    return None


def describe_step(before: Relaxation, after: Relaxation) -> str:
    """What one relaxation step dropped, for explanations."""
    if after.node_term != before.node_term:
        return "tried the next required node affinity term"
    if after.pod_affinity_dropped != before.pod_affinity_dropped:
        return "dropped a preferred pod affinity term"
    if after.pod_anti_affinity_dropped != before.pod_anti_affinity_dropped:
        return "dropped a preferred pod anti-affinity term"
    if after.node_preferences_dropped != before.node_preferences_dropped:
        return "dropped a preferred node affinity term"
    if after.spreads_dropped != before.spreads_dropped:
        return "dropped a ScheduleAnyway topology spread constraint"
    if after.tolerate_prefer_no_schedule != before.tolerate_prefer_no_schedule:
        return "tolerated PreferNoSchedule taints"
    return "relaxed minValues (BestEffort policy)"


def pod_requirements(pod: Pod, state: Relaxation) -> Requirements:
    """nodeSelector + the current required node-affinity term + kept preferred terms."""
    reqs = [Requirement(k, False, frozenset({v})) for k, v in pod.node_selector]
    merged = Requirements(reqs)
    if pod.required_node_affinity:
        merged = merged.merge(pod.required_node_affinity[state.node_term])
    order = _by_weight(tuple((t.weight, i) for i, t in enumerate(pod.preferred_node_affinity)))
    for i in order[state.node_preferences_dropped :]:
        merged = merged.merge(pod.preferred_node_affinity[i].requirements)
    return merged


def shape(pod: Pod, state: Relaxation, requests: Resources) -> Shape:
    """The hard constraints of ``pod`` at rung ``state``."""
    aff_order = _by_weight(tuple((t.weight, i) for i, t in enumerate(pod.preferred_pod_affinity)))
    anti_order = _by_weight(
        tuple((t.weight, i) for i, t in enumerate(pod.preferred_pod_anti_affinity))
    )
    affinity = pod.pod_affinity + tuple(
        pod.preferred_pod_affinity[i].term for i in sorted(aff_order[state.pod_affinity_dropped :])
    )
    anti = pod.pod_anti_affinity + tuple(
        pod.preferred_pod_anti_affinity[i].term
        for i in sorted(anti_order[state.pod_anti_affinity_dropped :])
    )
    soft_seen = 0
    spreads: list[TopologySpreadConstraint] = []
    for spread in pod.topology_spread:
        if spread.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY:
            soft_seen += 1
            if soft_seen <= state.spreads_dropped:
                continue
        spreads.append(spread)
    tolerations = pod.tolerations
    if state.tolerate_prefer_no_schedule:
        tolerations = (*tolerations, PREFER_NO_SCHEDULE_TOLERATION)
    return Shape(
        namespace=pod.namespace,
        labels=pod.labels,
        requests=requests,
        requirements=pod_requirements(pod, state),
        tolerations=tolerations,
        spreads=tuple(spreads),
        affinity=affinity,
        anti_affinity=anti,
        required_anti_affinity=len(pod.pod_anti_affinity),
        host_ports=pod.host_ports,
        volume_requirements=pod.volume_requirements,
        relax_min_values=state.relax_min_values,
    )
