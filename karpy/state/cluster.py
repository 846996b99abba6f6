"""ClusterState: the informers' in-memory index of the cluster, with a `synced` gate.

Controllers must not decide from a partial picture: a provisioner that has not yet seen every Node
would launch capacity that already exists. So each kind has a `Store`, filled by its informer's
list and kept current by its watch, and `ClusterState.synced` is true only once every registered
store has been listed (Karpenter's `Synced()`). Like client-go's HasSynced it stays true while a
watch reconnects; the relist that follows replaces the store, so objects deleted meanwhile vanish.
Stores are written only by their informer, on the event loop, so no locking is needed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from karpy.kube.resources import Item, ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.runtime.telemetry import Metrics

T = TypeVar("T")

Key = tuple[str, str]


class Store(Generic[T]):
    """All objects of one kind, by (namespace, name). Written only by its informer."""

    def __init__(self, kind: ResourceKind[T], *, metrics: Metrics) -> None:
        self.kind = kind
        self._items: dict[Key, Item[T]] = {}
        self._metrics = metrics
        self.listed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, name: str, *, namespace: str = "") -> T | None:
        item = self._items.get((namespace, name))
        return item.obj if item is not None else None

    def items(self) -> list[Item[T]]:
        """A snapshot list of every object with its identity."""
        return list(self._items.values())

    def objects(self) -> list[T]:
        return [item.obj for item in self._items.values()]

    def replace(self, items: Iterable[Item[T]]) -> list[Event[T]]:
        """Replace the whole store with a fresh list; return the differences as events.

        Side effects: marks the store listed. Objects absent from `items` come back as DELETED,
        new ones as ADDED, and ones whose resourceVersion changed as MODIFIED.
        """
        fresh = {item.ref.key: item for item in items}
        changes: list[Event[T]] = []
        for key, old in self._items.items():
            if key not in fresh:
                changes.append(Event(type=EventType.DELETED, item=old))
        for key, new in fresh.items():
            previous = self._items.get(key)
            if previous is None:
                changes.append(Event(type=EventType.ADDED, item=new))
            elif previous.ref.resource_version != new.ref.resource_version:
                changes.append(Event(type=EventType.MODIFIED, item=new))
        self._items = fresh
        self.listed.set()
        self._record()
        return changes

    def apply(self, event: Event[T]) -> None:
        """Apply one watch event."""
        key = event.item.ref.key
        if event.type is EventType.DELETED:
            self._items.pop(key, None)
        else:
            self._items[key] = event.item
        self._record()

    def _record(self) -> None:
        self._metrics.cluster_state_objects.set(len(self._items), {"kind": self.kind.kind})


class ClusterState:
    """Every store, and whether all of them have been listed."""

    def __init__(self, *, metrics: Metrics) -> None:
        self._metrics = metrics
        self._stores: dict[str, Store[Any]] = {}
        self._synced = asyncio.Event()
        metrics.cluster_state_synced.set(0)

    def register(self, kind: ResourceKind[T]) -> Store[T]:
        """Create the store for `kind` (once per kind; wiring calls this)."""
        if kind.kind in self._stores:
            msg = f"ClusterState: kind {kind.kind!r} is already registered"
            raise ValueError(msg)
        store: Store[T] = Store(kind, metrics=self._metrics)
        self._stores[kind.kind] = store
        self._synced.clear()
        self._metrics.cluster_state_synced.set(0)
        return store

    def store(self, kind: ResourceKind[T]) -> Store[T]:
        """The store of `kind`; raises KeyError naming the kind if it was never registered."""
        try:
            store: Store[T] = self._stores[kind.kind]
        except KeyError:
            msg = f"ClusterState: kind {kind.kind!r} is not registered"
            raise KeyError(msg) from None
        return store

    @property
    def synced(self) -> bool:
        """True once every registered store has been listed at least once."""
        return self._synced.is_set()

    def mark_listed(self) -> None:
        """Re-evaluate `synced`; informers call this after each list."""
        if self._synced.is_set() or not self._stores:
            return
        if all(store.listed.is_set() for store in self._stores.values()):
            self._synced.set()
            self._metrics.cluster_state_synced.set(1)

    async def wait_synced(self) -> None:
        """Wait until `synced` is true."""
        await self._synced.wait()
