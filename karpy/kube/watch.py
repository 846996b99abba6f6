"""List-then-watch streams that never give up (house rule 10).

The layering follows kopf's watching module, one concern per layer:

- `_raw_events`: one HTTP watch stream, split into JSON events. A stream silent for longer than
  the inactivity timeout (not even a bookmark) is presumed dead and ends, so a half-open TCP
  connection cannot freeze an informer.
- `continuous_watch`: lists (paginated), yields the `Listed` sentinel carrying the complete list
  and its resourceVersion, then watches from that version with bookmarks on, re-watching from the
  last seen version whenever a stream ends. 410 Gone (as an HTTP status or an ERROR event) returns
  so the caller relists; any other ERROR event raises `WatchError`; unknown event types are logged
  and skipped.
- `infinite_watch`: runs `continuous_watch` forever, backing off (with jitter, honouring
  Retry-After) after failures and resetting the backoff once a list succeeds. `_iterations`
  bounds it for tests.

Consumers must treat each `Listed` as a replacement of everything they knew: objects deleted while
the stream was down are absent from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Generic, TypeVar

import aiohttp
import attrs
import orjson

from karpy.kube.client import KubeClient
from karpy.kube.errors import (
    GoneError,
    KubeError,
    TooManyRequestsError,
    UnreachableError,
    from_status_object,
)
from karpy.kube.resources import Item, Listed, ResourceKind, decode_item
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Metrics

T = TypeVar("T")

log = logging.getLogger(__name__)


class EventType(enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@attrs.frozen
class Event(Generic[T]):
    """One change to one object, decoded."""

    type: EventType
    item: Item[T]


Stream = Event[T] | Listed[T]


async def _raw_events(
    client: KubeClient,
    kind: ResourceKind[Any],
    *,
    resource_version: str,
    settings: WatchingOptions,
    namespace: str | None,
) -> AsyncGenerator[Mapping[str, Any], None]:
    async with client.open_watch(
        kind,
        resource_version=resource_version,
        timeout_seconds=max(1, int(settings.server_timeout)),
        namespace=namespace,
    ) as response:
        buffer = bytearray()
        while True:
            try:
                async with asyncio.timeout(settings.inactivity_timeout):
                    chunk = await response.content.readany()
            except TimeoutError:
                log.debug("watch stream inactive, reconnecting", extra={"kind": kind.kind})
                return
            except (aiohttp.ClientError, OSError) as error:
                msg = f"watch {kind.plural} broke: {error!r}"
                raise UnreachableError(msg) from error
            if not chunk:
                return
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                if line.strip():
                    event = orjson.loads(line)
                    if isinstance(event, dict):
                        yield event


async def continuous_watch(
    client: KubeClient,
    kind: ResourceKind[T],
    *,
    settings: WatchingOptions,
    metrics: Metrics,
    namespace: str | None = None,
) -> AsyncGenerator[Stream[T], None]:
    """List, yield `Listed`, then watch from the list's version until a 410 asks for a relist."""
    labels = {"kind": kind.kind}
    raws, version = await client.list_raw(kind, namespace=namespace)
    metrics.watch_lists_total.add(1, labels)
    yield Listed(items=tuple(_decode_all(kind, raws)), resource_version=version)
    while True:
        try:
            async with contextlib.aclosing(
                _raw_events(
                    client,
                    kind,
                    resource_version=version,
                    settings=settings,
                    namespace=namespace,
                )
            ) as events:
                async for raw in events:
                    event_type = raw.get("type")
                    obj = raw.get("object")
                    if not isinstance(obj, Mapping):
                        log.warning("ignoring watch event without object", extra=labels)
                        continue
                    if event_type == "ERROR":
                        raise from_status_object(obj)
                    version = _version_of(obj) or version
                    if event_type == "BOOKMARK":
                        continue
                    try:
                        typed = EventType(event_type)
                    except ValueError:
                        log.warning(
                            "ignoring unknown watch event", extra={**labels, "type": event_type}
                        )
                        continue
                    metrics.watch_events_total.add(1, {**labels, "type": typed.value})
                    item = _decode_one(kind, obj)
                    if item is not None:
                        yield Event(type=typed, item=item)
        except GoneError:
            log.debug("watch expired, relisting", extra={**labels, "resource_version": version})
            return


async def infinite_watch(
    client: KubeClient,
    kind: ResourceKind[T],
    *,
    settings: WatchingOptions,
    metrics: Metrics,
    namespace: str | None = None,
    _iterations: int | None = None,
) -> AsyncGenerator[Stream[T], None]:
    """`continuous_watch` forever: relist on 410, back off and relist after any failure."""
    attempt = 0
    iterations = 0
    while _iterations is None or iterations < _iterations:
        iterations += 1
        try:
            async with contextlib.aclosing(
                continuous_watch(
                    client, kind, settings=settings, metrics=metrics, namespace=namespace
                )
            ) as stream:
                async for entry in stream:
                    if isinstance(entry, Listed):
                        attempt = 0
                    yield entry
        except (KubeError, orjson.JSONDecodeError) as error:
            delay = settings.backoff.delay(attempt)
            if isinstance(error, TooManyRequestsError) and error.retry_after is not None:
                delay = max(delay, error.retry_after)
            attempt += 1
            metrics.watch_errors_total.add(1, {"kind": kind.kind, "reason": type(error).__name__})
            log.warning(
                "watch failed, retrying",
                extra={"kind": kind.kind, "error": str(error), "retry_after": round(delay, 3)},
            )
            await asyncio.sleep(delay)


def _version_of(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        return str(metadata.get("resourceVersion") or "")
    return ""


def _decode_one(kind: ResourceKind[T], raw: Mapping[str, Any]) -> Item[T] | None:
    # One undecodable object must not block the stream: log it by name and skip it.
    try:
        return decode_item(kind, raw)
    except ValueError as error:
        log.error("skipping object that does not decode", extra={"error": str(error)})
        return None


def _decode_all(kind: ResourceKind[T], raws: list[Mapping[str, Any]]) -> list[Item[T]]:
    items = [_decode_one(kind, raw) for raw in raws]
    return [item for item in items if item is not None]
