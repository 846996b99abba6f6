"""ClusterState: the informers' in-memory index of the cluster, with a `synced` gate.

Controllers must not decide from a partial picture: a provisioner that has not yet seen every Node
would launch capacity that already exists. So each kind has a `Store`, filled by its informer's
list and kept current by its watch, and `ClusterState.synced` is true only once every registered
store has been listed (Karpenter's `Synced()`). Like client-go's HasSynced it stays true while a
watch reconnects; the relist that follows replaces the store, so objects deleted meanwhile vanish.
Stores are written only by their informer, on the event loop, so no locking is needed.

A store may keep secondary indexes (Nodes and NodeClaims by providerID, Pods by node name) so a
reconcile finds what it needs in O(1) instead of scanning or listing from the apiserver: at
5,000 nodes a list per reconcile is quadratic traffic. Controllers read through
`karpy.state.view.ClusterView`, never through a store's writers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from karpy.kube.resources import Item, ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.runtime.telemetry import Metrics
from karpy.state.generation import SIGNIFICANT
from karpy.state.indexes import DEFAULT_INDEXES
from karpy.state.nominations import NodeNominations
from karpy.state.schedulable import SchedulableTimes

T = TypeVar("T")

Key = tuple[str, str]

IndexFunc = Callable[[T], Iterable[str]]
"""The values an object is indexed under (none, one or several); empty strings are skipped."""

Significant = Callable[[T, T], bool]
"""Whether an update from the first object to the second changes state (karpy.state.generation)."""


def _always(_old: object, _new: object) -> bool:
    return True


class Store(Generic[T]):
    """All objects of one kind, by (namespace, name). Written only by its informer."""

    def __init__(
        self,
        kind: ResourceKind[T],
        *,
        metrics: Metrics,
        indexes: Mapping[str, IndexFunc[T]] | None = None,
        changed: Callable[[], None] | None = None,
        significant: Significant[T] = _always,
    ) -> None:
        """`changed()` is called on every change `significant` (for updates) lets through."""
        self.kind = kind
        self._changed = changed
        self._significant = significant
        self._items: dict[Key, Item[T]] = {}
        self._metrics = metrics
        self._index_funcs: dict[str, IndexFunc[T]] = dict(indexes or {})
        self._indexes: dict[str, dict[str, dict[Key, T]]] = {n: {} for n in self._index_funcs}
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

    def by_index(self, index: str, value: str) -> list[T]:
        """The objects indexed under `value` in `index`, in no particular order.

        Raises KeyError naming the index when the store does not keep it.
        """
        try:
            entries = self._indexes[index]
        except KeyError:
            msg = f"Store {self.kind.kind!r} keeps no index {index!r}"
            raise KeyError(msg) from None
        found = entries.get(value)
        return list(found.values()) if found else []

    def _index(self, key: Key, obj: T) -> None:
        for name, func in self._index_funcs.items():
            entries = self._indexes[name]
            for value in func(obj):
                if value:
                    entries.setdefault(value, {})[key] = obj

    def _unindex(self, key: Key, obj: T) -> None:
        for name, func in self._index_funcs.items():
            entries = self._indexes[name]
            for value in func(obj):
                bucket = entries.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del entries[value]

    def replace(self, items: Iterable[Item[T]]) -> list[Event[T]]:
        """Replace the whole store with a fresh list; return the differences as events.

        Side effects: marks the store listed. Objects absent from `items` come back as DELETED,
        new ones as ADDED, and ones that changed as MODIFIED (a changed resourceVersion, unless
        the change is insignificant: a Node heartbeat).
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
        changes = [
            change
            for change in changes
            if change.type is not EventType.MODIFIED
            or self._significant(self._items[change.item.ref.key].obj, change.item.obj)
        ]
        if self._changed is not None and changes:
            self._changed()
        self._items = fresh
        self._indexes = {name: {} for name in self._index_funcs}
        for key, item in fresh.items():
            self._index(key, item.obj)
        self.listed.set()
        self._record()
        return changes

    def apply(self, event: Event[T]) -> bool:
        """Apply one watch event; whether it changed anything a decision can see (an update
        that only re-posts a Node's heartbeat does not, though the store keeps it)."""
        key = event.item.ref.key
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old.obj)
        if event.type is not EventType.DELETED:
            self._items[key] = event.item
            self._index(key, event.item.obj)
        significant = (
            old is None
            or event.type is EventType.DELETED
            or self._significant(old.obj, event.item.obj)
        )
        if significant and self._changed is not None:
            self._changed()
        self._record()
        return significant

    def _record(self) -> None:
        self._metrics.cluster_state_objects.set(len(self._items), {"kind": self.kind.kind})


class ClusterState:
    """Every store, whether all of them have been listed, the provisioner's nominations (which
    nodes pending pods are expected on; see karpy.state.nominations) and when it first placed
    each pending pod (karpy.state.schedulable).

    `generation` counts the changes of its stores that a decision can see (karpy.state.generation).
    """

    def __init__(self, *, metrics: Metrics) -> None:
        self._metrics = metrics
        self._stores: dict[str, Store[Any]] = {}
        self._generation = 0
        self.nominations = NodeNominations()
        self.schedulable = SchedulableTimes()
        self._synced = asyncio.Event()
        metrics.cluster_state_synced.set(0)

    def register(
        self, kind: ResourceKind[T], *, indexes: Mapping[str, IndexFunc[T]] | None = None
    ) -> Store[T]:
        """Create the store for `kind` (once per kind; wiring calls this), keeping `indexes`
        (by default the kind's `DEFAULT_INDEXES`)."""
        if kind.kind in self._stores:
            msg = f"ClusterState: kind {kind.kind!r} is already registered"
            raise ValueError(msg)
        if indexes is None:
            indexes = DEFAULT_INDEXES.get(kind.kind)
        store: Store[T] = Store(
            kind,
            metrics=self._metrics,
            indexes=indexes,
            changed=self._bump,
            significant=SIGNIFICANT.get(kind.kind, _always),
        )
        self._stores[kind.kind] = store
        self._synced.clear()
        self._metrics.cluster_state_synced.set(0)
        return store

    @property
    def generation(self) -> int:
        """Bumped by every store change a decision can see; equal generations, same state."""
        return self._generation

    def _bump(self) -> None:
        self._generation += 1

    def store(self, kind: ResourceKind[T]) -> Store[T]:
        """The store of `kind`; raises KeyError naming the kind if it was never registered."""
        try:
            store: Store[T] = self._stores[kind.kind]
        except KeyError:
            msg = f"ClusterState: kind {kind.kind!r} is not registered"
            raise KeyError(msg) from None
        return store

    def has(self, kind: ResourceKind[Any]) -> bool:
        """Whether `kind` is registered (informed) in this process."""
        return kind.kind in self._stores

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
