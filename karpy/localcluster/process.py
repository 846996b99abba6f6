"""Process plumbing for the local control plane: spawn, identify, probe and stop components.

The CLI's ``up`` and ``down`` run in different processes, so a component is identified by its
pid *and* its kernel start time (from /proc): a recycled pid is never mistaken for ours and
never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

_PR_SET_PDEATHSIG = 1


@attrs.frozen
class Handle:
    """A running component as recorded in the cluster's state file."""

    pid: int
    start_ticks: int


def spawn(command: Sequence[str], *, log: Path, cwd: Path, detach: bool) -> Handle:
    """Start ``command`` with output appended to ``log``.

    ``detach=True`` puts it in a new session so it outlives the calling process (``karpy cluster
    up``); otherwise the kernel sends it SIGTERM when the caller dies, so a killed test session
    leaves nothing behind. The kernel ties that signal to the *thread* that spawned the child:
    spawn from a long-lived thread (the main one), never from a short-lived worker thread.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
            preexec_fn=None if detach else _die_with_parent,
        )
    _CHILDREN[process.pid] = process
    return Handle(pid=process.pid, start_ticks=_start_ticks(process.pid) or 0)


# Popen objects of children this process started, so that stopping them also reaps them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after the last ')' are fixed.
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_alive(handle: Handle) -> bool:
    """True when ``handle``'s process still runs (and is the same process, not a reused pid)."""
    child = _CHILDREN.get(handle.pid)
    if child is not None and child.poll() is not None:
        return False
    ticks = _start_ticks(handle.pid)
    return ticks is not None and ticks == handle.start_ticks


def rss_bytes(handle: Handle) -> int | None:
    """Resident memory of a live component, from /proc, or None when it is gone."""
    if not is_alive(handle):
        return None
    try:
        for line in Path(f"/proc/{handle.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def stop(handle: Handle, *, grace: float = 10.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. Safe on an already-gone process."""
    if not is_alive(handle):
        _reap(handle.pid)
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(handle.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not is_alive(handle):
            _reap(handle.pid)
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(handle.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while is_alive(handle) and time.monotonic() < deadline:
        time.sleep(0.05)
    _reap(handle.pid)


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_is_free(port: int) -> bool:
    """True when 127.0.0.1:``port`` can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Like the components themselves: a port whose old connections linger in TIME_WAIT
        # after a restart is free to listen on again.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file (empty when it does not exist)."""
    try:
        with path.open(errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return ""


def http_ok(
    url: str,
    *,
    token: str | None = None,
    context: ssl.SSLContext | None = None,
    timeout: float = 2.0,
) -> bool:
    """True when GET ``url`` answers 200. Only ever called with 127.0.0.1 URLs."""
    if not url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")):
        raise ValueError(f"refusing to probe a non-loopback address: {url}")
    request = urllib.request.Request(url)  # noqa: S310 - loopback only, checked above
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def loopback_probe_context() -> ssl.SSLContext:
    """TLS context for health probes of components that serve self-signed certificates.

    Only used against 127.0.0.1 endpoints of processes this package started itself.
    """
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def wait_until(
    check: Callable[[], bool], *, timeout: float, failed: Callable[[], bool], interval: float = 0.1
) -> bool:
    """Poll ``check`` until it is true (returns True), ``failed`` is true or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        if failed():
            return False
        time.sleep(interval)
    return check()
