"""Results of a solve: NodeClaims to create, nominations, and why the rest could not be placed.

Pure values (frozen attrs) so that callers — the provisioner, ``karpy simulate``, tests — read
one shape, and so that two solves of the same snapshot compare equal.
"""

from __future__ import annotations

import enum

import attrs

from karpy.core.pods import PodUID
from karpy.core.requirements import Requirements
from karpy.core.resources import Resources


class ReasonKind(enum.StrEnum):
    """Closed set of reasons a NodePool, node or NodeClaim cannot take a pod."""

    TAINT = "untolerated-taint"
    REQUIREMENT = "requirement-mismatch"
    INSTANCE_TYPE_REQUIREMENT = "instance-type-requirement"
    OFFERING = "no-compatible-offering"
    RESOURCES = "insufficient-resources"
    LIMIT = "nodepool-limit"
    TOPOLOGY = "topology"
    HOST_PORT = "host-port-conflict"
    VOLUME = "volume-topology"
    MIN_VALUES = "min-values"
    NO_INSTANCE_TYPES = "no-instance-types"


@attrs.frozen
class Reject:
    """One refusal: ``permanent`` when the same pod can never fit this bin later."""

    kind: ReasonKind
    detail: str
    permanent: bool = True


@attrs.frozen
class FilterStep:
    """One filter of a NodePool's instance types for a pod: what it removed and what was left."""

    kind: ReasonKind
    detail: str
    removed: int
    remaining: int


@attrs.frozen
class PoolExplanation:
    """Why a new NodeClaim from ``nodepool`` could not take the pod."""

    nodepool: str
    instance_types: int
    steps: tuple[FilterStep, ...]

    def blocking(self) -> FilterStep | None:
        """The step that left nothing, if any."""
        for step in self.steps:
            if step.remaining == 0:
                return step
        return None


@attrs.frozen
class BinSummary:
    """How many existing nodes (or in-flight NodeClaims) refused the pod, per reason."""

    kind: ReasonKind
    detail: str
    count: int


@attrs.frozen
class Explanation:
    """A structured account of why a pod stayed unplaced, plus a one-line message."""

    pod: str
    uid: PodUID
    nodepools: tuple[PoolExplanation, ...]
    existing_nodes: tuple[BinSummary, ...]
    nodeclaims: tuple[BinSummary, ...]
    relaxations: tuple[str, ...]
    message: str


@attrs.frozen
class NodeClaimPlan:
    """A NodeClaim the solver would create.

    ``instance_types`` are ordered by their cheapest compatible offering and cut to the maximum;
    ``price`` is the cheapest compatible offering of the first one. ``min_values_relaxed`` is
    set when the BestEffort policy let it fall short of a minValues (Karpenter then annotates
    the NodeClaim ``karpenter.sh/nodeclaim-min-values-relaxed``).
    """

    name: str
    nodepool: str
    requirements: Requirements
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]
    capacity_types: tuple[str, ...]
    requests: Resources
    pods: tuple[PodUID, ...]
    price: float
    min_values_relaxed: bool = False


@attrs.frozen
class Nomination:
    """A pod the solver put on an existing node (or in-flight NodeClaim)."""

    pod: PodUID
    node: str


@attrs.frozen
class RelaxedPod:
    """A placed pod that was placed only after dropping some of its preferences."""

    pod: PodUID
    steps: tuple[str, ...]


@attrs.frozen
class Results:
    """The whole plan. ``relaxed`` lists placed pods whose preferences had to give way."""

    nodeclaims: tuple[NodeClaimPlan, ...]
    nominations: tuple[Nomination, ...]
    unplaced: tuple[Explanation, ...]
    greedy_price: float
    relaxed: tuple[RelaxedPod, ...] = ()

    @property
    def price(self) -> float:
        """Total price per hour of the new NodeClaims."""
        return sum(c.price for c in self.nodeclaims)

    def placed(self) -> dict[PodUID, str]:
        """Pod UID -> NodeClaim or node name."""
        out = {n.pod: n.node for n in self.nominations}
        for claim in self.nodeclaims:
            for uid in claim.pods:
                out[uid] = claim.name
        return out
