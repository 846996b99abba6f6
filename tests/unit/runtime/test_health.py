"""The probe server answers /healthz, /readyz and /metrics over real loopback sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from karpy.runtime.health import ProbeServer


async def get(port: int, path: str, *, method: str = "GET") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split(" ")[1]), body


class Flags:
    ready = False


@pytest.fixture
async def server() -> AsyncIterator[ProbeServer]:
    probes = ProbeServer(
        host="127.0.0.1",
        health_port=0,
        metrics_port=0,
        liveness={"ping": lambda: True},
        readiness={"cluster-state-synced": lambda: Flags.ready},
        metrics=lambda: "karpenter_build_info 1\n",
    )
    Flags.ready = False
    async with asyncio.TaskGroup() as group:
        await probes.start()
        task = group.create_task(probes.run())
        yield probes
        task.cancel()


async def test_healthz_and_readyz(server: ProbeServer) -> None:
    assert await get(server.health_port, "/healthz") == (200, "ok\n")
    status, body = await get(server.health_port, "/readyz")
    assert status == 503
    assert "[-]cluster-state-synced failed" in body
    Flags.ready = True
    assert await get(server.health_port, "/readyz") == (200, "ok\n")


async def test_metrics_on_its_own_port(server: ProbeServer) -> None:
    assert server.metrics_port != server.health_port
    assert await get(server.metrics_port, "/metrics") == (200, "karpenter_build_info 1\n")
    assert (await get(server.health_port, "/metrics"))[0] == 404
    assert (await get(server.metrics_port, "/healthz"))[0] == 404


async def test_unknown_path_and_method(server: ProbeServer) -> None:
    assert (await get(server.health_port, "/nope"))[0] == 404
    assert (await get(server.health_port, "/healthz", method="POST"))[0] == 405
    assert await get(server.health_port, "/healthz", method="HEAD") == (200, "")


async def test_garbage_request_is_dropped_not_fatal(server: ProbeServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.health_port)
    writer.write(b"nonsense\r\n\r\n")
    await writer.drain()
    assert await reader.read() == b""
    writer.close()
    await writer.wait_closed()
    assert (await get(server.health_port, "/healthz"))[0] == 200
