"""What a controller declares: its name, what wakes it, and its reconcile function.

Every loop in karpy, core or provider, is one of two shapes, as in Karpenter:

- a `Controller` reconciles one object at a time, keyed by name. It names the kinds it watches
  (`Watch`), each with a function from an informer event to the keys it concerns (the object's
  own name unless said otherwise), and may also take keys from an in-process channel
  (`karpy.runtime.channels.Keys`: the disruption pass hands commands to its queue that way);
- a `Singleton` reconciles everything in one pass (provisioning, disruption, garbage
  collection): an event on a watched kind asks for a pass, directly or through a `Gate` that
  holds passes back (provisioning's batch window), and a pass asks for the next one with
  ``Result(requeue_after=period)``.

A declaration says nothing about how it runs. `karpy.manager.Manager` owns that for every
declaration alike: the work queue, the workers, per-key backoff, spans, metrics, waiting for
cluster state to sync before the first reconcile, and the shutdown drain. A controller class
therefore holds its dependencies and its domain logic only, and hands its declaration out from a
``spec()`` method; `karpy.operator.wiring` lists them.

This package sits above `karpy.state` so that a declaration names the real things it is about —
`ResourceKind`s, informer `Event`s — rather than types shaped to get around the layer rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.resources import ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.runtime.channels import Keys
from karpy.runtime.reconciler import KeyDescription, Result, describe_plain

T = TypeVar("T")

#: Parallel reconciles of a controller whose keys are independent of each other (NodeClaims,
#: Nodes): one slow cloud call must not hold up the rest.
PARALLEL_WORKERS: Final = 8


def by_name(event: Event[Any]) -> Iterable[str]:
    """The default key of a watch: the changed object's name."""
    return (event.item.ref.name,)


def unless_deleted(event: Event[Any]) -> Iterable[str]:
    """The changed object's name, except when it is gone (a deletion starts as a change)."""
    return () if event.type is EventType.DELETED else (event.item.ref.name,)


@attrs.frozen(kw_only=True)
class Watch(Generic[T]):
    """The events of `kind` that concern a controller and, through `keys`, which keys each one
    names (none, to ignore it). `keys` runs on the informer's stream: it must be quick, must not
    block and must not raise."""

    kind: ResourceKind[T]
    keys: Callable[[Event[T]], Iterable[str]] = by_name


@attrs.frozen(kw_only=True)
class Controller:
    """A reconcile keyed by name: serial per key, `workers` keys at a time.

    Keys come from `watches`, from the `sources` channels, from `initial` (called once cluster
    state has synced: work a previous process left behind) and from the reconcile's own
    ``Result``. Exceptions in `done_on` end a key quietly, those in `requeue_on` queue it again
    at once; any other backs the key off. The controller is run only when every kind it watches
    or `reads` is informed.
    """

    name: str
    reconcile: Callable[[str], Awaitable[Result]]
    watches: tuple[Watch[Any], ...] = ()
    sources: tuple[Keys, ...] = ()
    initial: Callable[[], Iterable[str]] | None = None
    reads: tuple[ResourceKind[Any], ...] = ()
    workers: int = 1
    describe: Callable[[str], KeyDescription] = describe_plain
    done_on: tuple[type[Exception], ...] = ()
    requeue_on: tuple[type[Exception], ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.workers < 1:
            msg = f"controller {self.name!r}: workers must be >= 1, got {self.workers}"
            raise ValueError(msg)


def object_controller(
    name: str,
    reconcile: Callable[[str], Awaitable[Result]],
    *,
    watches: tuple[Watch[Any], ...],
    reads: tuple[ResourceKind[Any], ...],
) -> Controller:
    """The usual shape of a controller over one kind of object: objects are independent, so
    `PARALLEL_WORKERS` run at once; an object that is gone ends its key quietly (NotFound);
    a write made from a stale read (Conflict) runs the key again at once, against the newer
    copy its watch event brings."""
    return Controller(
        name=name,
        reconcile=reconcile,
        watches=watches,
        reads=reads,
        workers=PARALLEL_WORKERS,
        done_on=(NotFoundError,),
        requeue_on=(ConflictError,),
    )


class Gate(Protocol):
    """What stands between a singleton's events and its passes: each key an event names is
    handed to `trigger`, and a pass runs each time `wait` returns (provisioning's `Batcher`)."""

    def trigger(self, key: str) -> None:
        """Take one key; synchronous and never blocks."""
        ...

    async def wait(self) -> object:
        """Return when a pass should run."""
        ...


@attrs.frozen(kw_only=True)
class Singleton:
    """One pass over everything; passes never overlap and a failing pass backs off.

    A pass runs at start when `at_start`, whenever an event on a watched kind or a `sources`
    channel names a key (at once, or when `gate` opens), and when a pass asks with
    ``Result(requeue_after=...)``. The singleton is run only when every kind it watches or
    `reads` is informed.
    """

    name: str
    reconcile: Callable[[], Awaitable[Result]]
    watches: tuple[Watch[Any], ...] = ()
    sources: tuple[Keys, ...] = ()
    gate: Gate | None = None
    at_start: bool = True
    reads: tuple[ResourceKind[Any], ...] = ()
    requeue_on: tuple[type[Exception], ...] = ()


Declaration = Controller | Singleton
"""One loop, as the manager runs it."""

RepairedElsewhere = Callable[[NodeClaim], Awaitable[str | None]]
"""Who repairs a NodeClaim's machine instead of karpy's node repair, or None (see
ProviderExtension)."""


def kinds_of(declaration: Declaration) -> tuple[ResourceKind[Any], ...]:
    """Every kind `declaration` needs informed: the ones it watches and the ones it reads."""
    return (*(w.kind for w in declaration.watches), *declaration.reads)


@attrs.frozen(kw_only=True)
class ProviderExtension:
    """What a cloud provider brings besides the CloudProvider methods.

    `kinds` are the kinds it owns (its NodeClass): the operator informs them into cluster state,
    so the provider reads them through its view. `controllers` are its loops, declared like the
    core's and run by the same manager (on the leader, drained in order at shutdown); a kind
    they watch is informed too. Their CRDs reach deploy/crds through the ``karpy.apis`` entry
    points (`karpy.apis.registry`).

    `repaired_elsewhere`, when given, is asked before node repair replaces an unhealthy node:
    a description of another controller that repairs the NodeClaim's machine (the Cluster API
    provider's: a MachineHealthCheck selecting its Machine) leaves the node to it, said in a log
    line and an event; None lets karpy repair it.
    """

    kinds: tuple[ResourceKind[Any], ...] = ()
    controllers: tuple[Declaration, ...] = ()
    repaired_elsewhere: RepairedElsewhere | None = None


@runtime_checkable
class Extended(Protocol):
    """The optional provider hook: the extension the provider declares."""

    def extension(self) -> ProviderExtension:
        """The provider's kinds and controllers (called once, after the factory)."""
        ...
