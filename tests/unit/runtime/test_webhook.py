"""The webhook server over real TLS on loopback: a POSTed JSON document gets its handler's
answer, anything else a JSON error, and close() ends connections that never sent a request."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import orjson
import pytest

from karpy.runtime.certs import self_signed
from karpy.runtime.webhook import WebhookServer
from tests.support.waiting import eventually

CERT = self_signed(["127.0.0.1"], now=datetime(2026, 1, 1, tzinfo=UTC))


@pytest.fixture
async def server() -> AsyncIterator[WebhookServer]:
    served = WebhookServer(
        host="127.0.0.1",
        port=0,
        context=CERT.server_context(),
        routes={"/convert": lambda request: {"echo": request}},
    )
    await served.start()
    try:
        yield served
    finally:
        await served.close()


def served(server: WebhookServer) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return server.open_connections > 0

    return probe


def _client() -> ssl.SSLContext:
    return ssl.create_default_context(cadata=CERT.ca.decode())


async def _post(port: int, path: str, body: bytes, method: str = "POST") -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=_client())
    try:
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        async with asyncio.timeout(5):
            answer = await reader.read()
    finally:
        writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    return head.decode().split("\r\n")[0], payload


async def test_a_post_gets_the_handlers_answer(server: WebhookServer) -> None:
    status, payload = await _post(server.port, "/convert", b'{"uid": "1"}')
    assert status == "HTTP/1.1 200 OK"
    assert orjson.loads(payload) == {"echo": {"uid": "1"}}


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        pytest.param("POST", "/other", b"{}", "404", id="unknown path"),
        pytest.param("GET", "/convert", b"", "405", id="not a POST"),
        pytest.param("POST", "/convert", b"{", "400", id="not JSON"),
    ],
)
async def test_anything_else_gets_a_json_error(
    server: WebhookServer, method: str, path: str, body: bytes, expected: str
) -> None:
    status, payload = await _post(server.port, path, body, method)
    assert status.split(" ")[1] == expected
    assert "message" in orjson.loads(payload)


async def test_close_ends_a_connection_that_sent_nothing(server: WebhookServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=_client())
    try:
        await eventually(served(server), within=5, interval=0.01, what="the server's handshake")
        await server.close()
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # the server hung up
    finally:
        writer.close()
