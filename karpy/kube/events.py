"""Kubernetes Events (core/v1) for the objects karpy acts on, without spamming them.

Users learn why a pod is still pending from `kubectl describe pod`, which shows Events: karpy
reports there as Karpenter does (`Nominated`, `FailedScheduling`, ...). A controller that runs
every batch would repeat the same event for the same pod each time, so the recorder drops an
event identical (same object, type, reason and message) to one it sent within `dedupe_window`
seconds of loop time, as Karpenter's recorder does. An event that states an object's current
condition (`Event.dedupe_window` set, as for `Unconsolidatable`) is dropped only while it repeats
the last message of its kind for that object, so the newest one is always current. Events are
best effort: a failed write is logged and never fails the reconcile that reported it.

Each controller package names its events in its own `events.py` (as Karpenter's packages do),
one constructor per event, with the target built from the object by `involved`.
"""

from __future__ import annotations

import enum
import itertools
import logging
from typing import Any, Final

import attrs

from karpy.apis.meta import HasMetadata
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError
from karpy.kube.resources import ResourceKind
from karpy.runtime.clock import Clock

log = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "karpy"
DEFAULT_DEDUPE_WINDOW: Final = 120.0
"""Seconds an identical event is suppressed (Karpenter's recorder default: 2 minutes)."""


class EventType(enum.StrEnum):
    """core/v1 Event types."""

    NORMAL = "Normal"
    WARNING = "Warning"


@attrs.frozen(kw_only=True)
class InvolvedObject:
    """The object an event is about. Cluster-scoped objects have no namespace; their events
    go to the ``default`` namespace, as client-go's recorder does."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str | None = None


def involved(kind: ResourceKind[Any], obj: HasMetadata) -> InvolvedObject:
    """The object `obj` of `kind` as an event's target: apiVersion and kind from `kind`; name,
    namespace (namespaced kinds only) and uid from its metadata."""
    metadata = obj.metadata
    return InvolvedObject(
        api_version=kind.api_version,
        kind=kind.kind,
        name=metadata.name or "",
        uid=metadata.uid or "",
        namespace=metadata.namespace if kind.namespaced else None,
    )


@attrs.frozen(kw_only=True)
class Event:
    """One event to record."""

    involved: InvolvedObject
    type: EventType
    reason: str
    message: str
    dedupe_window: float | None = None
    """When set, the event states the object's current condition (Karpenter's
    `Unconsolidatable`): it is suppressed only while it repeats the last message sent for the
    same object, type and reason, for at most this many seconds; a changed message is sent at
    once, so the newest such event is always the current one."""


def normal(
    kind: ResourceKind[Any],
    obj: HasMetadata,
    reason: str,
    message: str,
    *,
    dedupe_window: float | None = None,
) -> Event:
    """A Normal event about `obj` of `kind`: what a package's event constructors return."""
    return Event(
        involved=involved(kind, obj),
        type=EventType.NORMAL,
        reason=reason,
        message=message,
        dedupe_window=dedupe_window,
    )


def warning(kind: ResourceKind[Any], obj: HasMetadata, reason: str, message: str) -> Event:
    """A Warning event about `obj` of `kind`."""
    return Event(
        involved=involved(kind, obj), type=EventType.WARNING, reason=reason, message=message
    )


class Recorder:
    """Writes Events through `client`, dropping repeats within the dedupe window.

    `clock` stamps the events (wall time); the dedupe window runs on the loop clock through
    `now` (seconds, monotonic), which tests may replace.
    """

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        dedupe_window: float = DEFAULT_DEDUPE_WINDOW,
        component: str = REPORTING_CONTROLLER,
    ) -> None:
        if dedupe_window < 0:
            msg = f"Recorder: dedupe_window must be >= 0 seconds, got {dedupe_window}"
            raise ValueError(msg)
        self._client = client
        self._clock = clock
        self._window = dedupe_window
        self._component = component
        self._until: dict[tuple[str, str, str, str], float] = {}
        self._latest: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._sequence = itertools.count(1)

    def is_duplicate(self, event: Event, *, now: float) -> bool:
        """Whether an identical event was sent less than the dedupe window before `now`."""
        if event.dedupe_window is not None:
            last = self._latest.get(_kind_key(event))
            return last is not None and last[0] == event.message and now < last[1]
        until = self._until.get(_key(event))
        return until is not None and now < until

    async def publish(self, event: Event, *, now: float) -> bool:
        """Record `event` unless it is a duplicate; returns whether it was written.

        Side effects: one POST to the apiserver. A KubeError is logged (warning) and reported
        as not written; cancellation propagates.
        """
        if self.is_duplicate(event, now=now):
            return False
        self._forget_older_than(now)
        obj = event.involved
        namespace = obj.namespace or "default"
        stamp = self._clock.now()
        name = f"{obj.name}.{int(stamp.timestamp() * 1e9):x}{next(self._sequence):x}"
        timestamp = stamp.isoformat().replace("+00:00", "Z")
        involved = {
            "apiVersion": obj.api_version,
            "kind": obj.kind,
            "name": obj.name,
            "uid": obj.uid,
        }
        if obj.namespace:
            involved["namespace"] = obj.namespace
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "type": event.type.value,
            "reason": event.reason,
            "message": event.message,
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._component,
        }
        try:
            await self._client.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body)
        except KubeError as error:
            log.warning(
                "failed to record event",
                extra={"reason": event.reason, "object": obj.name, "error": str(error)},
            )
            return False
        if event.dedupe_window is None:
            self._until[_key(event)] = now + self._window
        else:
            self._latest[_kind_key(event)] = (event.message, now + event.dedupe_window)
        return True

    def _forget_older_than(self, now: float) -> None:
        expired = [key for key, until in self._until.items() if now >= until]
        for key in expired:
            del self._until[key]
        stale = [key for key, (_, until) in self._latest.items() if now >= until]
        for kind_key in stale:
            del self._latest[kind_key]


def _key(event: Event) -> tuple[str, str, str, str]:
    return (event.involved.uid, event.type.value, event.reason, event.message)


def _kind_key(event: Event) -> tuple[str, str, str]:
    return (event.involved.uid, event.type.value, event.reason)
