"""A helper process the demo runs beside karpy (the AWS emulator, the Cluster API setup).

Each is `python -m MODULE ... --until-stdin-closes`: it prints one JSON line once it is ready,
then whatever it reports, and stops when its stdin closes. Starting, waiting for that line and
stopping it (kill after a grace) are the same for every such process, so they live here once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TextIO

import attrs


@attrs.define
class Sidecar:
    """A running helper: its ready line, its stdout (the rest of what it reports) and its exit
    code once stopped (None before)."""

    ready: Mapping[str, Any]
    stdout: asyncio.StreamReader
    process: asyncio.subprocess.Process


@asynccontextmanager
async def sidecar(
    module: str,
    *args: str,
    what: str,
    log: TextIO,
    error: type[Exception],
    ready_timeout: float,
    stop_timeout: float,
) -> AsyncIterator[Sidecar]:
    """Run `python -m module *args --until-stdin-closes` (stderr to `log`) until the block
    ends. Raises `error`, naming `what` and the log, when it exits before its ready line."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        "--until-stdin-closes",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    stdin, stdout = process.stdin, process.stdout
    if stdin is None or stdout is None:  # both are pipes, as asked above
        raise error(f"{what} was started without pipes")
    try:
        async with asyncio.timeout(ready_timeout):
            line = await stdout.readline()
            if not line:
                code = await process.wait()
                raise error(f"{what} exited ({code}) before it was ready; see {log.name}")
        yield Sidecar(json.loads(line), stdout, process)
    finally:
        stdin.close()
        try:
            async with asyncio.timeout(stop_timeout):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
