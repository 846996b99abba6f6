"""moto's threaded server on 127.0.0.1, with the environment AWS clients need to reach it.

moto stands in for AWS wherever karpy runs without it (the aws test tier, the end-to-end
walkthrough, ``karpy demo --provider aws``). It is a development dependency, so it is imported
only here, lazily, and a missing moto is reported with the fix. The server binds to loopback
only (``ThreadedMotoServer`` binds to every address unless told otherwise), and the process's
AWS environment is pointed at fake credentials with no config files or instance metadata, so
nothing can reach real AWS by accident. CreateFleet honours ClientToken as EC2 does
(``karpy_aws_emulator.idempotency``), which moto alone does not, an IPv6 EKS cluster reports
its service CIDR (``karpy_aws_emulator.eks``), and it has placement groups
(``karpy_aws_emulator.placementgroups``), which moto lacks; fleets keep CreateFleet's Context
(``karpy_aws_emulator.fleetcontext``), which moto drops; and it has capacity reservations
that fleets launch into (``karpy_aws_emulator.capacityreservations``), which moto lacks; and an
instance reported impaired (ReportInstanceStatus) fails its status checks
(``karpy_aws_emulator.instancestatus``), where moto reports every instance healthy. A test
or benchmark can put AWS under pressure (throttling, failing calls, pools without capacity)
through ``karpy_aws_emulator.pressure``, which stands in front of moto. moto reads
``MOTO_AMIS_PATH`` when its EC2 models are first imported, so the AMIs are written and the
variable set before that import.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from karpy_aws_emulator import (
    capacityreservations,
    eks,
    fleetcontext,
    idempotency,
    instancestatus,
    launchtemplates,
    placementgroups,
    pressure,
)
from karpy_aws_emulator.world import AMIS, REGION

INSTALL_HINT: Final = (
    "moto is not installed; it is a development dependency of karpy: "
    "pip install -e '.[dev]' (from the karpy checkout)"
)

ENVIRONMENT: Final = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What an AWS client talking to moto needs: fake credentials, and no config file or instance
metadata that could lead it anywhere else."""


class MotoMissingError(RuntimeError):
    """moto (karpy's dev extra) is not installed."""

    def __init__(self) -> None:
        super().__init__(INSTALL_HINT)


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block, then put back what was there."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def moto_server(state_dir: Path, *, port: int = 0) -> Iterator[str]:
    """Run moto on ``127.0.0.1:port`` (0 picks a free port) with the seeded AMIs, and yield its
    endpoint URL; stop it and restore the environment when the block ends.

    Raises MotoMissingError when moto is not installed, RuntimeError when moto's EC2 models were
    imported before (they would not see the AMIs; moto's state is per process).
    """
    if "moto.ec2.models.amis" in sys.modules:
        msg = "moto's EC2 models were imported before the AMIs could be given to them"
        raise RuntimeError(msg)
    amis = state_dir / "amis.json"
    amis.write_text(json.dumps(list(AMIS)))
    with environment({**ENVIRONMENT, "MOTO_AMIS_PATH": str(amis)}):
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as error:
            raise MotoMissingError from error
        pressure.install()
        idempotency.install()
        fleetcontext.install()
        launchtemplates.install()
        eks.install()
        placementgroups.install()
        capacityreservations.install()
        instancestatus.install()
        port = port or _free_port()
        server = _server(ThreadedMotoServer)(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.stop()


def _server(base: type[Any]) -> type[Any]:
    """moto's threaded server with the pressure layer (``karpy_aws_emulator.pressure``) in front
    of its application: ThreadedMotoServer builds the application in its thread, so the
    subclass builds the same one, wrapped."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class Server(base):  # type: ignore[misc]
        def _server_entry(self) -> None:
            app = pressure.layer(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return Server


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the provider stands apart
    from karpy's local-cluster tooling, so it keeps its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
