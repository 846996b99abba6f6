"""`karpy run`: load options, set up logging, and run the supervisor on uvloop.

This is the process boundary: it turns argv and the environment into `Options`, signals into a
stop event, and failures into an exit code (0 after a clean shutdown, 1 when a root loop failed,
for example when leadership was lost, 2 for bad options, an unusable kubeconfig or a cloud
provider that cannot be found or built).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import uvloop

from karpy.cloudprovider.registry import ProviderError
from karpy.kube.errors import KubeConfigError
from karpy.kube.lease import LeadershipLostError
from karpy.operator.autoscaler import warn_if_cluster_autoscaler
from karpy.operator.globalsettings import with_global_settings
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime import logging as karpy_logging
from karpy.runtime.options import Options, OptionsError, load
from karpy.runtime.solverbanner import silence_solver_banner

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    """Run the operator with `argv` (flags after `karpy run`); returns the exit code."""
    try:
        options = load(argv, os.environ)
    except OptionsError as error:
        sys.stderr.write(f"karpy run: {error}\n")
        return 2
    except SystemExit as exit_:  # argparse: --help or a bad flag
        return exit_.code if isinstance(exit_.code, int) else 2
    karpy_logging.configure(options.log_level)
    silence_solver_banner()
    return uvloop.run(_main(options, argv))


async def _main(options: Options, argv: list[str] | None = None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info(
        "starting karpy",
        extra={
            "identity": options.leader_election.identity,
            "leader_election": options.leader_election.enabled,
            "provider": options.provider.name,
            "cluster_name": options.provider.cluster_name,
        },
    )
    try:
        if argv is not None:
            options = await with_global_settings(argv, options)
        components = await build(options)
    except OptionsError as error:
        log.error("invalid karpenter-global-settings", extra={"error": str(error)})
        return 2
    except KubeConfigError as error:
        log.error("cannot load kubernetes configuration", extra={"error": str(error)})
        return 2
    except ProviderError as error:
        log.error(
            "cannot build the cloud provider",
            extra={"provider": options.provider.name, "error": str(error)},
        )
        return 2
    try:
        await warn_if_cluster_autoscaler(components.client, dry_run=options.dry_run)
        await Supervisor(components, stop=stop).run()
    except ExceptionGroup as group:
        lost, other = group.split(LeadershipLostError)
        if other is not None:
            log.error("karpy stopped on an unexpected error", exc_info=other)
        elif lost is not None:
            log.error("leader election lost", extra={"error": str(lost.exceptions[0])})
        return 1
    finally:
        await components.close()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
