"""What the process informs, and what its controllers are given besides their collaborators.

The kinds every replica keeps in cluster state, the optional kinds the scheduling snapshot reads
(left out when a process informs fewer, as tests do), the provider's NodeClass kinds among them,
and the settings derived from options that more than one command needs (`karpy run` and
`karpy explain` schedule alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeVar

import attrs

from karpy.cloudprovider.protocol import CloudProvider
from karpy.core.scheduling.options import SchedulerOptions
from karpy.core.scheduling.preferences import MinValuesPolicy, PreferencePolicy
from karpy.kube.kinds import (
    DAEMONSETS,
    NODECLAIMS,
    NODEOVERLAYS,
    NODEPOOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODDISRUPTIONBUDGETS,
    PODS,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
)
from karpy.kube.resources import ResourceKind
from karpy.runtime.options import Options
from karpy.state.informers import Informer
from karpy.state.snapshot import SnapshotKinds

T = TypeVar("T")

SNAPSHOT_KINDS: Final = SnapshotKinds(
    daemonsets=DAEMONSETS,
    persistent_volumes=PERSISTENT_VOLUMES,
    persistent_volume_claims=PERSISTENT_VOLUME_CLAIMS,
    storage_classes=STORAGE_CLASSES,
)
"""What the provisioner's snapshot reads beyond the four required kinds: DaemonSets (their pods'
requests are every new node's overhead) and the storage kinds (a pod's volumes pin its zone)."""

INFORMED_KINDS: tuple[ResourceKind[Any], ...] = (
    NODES,
    PODS,
    NODECLAIMS,
    NODEPOOLS,
    NODEOVERLAYS,
    PODDISRUPTIONBUDGETS,
    VOLUME_ATTACHMENTS,
    *(kind for kind in attrs.astuple(SNAPSHOT_KINDS, recurse=False) if kind is not None),
)
"""Kinds every replica keeps in cluster state (karpy's CRDs must be installed). Termination reads
VolumeAttachments (a draining Node's must go before its instance does) and the claims of the
pods that keep theirs. NodeOverlays are informed whatever the gate, so one stored while the gate
is off is reported, not ignored."""


def snapshot_kinds(informers: Mapping[str, Informer[Any]]) -> SnapshotKinds:
    """SNAPSHOT_KINDS less the kinds this process does not inform (tests inform fewer)."""

    def informed(kind: ResourceKind[T] | None) -> ResourceKind[T] | None:
        return kind if kind is not None and kind.kind in informers else None

    return SnapshotKinds(
        daemonsets=informed(SNAPSHOT_KINDS.daemonsets),
        persistent_volumes=informed(SNAPSHOT_KINDS.persistent_volumes),
        persistent_volume_claims=informed(SNAPSHOT_KINDS.persistent_volume_claims),
        storage_classes=informed(SNAPSHOT_KINDS.storage_classes),
    )


def nodeclass_kinds(
    provider: CloudProvider, informers: Mapping[str, Informer[Any]]
) -> tuple[ResourceKind[Any], ...]:
    """The informed kinds among the NodeClasses `provider` supports."""
    supported = {(k.group, k.kind) for k in provider.supported_node_classes()}
    return tuple(
        i.store.kind for i in informers.values() if (i.store.kind.group, i.kind) in supported
    )


def nomination_window(options: Options) -> float:
    """Karpenter's nomination window: max(2 x batch max duration, 10 s)."""
    return max(2 * options.batching.max_duration, 10.0)


def scheduler_options(options: Options, provider: CloudProvider) -> SchedulerOptions:
    """The solver's settings: the scheduling options, and the provider's well-known labels."""
    return SchedulerOptions(
        preference_policy=PreferencePolicy(options.scheduling.preference_policy),
        min_values_policy=MinValuesPolicy(options.scheduling.min_values_policy),
        provider_labels=provider.well_known_labels(),
    )
