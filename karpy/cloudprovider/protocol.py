"""The CloudProvider Protocol: what karpy needs from a cloud, and the rules each method keeps.

A Protocol rather than a base class: a provider needs no import from karpy to be one, and a
conformance suite (not inheritance) keeps implementations honest. Every method may be called
concurrently from several reconcile loops; implementations guard their own shared state.

A provider usually brings more than the methods: the NodeClass kind it owns and loops of its own
(resolving NodeClass status, collecting leaked instances, ...). It *declares* them as a
`ProviderExtension` (the optional `Extended` hook) instead of running them itself, so the
operator informs its kinds into cluster state like the core kinds and builds its loops like the
core controllers: the same queues, backoff, spans, supervisor and ordered shutdown drain. The
declarations are generic over the kind type because karpy.cloudprovider may not import
karpy.kube (a sibling layer); the operator declares ``ResourceKind``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any, Generic, NewType, Protocol, TypeVar, runtime_checkable

import attrs

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.core.instancetypes import InstanceType
from karpy.runtime.reconciler import KeyDescription, Result, describe_plain

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


# ---------------------------------------------------------------------- the provider extension


@attrs.frozen(kw_only=True)
class Change:
    """One informer event on a watched kind, as a provider's key function sees it: the object's
    name, the object (its last known state when ``deleted``), and whether it was deleted."""

    name: str
    obj: object
    deleted: bool


@attrs.frozen(kw_only=True)
class Watch(Generic[KindT]):
    """Feed a keyed controller from the operator's informer of ``kind``: every change is handed
    to ``keys``, which returns the keys to queue (none, to ignore it). ``keys`` runs on the
    informer's stream, so it must be quick and must not block or raise."""

    kind: KindT
    keys: Callable[[Change], Iterable[str]]


@attrs.frozen(kw_only=True)
class KeyedController(Generic[KindT]):
    """A reconcile keyed by name (serial per key, parallel across ``workers``), fed by informer
    events (``watches``) and by its own ``Result.requeue_after``. Exceptions in ``done_on`` end a
    key quietly, those in ``requeue_on`` requeue it at once; any other backs the key off."""

    name: str
    reconcile: Callable[[str], Awaitable[Result]]
    watches: tuple[Watch[KindT], ...] = ()
    workers: int = 1
    describe: Callable[[str], KeyDescription] = describe_plain
    done_on: tuple[type[Exception], ...] = ()
    requeue_on: tuple[type[Exception], ...] = ()


@attrs.frozen(kw_only=True)
class PeriodicController:
    """A singleton pass: run once at start, then whenever the pass asks for it with
    ``Result(requeue_after=period)`` and each time ``wake`` (when given) returns; a failing pass
    backs off. Passes never overlap."""

    name: str
    reconcile_once: Callable[[], Awaitable[Result]]
    wake: Callable[[], Awaitable[object]] | None = None
    requeue_on: tuple[type[Exception], ...] = ()


ControllerSpec = KeyedController[KindT] | PeriodicController
"""A loop a provider contributes; the operator builds and runs it on the leader."""


@attrs.frozen(kw_only=True)
class ProviderExtension(Generic[KindT]):
    """What a provider brings besides the CloudProvider methods.

    ``kinds`` are the kinds it owns (its NodeClass): the operator informs them into cluster state,
    so the provider reads them through its view. ``controllers`` are its loops, declared; the
    operator builds their queues and runners and runs them under its supervisor with the core
    controllers (on the leader, drained in order at shutdown). Their CRDs reach deploy/crds
    through the ``karpy.apis`` entry points (`karpy.apis.registry`).
    """

    kinds: tuple[KindT, ...] = ()
    controllers: tuple[ControllerSpec[KindT], ...] = ()


@runtime_checkable
class Extended(Protocol):
    """The optional provider hook: the extension the provider declares."""

    def extension(self) -> ProviderExtension[Any]:
        """The provider's kinds and controllers (called once, after the factory)."""
        ...
