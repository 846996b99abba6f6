"""Static and requirement drift of a NodeClaim from its NodePool, and the NodePool hash. Pure.

A NodeClaim's spec is immutable, so "has the NodePool changed under this node?" is answered by
comparison. Karpenter answers it two ways, and so does karpy:

* **Static drift** (reason ``NodePoolDrifted``): the NodePool's template is hashed and the hash is
  written on the NodePool (``karpenter.sh/nodepool-hash``) and on every NodeClaim made from it.
  When the two differ, the node was made from an older template. The hash covers the template
  fields Karpenter hashes (`TemplateFields`): metadata labels and annotations, taints, startup
  taints, the nodeClassRef, expireAfter and terminationGracePeriod. Requirements are left out
  (Karpenter tags them ``hash:"ignore"``): a changed requirement drifts only the nodes that no
  longer satisfy it, which the second check finds. Lists are hashed as sets and empty values as
  absent (Karpenter's SlicesAsSets and IgnoreZeroValue), so reordering taints or spelling out an
  empty map does not roll a pool; durations are hashed by value (``60m`` equals ``1h``).
  The hashes are compared only when both carry the same ``nodepool-hash-version``: a karpy
  release that changes what is hashed bumps HASH_VERSION instead of rolling every node.
* **Requirement drift** (reason ``RequirementsDrifted``): the NodeClaim's labels no longer
  satisfy the NodePool's requirements.

The digest is karpy's own (the first 64 bits of a SHA-256 over a canonical encoding, in decimal,
as Karpenter writes its 64-bit hash); it is not bit-for-bit Karpenter's hashstructure value, and
the version karpy writes says so (HASH_VERSION).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from typing import Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.requirements import Requirements

HASH_VERSION: Final = "karpy-v1"
"""The `karpenter.sh/nodepool-hash-version` karpy writes. Its own, not Karpenter's `v3`: the
digest is not Karpenter's, so a NodePool and NodeClaims that Karpenter stamped (`v3`) are
re-stamped on take-over, as Karpenter itself re-stamps on a version change, instead of every
node drifting merely because karpy now runs the pool."""


class DriftReason(enum.StrEnum):
    """The core's drift reasons (providers add their own, e.g. AMIDrift)."""

    NODEPOOL_DRIFTED = "NodePoolDrifted"
    REQUIREMENTS_DRIFTED = "RequirementsDrifted"
    INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"


@attrs.frozen(kw_only=True)
class TaintFields:
    key: str
    value: str = ""
    effect: str = ""


@attrs.frozen(kw_only=True)
class TemplateFields:
    """The hashed fields of a NodePool's spec.template, durations already in seconds (None for
    unset or Never)."""

    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    taints: tuple[TaintFields, ...] = ()
    startup_taints: tuple[TaintFields, ...] = ()
    node_class_ref: tuple[str, str, str] = ("", "", "")
    """(group, kind, name)."""
    expire_after: float | None = None
    termination_grace_period: float | None = None


def _canonical(fields: TemplateFields) -> str:
    """A deterministic text of the fields: maps and lists sorted, empty values left out."""

    def taints(items: tuple[TaintFields, ...]) -> list[tuple[str, str, str]]:
        return sorted({(t.key, t.value, t.effect) for t in items})

    parts: dict[str, object] = {
        "labels": sorted(fields.labels.items()),
        "annotations": sorted(fields.annotations.items()),
        "taints": taints(fields.taints),
        "startupTaints": taints(fields.startup_taints),
        "nodeClassRef": list(fields.node_class_ref),
        "expireAfter": fields.expire_after,
        "terminationGracePeriod": fields.termination_grace_period,
    }
    kept = {
        key: value
        for key, value in parts.items()
        if value is not None and value != [] and value != ["", "", ""]
    }
    return repr(sorted(kept.items()))


def template_hash(fields: TemplateFields) -> str:
    """The `karpenter.sh/nodepool-hash` of a template: a decimal 64-bit digest."""
    digest = hashlib.sha256(_canonical(fields).encode()).digest()
    return str(int.from_bytes(digest[:8], "big"))


def static_drift(
    nodepool_annotations: Mapping[str, str], nodeclaim_annotations: Mapping[str, str]
) -> DriftReason | None:
    """NodePoolDrifted when both carry a hash of the same hash version and the hashes differ;
    None when they match or either hash (or version) is missing or the versions differ."""
    pool_hash = nodepool_annotations.get(wk.ANNOTATION_NODEPOOL_HASH)
    pool_version = nodepool_annotations.get(wk.ANNOTATION_NODEPOOL_HASH_VERSION)
    claim_hash = nodeclaim_annotations.get(wk.ANNOTATION_NODEPOOL_HASH)
    claim_version = nodeclaim_annotations.get(wk.ANNOTATION_NODEPOOL_HASH_VERSION)
    if None in (pool_hash, pool_version, claim_hash, claim_version):
        return None
    if pool_version != claim_version:
        return None
    return DriftReason.NODEPOOL_DRIFTED if pool_hash != claim_hash else None


def requirements_drift(
    nodepool_requirements: Requirements, nodeclaim_labels: Mapping[str, str]
) -> DriftReason | None:
    """RequirementsDrifted when the NodeClaim's labels do not satisfy every requirement of its
    NodePool (a label the pool requires but the claim lacks counts, as in Karpenter's strict
    compatibility check)."""
    if nodepool_requirements.matches_labels(nodeclaim_labels) is not None:
        return DriftReason.REQUIREMENTS_DRIFTED
    return None


def rehash_annotations(
    nodeclaim_annotations: Mapping[str, str], *, nodepool_hash: str, drifted: bool
) -> dict[str, str] | None:
    """The annotations to write on a NodeClaim whose hash version is not HASH_VERSION (None when
    it already is): the current version, and the NodePool's current hash unless the NodeClaim is
    already Drifted — after a hash change karpy cannot tell whether a drifted node stopped being
    drifted, so it stays drifted, as in Karpenter."""
    if nodeclaim_annotations.get(wk.ANNOTATION_NODEPOOL_HASH_VERSION) == HASH_VERSION:
        return None
    update = {wk.ANNOTATION_NODEPOOL_HASH_VERSION: HASH_VERSION}
    if not drifted:
        update[wk.ANNOTATION_NODEPOOL_HASH] = nodepool_hash
    return update
