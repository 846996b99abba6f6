"""The CloudProvider Protocol: what karpy needs from a cloud, and the rules each method keeps.

A Protocol rather than a base class: a provider needs no import from karpy to be one, and a
conformance suite (not inheritance) keeps implementations honest. Every method may be called
concurrently from several reconcile loops; implementations guard their own shared state.

A provider usually brings more than the methods: the NodeClass kind it owns and loops of its own
(resolving NodeClass status, collecting leaked instances, ...). It *declares* them as a
`karpy.manager.ProviderExtension` (the optional `karpy.manager.Extended` hook) instead of
running them itself, so the operator informs its kinds into cluster state like the core kinds
and runs its loops like the core controllers: the same manager, queues, backoff, spans,
supervisor and ordered shutdown drain.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import NewType, Protocol, TypeVar, runtime_checkable

import attrs

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.core.instancetypes import InstanceType

KindT = TypeVar("KindT")

#: Why an instance no longer matches its NodeClaim (Karpenter's names: AMIDrift, SubnetDrift,
#: SecurityGroupDrift, NodeClassDrift, ...).
DriftReason = NewType("DriftReason", str)


@attrs.frozen
class NodeClassKind:
    """A NodeClass kind a provider launches from, e.g. karpenter.k8s.aws / EC2NodeClass."""

    group: str
    kind: str


@attrs.frozen
class RepairPolicy:
    """A node condition that, held for ``toleration``, means the node should be replaced."""

    condition_type: str
    condition_status: str
    toleration: timedelta


@runtime_checkable
class CloudProvider(Protocol):
    """A cloud that launches and terminates the machines NodeClaims ask for."""

    @property
    def name(self) -> str:
        """Short provider name, used in metrics, logs and the provider option (e.g. "aws")."""
        ...

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance that satisfies ``nodeclaim.spec`` and return the NodeClaim as
        launched: ``status.provider_id``, ``status.capacity``, ``status.allocatable``,
        ``status.image_id`` and the labels of what was chosen (instance type, zone, capacity
        type, ...) filled in. The provider picks among the NodeClaim's instance types itself.

        Raises InsufficientCapacityError when no compatible offering can be had (the caller
        deletes the NodeClaim and provisions again), NodeClassNotReadyError when the NodeClass
        is missing or not Ready, CreateError for any other failure worth a condition.
        """
        ...

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Begin terminating the NodeClaim's instance.

        Must raise NodeClaimNotFoundError once the instance is gone: callers retry until it
        does, which is how they learn that termination finished. A NodeClaim without a
        providerID is asked about too (its launch may have happened without being recorded):
        a provider that cannot find an instance for it by other means raises
        NodeClaimNotFoundError.
        """
        ...

    async def get(self, provider_id: str) -> NodeClaim:
        """The NodeClaim view of one instance; NodeClaimNotFoundError when it does not exist."""
        ...

    async def list(self) -> Sequence[NodeClaim]:
        """Every instance this provider launched for this cluster, as NodeClaims, including
        ones no NodeClaim object refers to any more (garbage collection needs those)."""
        ...

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """All instance types the NodePool's NodeClass can launch — unavailable offerings
        included, marked ``available=False``, so the scheduler can explain what it skipped."""
        ...

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """Why the instance no longer matches its NodeClass, or None when it still does."""
        ...

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """Node conditions after which an unhealthy node is replaced (empty: never)."""
        ...

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        """The NodeClass kinds this provider understands."""
        ...

    def well_known_labels(self) -> frozenset[str]:
        """The labels of this provider's instance types that karpy treats as well known, as its
        own (e.g. karpenter.k8s.aws/instance-family): a pod may require one its NodePool does
        not mention, and the instance types decide. karpy names none of a provider's labels."""
        ...
