"""``python -m karpy_clusterapi_testbed``: Cluster API's manager and the infrastructure stand-in on
one local cluster, until told to stop.

``karpy demo --provider clusterapi`` and the tests start this as a subprocess (karpy may not
import a provider), naming Cluster API's cached build (``--home``, ``--version``: what
``karpy cluster build --only cluster-api`` made). It installs Cluster API's CRDs and webhooks and
the stand-in's CRDs, starts the manager, applies the demo's fleet when ``--fleet NAME`` is given
(``karpy_clusterapi_testbed.fleet.demo_fleet``), then writes one JSON line to stdout, the *ready
line*:

* ``version``: Cluster API's; ``managerPid``: its manager's process id;
* with ``--fleet``: ``providerSettings`` (the clusterapi provider's ``--provider-setting``
  values) and ``nodeClass``, a ClusterAPINodeClass selecting the fleet.

It then runs the stand-in, writing one more JSON line per Machine happening (``event`` is
``machine-created``, ``machine-claimed``, ``node-registered`` or ``machine-removed``, beside
``machine``, ``machinedeployment``, ``nodeclaim`` and ``node``), until SIGTERM or SIGINT, or,
with ``--until-stdin-closes``, until its parent closes stdin, so it cannot outlive the process
that started it. Then it deletes the Nodes it registered and stops the manager. Logs go to
stderr as JSON. Exit codes: 0 after a clean stop, 2 when Cluster API's build is missing or does
not start (the message says why).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import karpy
from karpy.kube.client import KubeClient
from karpy.kube.install import apply
from karpy.runtime.logging import configure
from karpy_clusterapi_testbed import infrastructure
from karpy_clusterapi_testbed.fleet import demo_fleet, nodeclass
from karpy_clusterapi_testbed.infrastructure import Happening, Testbed
from karpy_clusterapi_testbed.manager import Built, ManagerError, manager

log = logging.getLogger("karpy_clusterapi_testbed")

CLEANUP_TIMEOUT: Final = 20.0
SETUP_TIMEOUT: Final = 60.0


def ready_line(version: str, pid: int, fleet: str | None) -> dict[str, Any]:
    line: dict[str, Any] = {"version": version, "managerPid": pid}
    if fleet is not None:
        line["providerSettings"] = {"namespace": fleet}
        line["nodeClass"] = nodeclass(fleet)
    return line


def _announce(line: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _report(happening: Happening, details: Mapping[str, str]) -> None:
    _announce({"event": happening, **details})


async def serve(
    built: Built,
    *,
    kubeconfig: Path,
    state: Path,
    fleet: str | None,
    small_max_size: int | None,
    until_stdin_closes: bool,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # Its own user agent: the stand-in's polling is not karpy's, and the audit-log tests that
    # count karpy's requests (tests/e2e/test_read_path.py) share a cluster with it.
    kube = await KubeClient.connect(
        kubeconfig, request_timeout=30.0, user_agent=f"karpy-clusterapi-testbed/{karpy.__version__}"
    )
    try:
        async with asyncio.timeout(SETUP_TIMEOUT):
            await infrastructure.install(kube)
        async with manager(kube, built, kubeconfig=kubeconfig, state=state) as running:
            if fleet is not None:
                async with asyncio.timeout(SETUP_TIMEOUT):
                    for manifest in demo_fleet(fleet, small_max_size=small_max_size):
                        await apply(kube, manifest)
            _announce(ready_line(running.version, running.pid, fleet))
            bed = Testbed(kube, _report)
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(bed.run()), group.create_task(stop.wait())]
                if until_stdin_closes:
                    tasks.append(group.create_task(_stdin_closed()))
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    task.cancel()
            async with asyncio.timeout(CLEANUP_TIMEOUT):
                await bed.delete_nodes()
    finally:
        await kube.close()


async def _stdin_closed() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    try:
        while await reader.read(4096):
            pass
    finally:
        transport.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m karpy_clusterapi_testbed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kubeconfig", type=Path, required=True, help="the local cluster")
    parser.add_argument(
        "--home", type=Path, required=True, help="Cluster API's cached build (manager, crds/)"
    )
    parser.add_argument("--version", required=True, help="Cluster API's version there")
    parser.add_argument("--fleet", help="apply the demo's fleet in this namespace")
    parser.add_argument(
        "--small-max-size", type=int, help="the demo fleet's small MachineDeployment's max size"
    )
    parser.add_argument(
        "--state",
        type=Path,
        help="where the manager's log and certificate go (default: a temporary directory)",
    )
    parser.add_argument(
        "--until-stdin-closes", action="store_true", help="stop when stdin reaches its end"
    )
    args = parser.parse_args(argv)
    configure("info", stream=sys.stderr)
    built = Built.at(args.home, args.version)
    if not built.manager.is_file() or not built.crds:
        sys.stderr.write(
            f"karpy_clusterapi_testbed: no Cluster API build in {args.home} "
            "(run 'karpy cluster build --only cluster-api')\n"
        )
        return 2
    try:
        with contextlib.ExitStack() as stack:
            state = args.state or Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="karpy-capi-"))
            )
            state.mkdir(parents=True, exist_ok=True)
            asyncio.run(
                serve(
                    built,
                    kubeconfig=args.kubeconfig,
                    state=state,
                    fleet=args.fleet,
                    small_max_size=args.small_max_size,
                    until_stdin_closes=args.until_stdin_closes,
                )
            )
    except ManagerError as error:
        sys.stderr.write(f"karpy_clusterapi_testbed: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
