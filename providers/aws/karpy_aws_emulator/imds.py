"""An instance metadata service (IMDSv2) on 127.0.0.1, for the answers moto has no server for.

karpy asks IMDS for its region when no setting names it, as Karpenter's SDK does. moto's server
does not serve the metadata paths, so this serves the two an SDK region lookup uses, with
IMDSv2's rules: ``PUT /latest/api/token`` with a TTL header hands out a session token, and a
metadata ``GET`` without that token is refused with 401, as on an instance with
``httpTokens: required`` (karpy's own launch templates ask for that). Every request is recorded
so a test can check the exchange, not only its result.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from collections.abc import AsyncIterator
from typing import Final

import attrs
from aiohttp import web

TOKEN_PATH: Final = "/latest/api/token"  # noqa: S105 (a path, not a secret)
ZONE_PATH: Final = "/latest/meta-data/placement/availability-zone"
TOKEN_HEADER: Final = "x-aws-ec2-metadata-token"  # noqa: S105 (a header name)
TTL_HEADER: Final = "x-aws-ec2-metadata-token-ttl-seconds"


@attrs.define
class MetadataService:
    """The running service: its endpoint, the zone it reports, and what it was asked."""

    endpoint: str
    zone: str
    requests: list[tuple[str, str, bool]] = attrs.field(factory=list)
    """(method, path, whether a valid token came with it), in arrival order."""


@contextlib.asynccontextmanager
async def metadata_service(zone: str) -> AsyncIterator[MetadataService]:
    """Serve IMDSv2 for an instance in ``zone`` on a free loopback port until the block ends."""
    tokens: set[str] = set()
    service = MetadataService(endpoint="", zone=zone)

    async def token(request: web.Request) -> web.Response:
        service.requests.append((request.method, request.path, False))
        if TTL_HEADER not in request.headers:
            return web.Response(status=400, text="missing token TTL")
        issued = secrets.token_urlsafe(16)
        tokens.add(issued)
        return web.Response(text=issued)

    async def availability_zone(request: web.Request) -> web.Response:
        valid = request.headers.get(TOKEN_HEADER) in tokens
        service.requests.append((request.method, request.path, valid))
        if not valid:
            return web.Response(status=401, text="IMDSv2 token required")
        return web.Response(text=service.zone)

    app = web.Application()
    app.router.add_put(TOKEN_PATH, token)
    app.router.add_get(ZONE_PATH, availability_zone)
    app.router.add_get(ZONE_PATH + "/", availability_zone)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    service.endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    try:
        await web.SockSite(runner, sock).start()
        yield service
    finally:
        await runner.cleanup()
        sock.close()
