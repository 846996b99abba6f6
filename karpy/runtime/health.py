"""/healthz, /readyz and /metrics over plain asyncio streams.

Kubernetes probes and Prometheus scrapes need only a tiny slice of HTTP/1.1 (GET, one response,
close), so this serves them straight from `asyncio.start_server` instead of pulling in a web
framework. It runs on every replica, leader or not: a follower must still pass its probes and report
its metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Final

import attrs

log = logging.getLogger(__name__)

READ_TIMEOUT: Final = 5.0
"""Seconds a client may take to send its request head; probes are tiny, a slow one is stuck."""
MAX_HEADER_LINES: Final = 100

Check = Callable[[], bool]

_REASONS: Final = {
    200: "OK",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


@attrs.frozen
class Response:
    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"


class ProbeServer:
    """Serves /healthz and /readyz on `health_port` and /metrics on `metrics_port`.

    Each check is a named, synchronous predicate; a probe passes when all its checks do. Port 0
    binds a free port (read `health_port`/`metrics_port` after `start()`); equal ports share one
    listener.
    """

    def __init__(
        self,
        *,
        host: str,
        health_port: int,
        metrics_port: int,
        liveness: Mapping[str, Check],
        readiness: Mapping[str, Check],
        metrics: Callable[[], str],
    ) -> None:
        self._host = host
        self._health_port = health_port
        self._metrics_port = metrics_port
        self._liveness = dict(liveness)
        self._readiness = dict(readiness)
        self._metrics = metrics
        self._servers: list[asyncio.Server] = []
        self.health_port = health_port
        self.metrics_port = metrics_port

    async def start(self) -> None:
        """Bind the listeners; sets `health_port`/`metrics_port` to the bound ports."""
        shared = self._health_port == self._metrics_port and self._health_port != 0
        health_routes = {"/healthz": self._healthz, "/readyz": self._readyz}
        metrics_routes = {"/metrics": self._render_metrics}
        if shared:
            server = await self._listen(self._health_port, {**health_routes, **metrics_routes})
            self.health_port = self.metrics_port = _port_of(server)
        else:
            health = await self._listen(self._health_port, health_routes)
            metrics = await self._listen(self._metrics_port, metrics_routes)
            self.health_port, self.metrics_port = _port_of(health), _port_of(metrics)
        log.info(
            "serving probes and metrics",
            extra={"health_probe_port": self.health_port, "metrics_port": self.metrics_port},
        )

    async def run(self) -> None:
        """Start (if needed) and serve until cancelled; closes the listeners on the way out."""
        if not self._servers:
            await self.start()
        try:
            async with asyncio.TaskGroup() as group:
                for server in self._servers:
                    group.create_task(server.serve_forever())
        finally:
            await self.close()

    async def close(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()

    async def _listen(
        self, port: int, routes: Mapping[str, Callable[[], Response]]
    ) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._handle(reader, writer, routes)

        server = await asyncio.start_server(handle, self._host, port)
        self._servers.append(server)
        return server

    async def _handle(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        routes: Mapping[str, Callable[[], Response]],
    ) -> None:
        try:
            method, path = await _read_request_head(reader)
            if method not in {"GET", "HEAD"}:
                response = Response(405, "method not allowed\n")
            else:
                handler = routes.get(path.split("?", 1)[0])
                response = handler() if handler is not None else Response(404, "not found\n")
            writer.write(_encode(response, head_only=method == "HEAD"))
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError) as error:
            log.debug("bad probe request", extra={"error": repr(error)})
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                log.debug("probe client went away")

    def _healthz(self) -> Response:
        return _checks_response(self._liveness)

    def _readyz(self) -> Response:
        return _checks_response({**self._liveness, **self._readiness})

    def _render_metrics(self) -> Response:
        return Response(200, self._metrics(), "text/plain; version=0.0.4; charset=utf-8")


def _checks_response(checks: Mapping[str, Check]) -> Response:
    failed = [name for name, check in checks.items() if not check()]
    if failed:
        return Response(503, "".join(f"[-]{name} failed\n" for name in failed))
    return Response(200, "ok\n")


async def _read_request_head(reader: asyncio.StreamReader) -> tuple[str, str]:
    async with asyncio.timeout(READ_TIMEOUT):
        request_line = (await reader.readline()).decode("latin-1").strip()
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            msg = f"malformed request line {request_line[:80]!r}"
            raise ValueError(msg)
        for _ in range(MAX_HEADER_LINES):
            line = await reader.readline()
            if line in {b"\r\n", b"\n", b""}:
                return parts[0], parts[1]
    msg = "too many header lines"
    raise ValueError(msg)


def _encode(response: Response, *, head_only: bool) -> bytes:
    body = response.body.encode()
    head = (
        f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}\r\n"
        f"Content-Type: {response.content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    return head if head_only else head + body


def _port_of(server: asyncio.Server) -> int:
    port: int = server.sockets[0].getsockname()[1]
    return port
