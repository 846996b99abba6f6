"""``python -m karpy_aws_emulator``: moto for one cluster, seeded, with the kubelet-join bridge.

``karpy demo --provider aws`` and the end-to-end walkthrough start this as a subprocess (karpy
may not import karpy_aws). It starts moto on 127.0.0.1, seeds the world (subnets and the
``nodes`` security group tagged ``karpenter.sh/discovery=<cluster>``, EKS AMIs with their alias
parameters, the node role ``KarpyNodeRole``), then writes one JSON line to stdout — the *ready
line* — with what karpy needs to use it:

* ``endpoint``, ``region``;
* ``environment``: the AWS variables karpy's process must have (fake credentials, no config);
* ``providerSettings``: ``--provider-setting`` values for the aws provider (region, endpoint,
  loopback only, the cluster's API endpoint and CA from ``--kubeconfig``, estimated prices);
* ``nodeClass``: an EC2NodeClass (apiVersion, kind, spec) that discovers the seeded world.

It then runs the bridge, writing one more JSON line per thing it sees or does (``event`` is
``instance-running``, ``instance-ended``, ``node-joined`` or ``node-left``, beside ``instance``,
``instance-type``, ``zone``, ``capacity-type`` and ``node``), until SIGTERM or SIGINT — or,
with ``--until-stdin-closes``, until its parent closes stdin, so it cannot outlive the process
that started it — and finally deletes the Nodes it made (their instances end with moto). Logs
go to stderr as JSON. Exit codes: 0 after a clean stop, 2 when moto is not installed (the
message says how to install it).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.kinds import NODES
from karpy.runtime.logging import configure
from karpy_aws.apis import labels as awslabels
from karpy_aws.session import AWSSession, AWSSettings
from karpy_aws_emulator.bridge import Happening, KubeletBridge
from karpy_aws_emulator.join import by_instance_id
from karpy_aws_emulator.server import ENVIRONMENT, MotoMissingError, moto_server
from karpy_aws_emulator.world import REGION, seed

log = logging.getLogger("karpy_aws_emulator")

NODE_ROLE: Final = "KarpyNodeRole"
KUBERNETES_VERSIONS: Final = tuple(f"1.{minor}" for minor in range(28, 37))
"""Alias parameters are seeded for each of these, whatever version the cluster reports."""
CLEANUP_TIMEOUT: Final = 20.0


def ready_line(endpoint: str, *, cluster_name: str, kubeconfig: Path) -> dict[str, Any]:
    """The JSON document announced on stdout once moto is seeded."""
    server, ca_bundle = _cluster_endpoint(kubeconfig)
    discovery = [{"tags": {"karpenter.sh/discovery": cluster_name}}]
    return {
        "endpoint": endpoint,
        "region": REGION,
        "environment": dict(ENVIRONMENT),
        "providerSettings": {
            "region": REGION,
            "endpoint-url": endpoint,
            "require-loopback-endpoint": "true",
            "cluster-endpoint": server,
            "cluster-ca-bundle": ca_bundle,
            "use-pricing-api": "false",
        },
        "nodeClass": {
            "apiVersion": f"{awslabels.AWS_GROUP}/v1",
            "kind": "EC2NodeClass",
            "spec": {
                "subnetSelectorTerms": discovery,
                "securityGroupSelectorTerms": discovery,
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "role": NODE_ROLE,
            },
        },
    }


def _cluster_endpoint(kubeconfig: Path) -> tuple[str, str]:
    """The current context's API server URL and its CA bundle, base64 (as EKS reports it)."""
    config: Mapping[str, Any] = yaml.safe_load(kubeconfig.read_text())
    context_name = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    if "certificate-authority-data" in cluster:
        ca = str(cluster["certificate-authority-data"])
    else:
        ca_path = Path(cluster["certificate-authority"])
        if not ca_path.is_absolute():
            ca_path = kubeconfig.parent / ca_path
        ca = base64.b64encode(ca_path.read_bytes()).decode()
    return str(cluster["server"]), ca


async def serve(
    endpoint: str,
    *,
    kubeconfig: Path,
    cluster_name: str,
    interval: float,
    until_stdin_closes: bool,
) -> None:
    """Run the bridge until a signal (or stdin's end), then delete the Nodes it made."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    kube = await KubeClient.connect(kubeconfig, request_timeout=30.0)
    settings = AWSSettings(region=REGION, endpoint_url=endpoint, require_loopback_endpoint=True)
    try:
        async with AWSSession(settings) as session:
            bridge = KubeletBridge(
                await session.client("ec2"),
                kube,
                cluster_name=cluster_name,
                report=_announce,
            )
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(bridge.run(interval=interval)),
                    group.create_task(stop.wait()),
                ]
                if until_stdin_closes:
                    tasks.append(group.create_task(_stdin_closed()))
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    task.cancel()
        async with asyncio.timeout(CLEANUP_TIMEOUT):
            await _delete_nodes(kube, cluster_name=cluster_name)
    finally:
        await kube.close()


def _announce(happening: Happening, details: Mapping[str, str]) -> None:
    sys.stdout.write(json.dumps({"event": happening, **details}) + "\n")
    sys.stdout.flush()


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


async def _delete_nodes(kube: KubeClient, *, cluster_name: str) -> None:
    listed = await kube.list(NODES)
    for node in by_instance_id((i.obj for i in listed.items), cluster_name=cluster_name).values():
        with contextlib.suppress(NotFoundError):
            await kube.delete(NODES, node.metadata.name or "")
            log.info("deleted node at shutdown", extra={"node": node.metadata.name})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m karpy_aws_emulator", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kubeconfig", type=Path, required=True, help="cluster Nodes join")
    parser.add_argument("--cluster-name", required=True, help="karpy's --cluster-name")
    parser.add_argument("--port", type=int, default=0, help="moto's port (default: a free one)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between passes")
    parser.add_argument(
        "--until-stdin-closes", action="store_true", help="stop when stdin reaches its end"
    )
    args = parser.parse_args(argv)
    configure("info", stream=sys.stderr)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request lines
    try:
        with (
            tempfile.TemporaryDirectory(prefix="karpy-moto-") as state,
            moto_server(Path(state), port=args.port) as endpoint,
        ):
            seed(
                endpoint,
                discovery={"karpenter.sh/discovery": args.cluster_name},
                kubernetes_versions=KUBERNETES_VERSIONS,
                node_role=NODE_ROLE,
            )
            ready = ready_line(endpoint, cluster_name=args.cluster_name, kubeconfig=args.kubeconfig)
            sys.stdout.write(json.dumps(ready) + "\n")
            sys.stdout.flush()
            log.info("moto ready", extra={"endpoint": endpoint, "cluster": args.cluster_name})
            asyncio.run(
                serve(
                    endpoint,
                    kubeconfig=args.kubeconfig,
                    cluster_name=args.cluster_name,
                    interval=args.interval,
                    until_stdin_closes=args.until_stdin_closes,
                )
            )
    except MotoMissingError as error:
        sys.stderr.write(f"karpy_aws_emulator: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
