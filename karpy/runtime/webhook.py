"""An HTTPS endpoint for the apiserver's webhook calls (ConversionReviews), over asyncio streams.

The apiserver POSTs one JSON document and reads one JSON answer, so like the probe server
(karpy.runtime.health) this needs only a slice of HTTP/1.1 and no web framework. Each path maps
to a pure handler from request body to response body; the handler runs inline (conversion is
CPU-bound and short), so a request never waits on anything but its own bytes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Final

import orjson

log = logging.getLogger(__name__)

READ_TIMEOUT: Final = 10.0
"""Seconds a client may take to send its whole request; the apiserver's own webhook timeout is
30 s at most, so a slower sender has given up already."""
MAX_HEADER_LINES: Final = 100
MAX_BODY: Final = 64 * 1024 * 1024
"""Largest request body read: a ConversionReview of a whole list of big objects."""

Handler = Callable[[object], object]
"""Decoded JSON request -> JSON-ready response."""

_REASONS: Final = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


class WebhookServer:
    """Serves `routes` over TLS on `host:port` (0: a free port, read `port` after `start()`)."""

    def __init__(
        self, *, host: str, port: int, context: ssl.SSLContext, routes: Mapping[str, Handler]
    ) -> None:
        self._host = host
        self._context = context
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[object]] = set()
        """The task serving each open connection: asyncio.Server starts them and this server
        owns them, so close() ends the ones still reading."""
        self.port = port

    @property
    def open_connections(self) -> int:
        """Connections being served right now."""
        return len(self._connections)

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, self._host, self.port, ssl=self._context
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("serving webhooks", extra={"port": self.port, "paths": sorted(self._routes)})

    async def run(self) -> None:
        """Start (if needed) and serve until cancelled; closes the listener on the way out."""
        if self._server is None:
            await self.start()
        assert self._server is not None  # noqa: S101 - start() sets it
        try:
            await self._server.serve_forever()
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop listening, and end the connections still open (a client that connected and
        has not sent its request yet, say)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        connections, self._connections = self._connections, set()
        for task in connections:
            task.cancel()
        if connections:
            await asyncio.wait(connections)
        if server is not None:
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._server is None:  # a handshake that finished after close(): hang up
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                method, path, body = await _read_request(reader)
            status, payload = self._respond(method, path, body)
            writer.write(_encode(status, payload))
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError, ssl.SSLError) as error:
            log.debug("bad webhook request", extra={"error": repr(error)})
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                log.debug("webhook client went away")

    def _respond(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        handler = self._routes.get(path.split("?", 1)[0])
        if handler is None:
            return 404, b'{"message":"not found"}'
        if method != "POST":
            return 405, b'{"message":"POST only"}'
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            return 400, orjson.dumps({"message": f"request body is not JSON: {error}"})
        return 200, orjson.dumps(handler(request))


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    request_line = (await reader.readline()).decode("latin-1").strip()
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        msg = f"malformed request line {request_line[:80]!r}"
        raise ValueError(msg)
    length = 0
    for _ in range(MAX_HEADER_LINES):
        line = (await reader.readline()).decode("latin-1")
        if line in {"\r\n", "\n", ""}:
            if length > MAX_BODY:
                msg = f"request body of {length} bytes is over {MAX_BODY}"
                raise ValueError(msg)
            return parts[0], parts[1], await reader.readexactly(length)
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    msg = "too many header lines"
    raise ValueError(msg)


def _encode(status: int, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    return head + body
