"""Cluster API on the session's local control plane, through the shipped management setup
(``python -m karpy_clusterapi_testbed``, as ``karpy demo --provider clusterapi`` runs it): Cluster
API's real core manager, with its CRDs and webhooks served on 127.0.0.1, and the infrastructure
stand-in that provisions TestbedMachines and registers a kwok Node per Machine (see
karpy_clusterapi_testbed.infrastructure for why a stand-in).

The setup runs as a subprocess for the session; its ready line gives Cluster API's version and
the manager's pid, and a thread drains the Machine happenings it reports into `events`. The
fleets the tests scale are made here, from karpy_clusterapi_testbed.fleet's manifests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import pytest

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.kube.install import object_path
from karpy.localcluster import ClusterInfo, ensure_clusterapi
from karpy_clusterapi_testbed import fleet as manifests
from karpy_clusterapi_testbed.infrastructure import CAPI, PROVIDER_ID_PREFIX
from tests.support.kubehttp import KubeHTTP
from tests.support.processes import stop

__all__ = ["CAPI", "PROVIDER_ID_PREFIX", "ClusterAPIEnv", "clusterapi"]

READY_TIMEOUT: Final = 180.0
"""Seconds the setup gets to install Cluster API and start its manager (a few when idle)."""


@attrs.frozen
class ClusterAPIEnv:
    """Cluster API running on the session's cluster, with the infrastructure stand-in."""

    version: str
    manager_pid: int
    log: Path
    kube: KubeHTTP = attrs.field(eq=False)
    events: list[Mapping[str, str]] = attrs.field(eq=False, factory=list)
    """The Machine happenings reported so far (``event``, ``machine``, ``machinedeployment``)."""


def _ready_line(process: subprocess.Popen[bytes], log: Path) -> Mapping[str, Any]:
    """The setup's first stdout line, read on a thread so that a hung start fails in time."""
    found: list[bytes] = []
    reader = threading.Thread(
        target=lambda: found.append(process.stdout.readline() if process.stdout else b""),
        daemon=True,
    )
    reader.start()
    reader.join(READY_TIMEOUT)
    if not found or not found[0]:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"Cluster API's setup was not ready ({process.poll()}):\n{tail}")
    return json.loads(found[0])  # type: ignore[no-any-return]


def _drain(process: subprocess.Popen[bytes], into: list[Mapping[str, str]]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        into.append(json.loads(line))


@pytest.fixture(scope="session")
def clusterapi(
    cluster_info: ClusterInfo, kube_http: KubeHTTP, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterAPIEnv]:
    """Cluster API's manager and the stand-in on the session's cluster (started on first use;
    the tests that use it share one xdist group, so one worker runs it)."""
    built = ensure_clusterapi()
    state = tmp_path_factory.mktemp("cluster-api")
    log = state / "setup.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "karpy_clusterapi_testbed",
                "--kubeconfig",
                str(cluster_info.kubeconfig),
                "--home",
                str(built.manager.parent),
                "--version",
                built.version,
                "--state",
                str(state),
                "--until-stdin-closes",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sink,
        )
    drain: threading.Thread | None = None
    try:
        ready = _ready_line(process, log)
        env = ClusterAPIEnv(
            version=ready["version"], manager_pid=ready["managerPid"], log=log, kube=kube_http
        )
        drain = threading.Thread(target=_drain, args=(process, env.events), daemon=True)
        drain.start()
        yield env
    finally:
        if process.stdin is not None:
            process.stdin.close()
        stop(process, grace=60)
        if drain is not None:
            drain.join(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


# --------------------------------------------------------------------------- fleets


def apply(kube: KubeHTTP, manifest: Mapping[str, Any]) -> Any:
    return kube.apply(object_path(manifest), manifest)


def machine_deployment(
    kube: KubeHTTP,
    namespace: str,
    name: str,
    *,
    cpu: str,
    memory: str,
    announce_shape: bool = True,
    **rest: Any,
) -> Any:
    """A MachineDeployment with its template (karpy_clusterapi_testbed.fleet); without
    `announce_shape`, its shape is in the template's status.capacity instead, as an
    infrastructure provider implementing Cluster API's scale-from-zero contract reports it."""
    apply(kube, manifests.machine_template(namespace, name, cpu=cpu, memory=memory))
    if not announce_shape:
        kube.merge_patch(
            object_path(manifests.machine_template(namespace, name, cpu=cpu, memory=memory))
            + "/status",
            {"status": {"capacity": {"cpu": cpu, "memory": memory}}},
        )
    return apply(
        kube,
        manifests.machine_deployment(
            namespace, name, cpu=cpu, memory=memory, announce_shape=announce_shape, **rest
        ),
    )


def machines(kube: KubeHTTP, namespace: str) -> list[dict[str, Any]]:
    return kube.get(f"{CAPI}/namespaces/{namespace}/machines")["items"]  # type: ignore[no-any-return]


def fleet(kube: KubeHTTP, namespace: str, *, small_max_size: int | None = None) -> None:
    """The demo's fleet in `namespace`: a Cluster and two MachineDeployments labelled
    ``karpy.sh/fleet``: ``small`` (2 vCPU, 8 GiB, zone-a, priced per vCPU and GiB: $0.096/h at
    the defaults) and ``large`` (8 vCPU, 32 GiB, zone-b, annotated $0.20/h)."""
    for manifest in manifests.demo_fleet(namespace, small_max_size=small_max_size):
        apply(kube, manifest)


def nodeclass(kube: KubeHTTP, name: str) -> NodeClassReference:
    """A ClusterAPINodeClass selecting the MachineDeployments of `fleet(kube, name)`."""
    manifest = manifests.nodeclass(name)
    apply(kube, manifest)
    group = manifest["apiVersion"].split("/")[0]
    return NodeClassReference(group=group, kind=manifest["kind"], name=name)


def remove_fleet(kube: KubeHTTP, namespace: str) -> None:
    """Delete the NodeClass and the namespace (Cluster API removes its Machines)."""
    kube.delete(object_path(manifests.nodeclass(namespace)))
    kube.delete(f"/api/v1/namespaces/{namespace}")


def nodepool(
    name: str, intent: str, *, policy: str = "WhenEmpty", consolidate_after: str = "5s"
) -> dict[str, Any]:
    """A NodePool on the ClusterAPINodeClass `name`, its nodes labelled ``intent``."""
    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": intent}},
                "spec": {
                    "requirements": [
                        {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]}
                    ],
                    "nodeClassRef": {
                        "group": "karpenter.cluster.x-k8s.io",
                        "kind": "ClusterAPINodeClass",
                        "name": name,
                    },
                },
            },
            "disruption": {
                "consolidationPolicy": policy,
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": "100%"}],
            },
        },
    }
