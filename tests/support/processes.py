"""Stopping a process a test started: SIGTERM, a grace period, then SIGKILL, always reaped.
(karpy.localcluster.process.stop does the same for the control plane's detached processes,
which it tracks by pid; tests hold a Popen.)"""

from __future__ import annotations

import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any], *, grace: float = 30.0) -> None:
    """Terminate `process`, kill it if it is still running after `grace` seconds, and reap it."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
