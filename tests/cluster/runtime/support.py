"""A small typed ConfigMap model and helpers shared by the runtime cluster tests.

ConfigMaps are cheap, namespaced and carry no controller behaviour, which makes them a clean
subject for list/watch/relist tests; the decoder below is the per-kind seam the informers use.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson
from kubernetes_asyncio import client

from karpy.kube.resources import ResourceKind
from tests.support.probes import http_get


@attrs.frozen
class ConfigMap:
    namespace: str
    name: str
    uid: str
    data: Mapping[str, str]


def decode_config_map(raw: Mapping[str, Any]) -> ConfigMap:
    metadata = raw["metadata"]
    return ConfigMap(
        namespace=metadata["namespace"],
        name=metadata["name"],
        uid=metadata["uid"],
        data=dict(raw.get("data") or {}),
    )


ROOT_CA = "kube-root-ca.crt"
"""The ConfigMap the controller-manager publishes into every namespace; tests ignore it."""

CONFIG_MAPS = ResourceKind[ConfigMap](
    kind="ConfigMap", plural="configmaps", version="v1", decode=decode_config_map
)


async def create_config_map(
    api: client.ApiClient, namespace: str, name: str, value: str = "v"
) -> None:
    await client.CoreV1Api(api).create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"value": value}),
    )


async def server_names(api: client.ApiClient, namespace: str) -> set[str]:
    listing = await client.CoreV1Api(api).list_namespaced_config_map(namespace)
    return {item.metadata.name for item in listing.items} - {ROOT_CA}


@attrs.define
class Replica:
    """One `karpy run` subprocess, its identity and its JSON log file."""

    identity: str
    process: asyncio.subprocess.Process
    log: Path

    def log_entries(self) -> list[dict[str, Any]]:
        entries = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                entries.append(orjson.loads(line))
        return entries

    def ports(self) -> tuple[int, int] | None:
        """(health, metrics) ports once the probe server has logged them."""
        for entry in self.log_entries():
            if entry["message"] == "serving probes and metrics":
                return int(entry["health_probe_port"]), int(entry["metrics_port"])
        return None

    async def is_leader(self, lease: str) -> bool | None:
        """The replica's own view from /metrics; None while it is not serving yet."""
        ports = self.ports()
        if ports is None or self.process.returncode is not None:
            return None
        try:
            status, body = await http_get(ports[1], "/metrics")
        except OSError:
            return None
        assert status == 200
        return f'leader_election_master_status{{name="{lease}"}} 1' in body


async def spawn_replica(
    identity: str, *, kubeconfig: Path, namespace: str, lease: str, workdir: Path
) -> Replica:
    """Start `python -m karpy run` with its own identity, free ports and the given Lease."""
    log = workdir / f"{identity}.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "karpy",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--leader-election-namespace",
            namespace,
            "--leader-election-name",
            lease,
            "--leader-election-identity",
            identity,
            "--metrics-port",
            "0",
            "--health-probe-port",
            "0",
            "--bind-address",
            "127.0.0.1",
            stdout=sink,
            stderr=sink,
        )
    return Replica(identity=identity, process=process, log=log)


async def stop_replica(replica: Replica) -> None:
    """Kill the replica if it still runs and reap it."""
    if replica.process.returncode is None:
        replica.process.kill()
    await replica.process.wait()


async def lease_holder(api: client.ApiClient, namespace: str, lease: str) -> str | None:
    try:
        current = await client.CoordinationV1Api(api).read_namespaced_lease(lease, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    holder: str | None = current.spec.holder_identity
    return holder
