"""A `karpy run` child's probe server, found from its log: tests wait for /readyz rather than
sleep for however long startup took last time.

karpy binds its probes to a free port when run with `--health-probe-port 0` and logs the ports
it got ("serving probes and metrics"), so many processes can run side by side.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from tests.support.waiting import eventually

PROBES_MESSAGE = "serving probes and metrics"


async def http_get(port: int, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:<port><path>; returns (status, body)."""
    async with asyncio.timeout(5):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
            await writer.wait_closed()
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split(" ")[1]), body


def probe_ports(log: Path) -> tuple[int, int] | None:
    """(health, metrics) ports from a JSON log, once the probe server has logged them."""
    if not log.exists():
        return None
    for line in log.read_bytes().splitlines():
        if not line.startswith(b"{"):
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line still being written
        if isinstance(entry, dict) and entry.get("message") == PROBES_MESSAGE:
            return int(entry["health_probe_port"]), int(entry["metrics_port"])
    return None


async def ready(log: Path) -> bool:
    """Whether the process logging to `log` answers /readyz with 200 (its informers listed)."""
    ports = probe_ports(log)
    if ports is None:
        return False
    try:
        status, _ = await http_get(ports[0], "/readyz")
    except (OSError, TimeoutError):
        return False
    return status == 200


async def wait_ready(log: Path, *, within: float = 120.0) -> None:
    """Wait until the process logging to `log` is ready; AssertionError after `within` s."""
    await eventually(lambda: ready(log), within=within, interval=0.1, what="karpy ready")
