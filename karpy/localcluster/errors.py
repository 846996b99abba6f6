"""Errors of the local control plane, each naming its cause in words a user can act on.

``karpy cluster`` prints ``str(error)`` and exits non-zero; a stack trace alone never reaches
the user. Each error carries the log file to read next where there is one.

    LocalClusterError
    ├── GoToolchainError       no Go on PATH, or one too old to build the pinned release
    ├── BuildFailedError       ``go build`` failed; carries the tail of its output
    ├── PortInUseError         a port the control plane needs is taken
    └── ComponentFailedError   a component exited or never became healthy
"""

from __future__ import annotations

from pathlib import Path


class LocalClusterError(Exception):
    """Base of every error the local control plane raises."""


class GoToolchainError(LocalClusterError):
    """The Go toolchain needed to build the control plane is missing or too old."""


class BuildFailedError(LocalClusterError):
    """Building a component from Go modules failed."""

    def __init__(self, component: str, *, log: Path, tail: str) -> None:
        super().__init__(
            f"building {component} from Go modules failed; last lines of {log}:\n{tail}"
        )
        self.component = component
        self.log = log


class PortInUseError(LocalClusterError):
    """A port the control plane was told to use is already taken."""

    def __init__(self, component: str, port: int) -> None:
        super().__init__(
            f"port 127.0.0.1:{port} for {component} is already in use; stop whatever listens "
            f"there or choose another port"
        )
        self.component = component
        self.port = port


class ComponentFailedError(LocalClusterError):
    """A control-plane process exited early or did not become healthy in time."""

    def __init__(self, component: str, reason: str, *, log: Path, tail: str) -> None:
        super().__init__(f"{component} {reason}; last lines of {log}:\n{tail}")
        self.component = component
        self.log = log
