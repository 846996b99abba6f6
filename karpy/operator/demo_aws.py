"""``karpy demo --provider aws``: moto and its kubelet-join bridge beside the local cluster.

karpy never imports karpy_aws (an import-linter contract), so the AWS stand-in runs as a
subprocess, ``python -m karpy_aws_emulator``: moto on 127.0.0.1, seeded for the demo's cluster,
plus a bridge that registers a Node (which kwok then runs) for every instance moto launches and
removes it once the instance ends. The subprocess's first stdout line says how to use it — the
AWS environment karpy's process needs, the aws provider's settings and an EC2NodeClass that
discovers the seeded subnets, security group and AMIs — and every later line is something the
bridge saw in moto (an instance running or ended, a Node joined or left), which the demo puts on
its timeline. The subprocess watches its stdin and stops when the demo closes it or dies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TextIO

import attrs

from karpy.apis.v1 import labels as wk
from karpy.operator.sidecar import sidecar
from karpy.runtime.options import NAMED_PROVIDER_SETTINGS

EMULATOR_MODULE: Final = "karpy_aws_emulator"
READY_TIMEOUT: Final = 90.0
"""Seconds moto gets to start and be seeded (a few on an idle machine)."""
STOP_TIMEOUT: Final = 30.0
"""Seconds the emulator gets to delete its Nodes and stop once stdin is closed."""
NODEPOOL_REQUIREMENTS: Final = (
    (wk.LABEL_INSTANCE_TYPE, ("m5.large", "m5.2xlarge")),
    (wk.LABEL_TOPOLOGY_ZONE, ("us-west-2a", "us-west-2b")),
)
"""The AWS walkthrough's NodePool: these types in these zones (spot or on-demand, as every demo
pool)."""


class EmulatorError(RuntimeError):
    """The emulator did not start; the message says why and where its log is."""


@attrs.define
class Emulator:
    """The running emulator: its cluster, its ready line, and the instances moto reports
    running."""

    cluster_name: str
    ready: Mapping[str, Any]
    stdout: asyncio.StreamReader
    running: set[str] = attrs.field(factory=set)
    exit_code: int | None = None
    """The emulator's exit status once it stopped (0 when it cleaned up and exited normally)."""

    def environment(self) -> dict[str, str]:
        """The AWS variables karpy's process needs to reach moto (fake credentials)."""
        return {str(k): str(v) for k, v in self.ready["environment"].items()}

    def flags(self) -> list[str]:
        """``karpy run`` flags: the aws provider, this cluster and moto's settings, each under
        Karpenter's flag where it has one (``--cluster-endpoint``), as a Karpenter user gives
        them, else as ``--provider-setting key=value``."""
        named = {s.key: s.flag for s in NAMED_PROVIDER_SETTINGS if s.provider == "aws" and s.flag}
        flags = ["--provider", "aws", "--cluster-name", self.cluster_name]
        for key, value in self.ready["providerSettings"].items():
            flag = named.get(key)
            flags += [flag, value] if flag else ["--provider-setting", f"{key}={value}"]
        return flags

    def nodeclass(self, name: str) -> dict[str, Any]:
        """The announced EC2NodeClass, called ``name``."""
        return {**self.ready["nodeClass"], "metadata": {"name": name}}

    async def events(self) -> AsyncIterator[Mapping[str, str]]:
        """What the bridge reports, as it reports it; keeps ``running`` up to date."""
        while line := await self.stdout.readline():
            event: Mapping[str, str] = json.loads(line)
            instance = event.get("instance", "")
            if event.get("event") == "instance-running":
                self.running.add(instance)
            elif event.get("event") == "instance-ended":
                self.running.discard(instance)
            yield event


@asynccontextmanager
async def emulator(*, kubeconfig: Path, cluster_name: str, log: TextIO) -> AsyncIterator[Emulator]:
    """Start the emulator for ``cluster_name`` (its logs go to ``log``) and stop it afterwards.

    Raises EmulatorError when it exits before it is ready (for instance when moto, a
    development dependency, is not installed; its log says how to install it).
    """
    async with sidecar(
        EMULATOR_MODULE,
        "--kubeconfig",
        str(kubeconfig),
        "--cluster-name",
        cluster_name,
        what="the AWS emulator",
        log=log,
        error=EmulatorError,
        ready_timeout=READY_TIMEOUT,
        stop_timeout=STOP_TIMEOUT,
    ) as helper:
        running = Emulator(cluster_name, helper.ready, helper.stdout)
        yield running
    running.exit_code = helper.process.returncode


def last_line(path: Path) -> str:
    """The last non-empty line of a log (where the emulator says why it could not start)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return lines[-1] if lines else ""
