"""Watch streams cut in the middle of a command: a TCP proxy between karpy and kube-apiserver
that can drop or silence every connection karpy holds, and etcd compaction that expires the
resourceVersion karpy's informers would resume from.

karpy's informers list once and then hold a watch stream per kind, re-watching from the last
resourceVersion they saw whenever a stream ends cleanly (the server's timeout, or silence past
the inactivity timeout) and relisting after a broken stream. In production those streams end in
three ways a clean apiserver never shows a test:

* **expired** (`expire`): the resourceVersion a re-watch resumes from is older than what the
  apiserver still holds, so it is answered 410 Gone and the informer relists, replacing
  everything it knew. etcd is compacted at its current revision at the moment; each stream's
  next re-watch (they end every `WATCH_TIMEOUT`, 15 s in these trials) meets the 410. The
  apiserver must serve watches from etcd for this (`--watch-cache=false`): its watch cache
  keeps every event younger than 75 s, so within a trial only compaction can expire a
  version, and the 410 is the apiserver's own.
* **dropped** (`drop`): a load balancer or the apiserver's own restart resets every
  connection. Streams break and relist; a request in flight (a write of the command under
  way) fails after it may have landed.
* **silent** (`stall`): an idle timeout on a middlebox drops every connection without telling
  either end. Nothing arrives, not even a bookmark, and nothing fails: each informer must notice
  the silence itself (`WATCH_INACTIVITY_TIMEOUT`, 30 s in these trials against 120 s by
  default, so that a trial does not idle two minutes) and re-watch, and a request sent on such
  a connection waits for the client's request timeout.

The proxy forwards bytes only (TLS passes through untouched, so karpy checks the apiserver's own
certificate), and the kubeconfig karpy gets differs from the cluster's in its server's port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import aiohttp
import attrs

from karpy.localcluster import LocalCluster

CUTS: Final = ("expire", "drop", "stall")
"""Ways a cut comes (see the module docstring)."""
CONNECT_TIMEOUT: Final = 10.0
CHUNK: Final = 65536


@attrs.define(eq=False)
class _Pair:
    """One client connection and its upstream."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    stalled: asyncio.Event = attrs.field(factory=asyncio.Event)
    lose_answer: bool = False
    """Reset the connection when the apiserver's next bytes arrive, instead of passing them:
    the request was served, its answer never comes."""

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            writer.transport.abort()


class CuttingProxy:
    """Forwards 127.0.0.1:`port` to the apiserver; `cut()` and `stall()` act on every connection
    open at that moment (those opened later flow normally)."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._pairs: set[_Pair] = set()
        self._stalled: set[_Pair] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.opened = 0
        """Connections accepted so far."""

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for pair in self._pairs | self._stalled:
            pair.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        if self._server is not None:
            await self._server.wait_closed()

    def cut(self) -> int:
        """Reset every open connection (both ends); returns how many."""
        pairs = list(self._pairs)
        for pair in pairs:
            pair.abort()
        return len(pairs)

    def stall(self) -> int:
        """Stop forwarding on every open connection, in both directions, and keep it open:
        to both ends it goes silent, as behind a middlebox that dropped it. Returns how many."""
        pairs = list(self._pairs)
        for pair in pairs:
            pair.stalled.set()
            self._pairs.discard(pair)
            self._stalled.add(pair)
        return len(pairs)

    def lose_answers(self) -> int:
        """On every open connection, the apiserver's next answer is lost: the connection is
        reset when its first bytes arrive (a request already sent was served). Returns how
        many connections are armed."""
        for pair in self._pairs:
            pair.lose_answer = True
        return len(self._pairs)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except (OSError, TimeoutError):
            writer.transport.abort()
            return
        pair = _Pair(client=writer, upstream=up_writer)
        self._pairs.add(pair)
        tasks = [
            asyncio.create_task(self._pump(reader, up_writer, pair, answers=False)),
            asyncio.create_task(self._pump(up_reader, writer, pair, answers=True)),
        ]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not pair.stalled.is_set():
                pair.abort()
                for task in tasks:
                    task.cancel()
                self._pairs.discard(pair)
            for task in tasks:
                task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pair: _Pair, *, answers: bool
    ) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while not pair.stalled.is_set():
                data = await reader.read(CHUNK)
                if not data or pair.stalled.is_set():
                    break
                if answers and pair.lose_answer:
                    pair.abort()
                    break
                writer.write(data)
                await writer.drain()
        if pair.stalled.is_set():
            # Silent, not closed: hold the connection until the proxy closes.
            await asyncio.Event().wait()


def proxied_kubeconfig(kubeconfig: Path, port: int, into: Path) -> Path:
    """A copy of `kubeconfig` whose server is the proxy on `port` (same host, so the
    apiserver's certificate still names it)."""
    lines = []
    for line in kubeconfig.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("server: https://127.0.0.1:"):
            line = line[: line.index("server:")] + f"server: https://127.0.0.1:{port}"
        lines.append(line)
    if not any("server: https://127.0.0.1:" in line for line in lines):
        msg = f"{kubeconfig}: no server on 127.0.0.1 to proxy"
        raise ValueError(msg)
    into.write_text("\n".join(lines) + "\n")
    return into


def apiserver_port(kubeconfig: Path) -> int:
    for line in kubeconfig.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("server: https://127.0.0.1:"):
            return int(stripped.rsplit(":", 1)[1])
    msg = f"{kubeconfig}: no server on 127.0.0.1"
    raise ValueError(msg)


async def compact_etcd(cluster: LocalCluster) -> int:
    """Compact `cluster`'s etcd at its current revision (through etcd's JSON gateway); returns
    the revision. Every watch resumed from an older resourceVersion is then answered 410 Gone
    by an apiserver without a watch cache."""
    port = next(c.port for c in cluster.status() if c.name == "etcd")
    base = f"http://127.0.0.1:{port}/v3/kv"
    key = base64.b64encode(b"/registry/").decode()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(f"{base}/range", json={"key": key, "limit": 1}) as response:
            response.raise_for_status()
            revision = int((await response.json())["header"]["revision"])
        body = {"revision": str(revision), "physical": True}
        async with session.post(f"{base}/compaction", json=body) as response:
            response.raise_for_status()
    return revision


@attrs.frozen(kw_only=True)
class WatchCut:
    """Where a watch-cut trial sends karpy: through `proxy`, with `kubeconfig` naming it;
    `control_plane` is the cluster whose etcd `expire` compacts (its apiserver must run
    without a watch cache)."""

    proxy: CuttingProxy
    kubeconfig: Path
    control_plane: LocalCluster | None = None
    mode: str = "expire"
    watch_timeout: float = 15.0
    """karpy's `WATCH_TIMEOUT` in these trials: streams end this often, so a compaction
    expires each within this long."""
    inactivity_timeout: float = 30.0
    """karpy's `WATCH_INACTIVITY_TIMEOUT` in these trials: a silent stream is noticed this
    late (120 s by default)."""

    @property
    def environment(self) -> dict[str, str]:
        return {
            "WATCH_TIMEOUT": f"{self.watch_timeout:g}s",
            "WATCH_INACTIVITY_TIMEOUT": f"{self.inactivity_timeout:g}s",
        }


@contextlib.asynccontextmanager
async def watch_cut(
    kubeconfig: Path,
    into: Path,
    *,
    mode: str,
    control_plane: LocalCluster | None = None,
    watch_timeout: float = 15.0,
) -> AsyncIterator[WatchCut]:
    """A proxy in front of `kubeconfig`'s apiserver and a kubeconfig (written into the directory
    `into`) that reaches it through the proxy."""
    if mode not in CUTS:
        msg = f"cut {mode!r}: expected one of {', '.join(CUTS)}"
        raise ValueError(msg)
    if mode == "expire" and control_plane is None:
        msg = "an expire cut needs the control plane whose etcd it compacts"
        raise ValueError(msg)
    proxy = CuttingProxy("127.0.0.1", apiserver_port(kubeconfig))
    port = await proxy.start()
    try:
        path = proxied_kubeconfig(kubeconfig, port, into / f"proxied-{port}.kubeconfig")
        yield WatchCut(
            proxy=proxy,
            kubeconfig=path,
            control_plane=control_plane,
            mode=mode,
            watch_timeout=watch_timeout,
        )
    finally:
        await proxy.close()


async def cut_at(cut: WatchCut, seconds: float) -> None:
    """`seconds` from now: compact etcd (`expire`), or reset (`drop`) or silence (`stall`)
    every connection karpy holds."""
    await asyncio.sleep(seconds)
    if cut.mode == "stall":
        cut.proxy.stall()
    elif cut.mode == "drop":
        cut.proxy.cut()
    elif cut.control_plane is not None:
        await compact_etcd(cut.control_plane)
