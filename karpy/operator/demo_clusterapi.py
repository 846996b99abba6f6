"""``karpy demo --provider clusterapi``: Cluster API's manager and an infrastructure stand-in
beside the local cluster.

karpy never imports a provider (an import-linter contract), so the management setup runs as a
subprocess, ``python -m karpy_clusterapi_testbed`` (shipped with ``karpy-clusterapi``): it installs
Cluster API (the core manager ``karpy cluster build --only cluster-api`` cached, built here when
missing) and the stand-in, applies the demo's fleet (MachineDeployments ``small``, 2 vCPU at
$0.096/h and capped at one Machine, and ``large``, 8 vCPU at $0.20/h), and says on its first
stdout line Cluster API's version, the provider's settings and a ClusterAPINodeClass selecting the
fleet. Every later line is a Machine happening (made, claimed by karpy, its Node registered,
removed), which the demo puts on its timeline. The subprocess stops, deleting its Nodes and
stopping the manager, when the demo closes its stdin or dies.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TextIO

import attrs

from karpy.localcluster import ensure_clusterapi
from karpy.operator.sidecar import sidecar

TESTBED_MODULE: Final = "karpy_clusterapi_testbed"
FLEET: Final = "karpy-demo"
"""The management namespace of the demo's MachineDeployments."""
SMALL_MAX_SIZE: Final = 1
"""small, the cheaper MachineDeployment, holds one Machine: the scale to 6 must go to large."""
READY_TIMEOUT: Final = 180.0
"""Seconds Cluster API gets to be installed and its manager to start (a few when idle)."""
STOP_TIMEOUT: Final = 60.0


class TestbedError(RuntimeError):
    """The management setup did not start; the message says why and where its log is."""


@attrs.define
class Testbed:
    """The running setup: Cluster API's version, its ready line, and the Machines karpy has
    claimed (machine key -> MachineDeployment) as it reports them."""

    ready: Mapping[str, Any]
    stdout: asyncio.StreamReader
    claimed: dict[str, str] = attrs.field(factory=dict)
    label: str = "cluster api"

    @property
    def version(self) -> str:
        return str(self.ready["version"])

    @property
    def running(self) -> set[str]:
        """Machines karpy claimed that are not removed yet."""
        return set(self.claimed)

    def flags(self) -> list[str]:
        """``karpy run`` flags: the clusterapi provider and the fleet's namespace."""
        flags = ["--provider", "clusterapi"]
        for key, value in self.ready["providerSettings"].items():
            flags += ["--provider-setting", f"{key}={value}"]
        return flags

    def nodeclass(self, name: str) -> dict[str, Any]:
        """The announced ClusterAPINodeClass, called `name`."""
        return {**self.ready["nodeClass"], "metadata": {"name": name}}

    async def events(self) -> AsyncIterator[Mapping[str, str]]:
        """What the setup reports, as it reports it; keeps `claimed` up to date."""
        while line := await self.stdout.readline():
            event: Mapping[str, str] = json.loads(line)
            machine = event.get("machine", "")
            if event.get("event") == "machine-claimed":
                self.claimed[machine] = event.get("machinedeployment", "")
            elif event.get("event") == "machine-removed":
                self.claimed.pop(machine, None)
            yield event


def describe(event: Mapping[str, str]) -> str:
    """One timeline line for a Machine happening."""
    machine = event.get("machine", "?")
    md = event.get("machinedeployment", "?")
    messages = {
        "machine-created": f"Machine {machine} created by MachineDeployment {md}",
        "machine-claimed": f"Machine {machine} of {md} claimed by nodeclaim "
        f"{event.get('nodeclaim', '?')}",
        "node-registered": f"Machine {machine} provisioned: node {event.get('node', '?')} joined",
        "machine-removed": f"Machine {machine} of {md} removed",
    }
    return messages.get(event.get("event", ""), str(dict(event)))


@asynccontextmanager
async def testbed(*, kubeconfig: Path, log: TextIO) -> AsyncIterator[Testbed]:
    """Start the setup on the cluster of `kubeconfig` (its logs go to `log`) and stop it
    afterwards. Raises TestbedError when it exits before it is ready (karpy-clusterapi not
    installed, Cluster API's manager failing to start; its log says which)."""
    if importlib.util.find_spec(TESTBED_MODULE) is None:
        msg = (
            "--provider clusterapi needs karpy-clusterapi installed beside karpy "
            "(pip install providers/clusterapi)"
        )
        raise TestbedError(msg)
    built = await asyncio.to_thread(ensure_clusterapi)
    async with sidecar(
        TESTBED_MODULE,
        "--kubeconfig",
        str(kubeconfig),
        "--home",
        str(built.manager.parent),
        "--version",
        built.version,
        "--fleet",
        FLEET,
        "--small-max-size",
        str(SMALL_MAX_SIZE),
        what="the Cluster API setup",
        log=log,
        error=TestbedError,
        ready_timeout=READY_TIMEOUT,
        stop_timeout=STOP_TIMEOUT,
    ) as helper:
        yield Testbed(helper.ready, helper.stdout)
