"""The watch protocol over a scripted transport: bookmarks move the resume point, and a 410
(as an ERROR event or as the HTTP status of the watch request) ends in a fresh list.

The real apiserver cannot be made to compact on cue or to send a bookmark at a chosen moment,
so these paths are driven here by a client whose `list_raw` and `open_watch` replay a script;
everything else about watching is tested against the local control plane
(tests/cluster/runtime/test_watch.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import attrs
import orjson
import pytest

from karpy.kube.client import KubeClient
from karpy.kube.errors import GoneError
from karpy.kube.kinds import NODES
from karpy.kube.resources import Listed
from karpy.kube.watch import Event, EventType, infinite_watch
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Telemetry


def _node(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version},
    }


def _event(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def _bookmark(version: str) -> dict[str, Any]:
    return _event("BOOKMARK", {"kind": "Node", "metadata": {"resourceVersion": version}})


GONE = _event(
    "ERROR",
    {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"},
)


class _Content:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._chunks = [orjson.dumps(e) + b"\n" for e in events]

    async def readany(self) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


@attrs.define
class _Response:
    content: _Content


@attrs.define
class ScriptedClient:
    """Replays lists and watch streams in order, recording the versions watches started from."""

    lists: list[tuple[list[dict[str, Any]], str]]
    watches: list[list[dict[str, Any]] | Exception]
    watched_from: list[str] = attrs.field(factory=list)
    listed: int = 0

    async def list_raw(
        self, kind: object, *, namespace: str | None = None
    ) -> tuple[list[Mapping[str, Any]], str]:
        del kind, namespace
        self.listed += 1
        items, version = self.lists.pop(0)
        return list(items), version

    @contextlib.asynccontextmanager
    async def open_watch(
        self,
        kind: object,
        *,
        resource_version: str,
        timeout_seconds: int,
        namespace: str | None = None,
    ) -> AsyncIterator[_Response]:
        del kind, timeout_seconds, namespace
        self.watched_from.append(resource_version)
        script = self.watches.pop(0)
        if isinstance(script, Exception):
            raise script
        yield _Response(_Content(script))


async def _collect(client: ScriptedClient, count: int, telemetry: Telemetry) -> list[object]:
    settings = WatchingOptions(backoff=Backoff(base=0.001, cap=0.001))
    seen: list[object] = []
    async with contextlib.aclosing(
        infinite_watch(
            cast("KubeClient", client), NODES, settings=settings, metrics=telemetry.metrics
        )
    ) as stream:
        async for entry in stream:
            seen.append(entry)
            if len(seen) == count:
                break
    return seen


def _names(entry: object) -> list[str]:
    assert isinstance(entry, Listed)
    return sorted(item.obj.metadata.name or "" for item in entry.items)


async def test_a_bookmark_moves_the_version_the_next_watch_resumes_from(
    telemetry: Telemetry,
) -> None:
    client = ScriptedClient(
        lists=[([_node("a", "10")], "10")],
        watches=[
            [_event("ADDED", _node("b", "11")), _bookmark("15")],  # then the stream ends
            [_event("MODIFIED", _node("b", "16"))],
        ],
    )
    seen = await _collect(client, 3, telemetry)
    assert _names(seen[0]) == ["a"]
    events = [e for e in seen[1:] if isinstance(e, Event)]
    assert [(e.type, e.item.obj.metadata.resource_version) for e in events] == [
        (EventType.ADDED, "11"),
        (EventType.MODIFIED, "16"),
    ]
    # The second watch starts from the bookmark's version, not from the last object's, and
    # no relist happened: a stream that merely ended is resumed.
    assert client.watched_from == ["10", "15"]
    assert client.listed == 1


@pytest.mark.parametrize(
    "gone",
    [
        pytest.param(GONE, id="error-event"),
        pytest.param(GoneError(410, "Expired", "too old resource version"), id="http-status"),
    ],
)
async def test_410_gone_relists_and_the_new_list_replaces_the_old(
    gone: dict[str, Any] | Exception, telemetry: Telemetry
) -> None:
    first_watch: list[dict[str, Any]] | Exception = (
        [_event("ADDED", _node("b", "11")), gone] if isinstance(gone, dict) else gone
    )
    client = ScriptedClient(
        lists=[([_node("a", "10")], "10"), ([_node("c", "40")], "40")],
        watches=[first_watch, [_event("ADDED", _node("d", "41"))]],
    )
    expected = 4 if isinstance(gone, dict) else 3
    seen = await _collect(client, expected, telemetry)
    listed = [entry for entry in seen if isinstance(entry, Listed)]
    assert [_names(entry) for entry in listed] == [["a"], ["c"]]
    assert client.listed == 2
    # After the relist the watch resumes from the new list's version.
    assert client.watched_from == ["10", "40"]
    last = seen[-1]
    assert isinstance(last, Event)
    assert last.item.obj.metadata.name == "d"
    # A 410 is the protocol working, not a failure: no error is counted and no backoff taken.
    assert "karpy_watch_errors_total{" not in telemetry.prometheus_text()
