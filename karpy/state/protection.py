"""What protects a node's pods from voluntary disruption: `karpenter.sh/do-not-disrupt` on a pod
(until when) and the PodDisruptionBudgets covering it (which one forbids its eviction).

The disruption controller asks these of the cluster's Pods and PDBs; `karpy simulate
--consolidate` asks them of a scenario's, so both report the same reasons. They read wire models
(annotations, a PDB's selector and status), hence karpy.state rather than the core; the
arithmetic and rules themselves are the core's (`karpy.core.disruption.pdb`). Pure: functions of
the objects alone, no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from karpy.apis.duration import parse_duration
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import PodDisruptionBudget
from karpy.apis.v1 import labels as wk
from karpy.core.disruption import pdb as core_pdb
from karpy.state.pods import do_not_disrupt
from karpy.state.podview import label_selector


def do_not_disrupt_seconds(value: str) -> float | None:
    """A pod's `karpenter.sh/do-not-disrupt` duration in seconds; None for "true" (forever);
    raises ValueError naming the annotation for anything else."""
    if value == "true":
        return None
    field = f"annotations[{wk.ANNOTATION_DO_NOT_DISRUPT}]"
    try:
        parsed = parse_duration(value, field_name=field)
    except ValueError:
        parsed = None
    if parsed is None:
        msg = f'{field}: {value!r} is neither "true" nor a duration (e.g. 5m, 1h30m)'
        raise ValueError(msg)
    return parsed.total_seconds()


def do_not_disrupt_until(pod: Pod) -> float | None:
    """Until when `karpenter.sh/do-not-disrupt` protects `pod` (epoch seconds): forever for
    "true" or a value that is not a duration (protection fails safe), start + duration for a
    duration such as "5m"; None when the pod is not annotated."""
    if do_not_disrupt(pod):
        return math.inf
    value = pod.metadata.annotations.get(wk.ANNOTATION_DO_NOT_DISRUPT)
    if value is None:
        return None
    try:
        seconds = do_not_disrupt_seconds(value)
    except ValueError:
        return math.inf
    started = pod.status.start_time or pod.metadata.creation_timestamp
    if seconds is None or started is None:
        return math.inf
    return started.timestamp() + seconds


class Budgets:
    """Which PodDisruptionBudgets cover a pod, and which of them forbids evicting it now, if
    any (`karpy.core.disruption.pdb.blocking`). A PDB whose selector does not translate covers
    nothing (the apiserver validates selectors, so only a hand-made object has one)."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        self._by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in pdbs:
            self._by_namespace.setdefault(pdb.metadata.namespace or "", []).append(pdb)

    def covering(self, namespace: str, labels: Mapping[str, str]) -> list[PodDisruptionBudget]:
        """The PDBs of `namespace` whose selector matches `labels`."""
        found: list[PodDisruptionBudget] = []
        for pdb in self._by_namespace.get(namespace, ()):
            try:
                selector = label_selector(pdb.spec.selector, field="spec.selector")
            except ValueError:
                continue
            if selector.matches(labels):
                found.append(pdb)
        return found

    def blocking(self, namespace: str, labels: Mapping[str, str]) -> str | None:
        """`namespace/name` of the PDB that forbids evicting a pod of `namespace` with
        `labels`, or None."""
        return core_pdb.blocking(
            [
                (f"{p.metadata.namespace}/{p.metadata.name}", p.status.disruptions_allowed)
                for p in self.covering(namespace, labels)
            ]
        )
