"""Cluster API's core controller manager on a local cluster, with its CRDs and webhooks.

The manager (``sigs.k8s.io/cluster-api/core``, built from Go modules: ``karpy cluster build
--only cluster-api``) serves admission and conversion webhooks; here they are served on
127.0.0.1 with a self-signed certificate made by openssl, and Cluster API's CRDs and webhook
configurations are rewritten to call that URL with that CA (no cert-manager, no Service).
MachineDeployment -> MachineSet -> Machine is then Cluster API's own logic.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import os
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import yaml

from karpy.kube.client import KubeClient
from karpy.kube.install import apply, install_crds

log = logging.getLogger(__name__)

READY_TIMEOUT: Final = 120.0
"""Seconds the manager gets to answer /readyz (a few on an idle machine)."""
STOP_TIMEOUT: Final = 30.0
INSTALL_TIMEOUT: Final = 60.0
OPENSSL_TIMEOUT: Final = 60.0


class ManagerError(RuntimeError):
    """Cluster API's manager did not start; the message says why and where its log is."""


@attrs.frozen
class Built:
    """Cluster API's manager binary and what it is installed with (as ``karpy cluster build``
    caches them)."""

    manager: Path
    crds: tuple[Path, ...]
    webhooks: Path
    version: str

    @classmethod
    def at(cls, home: Path, version: str) -> Built:
        """The build cached in `home` (``manager``, ``crds/*.yaml``, ``webhooks.yaml``)."""
        return cls(
            manager=home / "manager",
            crds=tuple(sorted((home / "crds").glob("*.yaml"))),
            webhooks=home / "webhooks.yaml",
            version=version,
        )


@attrs.frozen
class Running:
    """A running manager: its version, process id and log."""

    version: str
    pid: int
    log: Path


async def certificate(directory: Path) -> bytes:
    """A self-signed serving certificate for 127.0.0.1 (tls.crt, tls.key, as the manager's
    --webhook-cert-dir expects); returns the PEM the apiserver trusts it by."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(directory / "tls.key"),
        "-out",
        str(directory / "tls.crt"),
        "-days",
        "2",
        "-subj",
        "/CN=cluster-api-webhook",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(OPENSSL_TIMEOUT):
        _, err = await process.communicate()
    if process.returncode != 0:
        msg = f"openssl could not make the webhook certificate: {err.decode(errors='replace')}"
        raise ManagerError(msg)
    return await asyncio.to_thread((directory / "tls.crt").read_bytes)


def crd_manifests(built: Built, *, url: str, ca: bytes) -> list[dict[str, Any]]:
    """Cluster API's CRDs, each with more than one version converted through `url`."""
    bundle = base64.b64encode(ca).decode()
    out = []
    for path in built.crds:
        crd = yaml.safe_load(path.read_text())
        if len(crd["spec"]["versions"]) > 1:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": f"{url}/convert", "caBundle": bundle},
                },
            }
        out.append(crd)
    return out


def webhook_manifests(built: Built, *, url: str, ca: bytes) -> list[dict[str, Any]]:
    """Cluster API's admission webhook configurations, each hook calling `url`."""
    bundle = base64.b64encode(ca).decode()
    out = []
    for document in yaml.safe_load_all(built.webhooks.read_text()):
        if not document:
            continue
        configured = copy.deepcopy(document)
        for hook in configured["webhooks"]:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {"url": f"{url}{service['path']}", "caBundle": bundle}
        configured["metadata"] = {"name": f"cluster-api-{configured['metadata']['name']}"}
        out.append(configured)
    return out


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def install(kube: KubeClient, built: Built, *, port: int, ca: bytes) -> None:
    """Cluster API's CRDs (Established) and webhook configurations, pointing at
    https://127.0.0.1:<port>."""
    url = f"https://127.0.0.1:{port}"
    crds = await asyncio.to_thread(crd_manifests, built, url=url, ca=ca)
    webhooks = await asyncio.to_thread(webhook_manifests, built, url=url, ca=ca)
    async with asyncio.timeout(INSTALL_TIMEOUT):
        await install_crds(kube, crds)
        for manifest in webhooks:
            await apply(kube, manifest)


@asynccontextmanager
async def manager(
    kube: KubeClient, built: Built, *, kubeconfig: Path, state: Path
) -> AsyncIterator[Running]:
    """Install Cluster API and run its manager until the block ends (then stop it)."""
    ca = await certificate(state / "certs")
    port, health, diagnostics = _free_port(), _free_port(), _free_port()
    await install(kube, built, port=port, ca=ca)
    logfile = state / "cluster-api.log"
    with logfile.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            str(built.manager),
            f"--webhook-port={port}",
            f"--webhook-cert-dir={state / 'certs'}",
            f"--health-addr=127.0.0.1:{health}",
            f"--diagnostics-address=127.0.0.1:{diagnostics}",
            "--insecure-diagnostics",
            "--leader-elect=false",
            # Preflight checks compare control-plane versions; the stand-in has no control
            # plane provider.
            "--machineset-preflight-checks=",
            "--sync-period=1m",
            # Cluster API rate-limits each object's reconciles, which guards a large fleet
            # and makes each Machine here take ~5 s instead of ~1 s.
            "--feature-gates=ReconcilerRateLimiting=false",
            "--v=2",
            stdout=sink,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        )
    try:
        await _wait_ready(process, health, logfile)
        log.info("cluster api ready", extra={"version": built.version, "pid": process.pid})
        yield Running(version=built.version, pid=process.pid, log=logfile)
    finally:
        await stop(process)


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT."""
    if process.returncode is None:
        process.terminate()
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def _wait_ready(process: asyncio.subprocess.Process, port: int, logfile: Path) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_TIMEOUT
    while loop.time() < deadline:
        if process.returncode is not None:
            tail = (await asyncio.to_thread(logfile.read_text, errors="replace"))[-3000:]
            msg = f"Cluster API's manager exited ({process.returncode}):\n{tail}"
            raise ManagerError(msg)
        if await _answers(port):
            return
        await asyncio.sleep(0.2)
    msg = f"Cluster API's manager was not ready in {READY_TIMEOUT:.0f} s; see {logfile}"
    raise ManagerError(msg)


async def _answers(port: int) -> bool:
    """Whether http://127.0.0.1:<port>/readyz answers 200."""
    try:
        async with asyncio.timeout(5):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(b"GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                await writer.drain()
                status = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    parts: Sequence[bytes] = status.split()
    return len(parts) >= 2 and parts[1] == b"200"
