"""Cluster API on the local control plane: its real core controller manager, and a small
infrastructure stand-in of the tests' own.

The manager (``sigs.k8s.io/cluster-api/core``, built from Go modules and cached by
karpy.localcluster.build.ensure_clusterapi) runs against the session's apiserver with its CRDs and
admission and conversion webhooks installed, served on 127.0.0.1 with a certificate made by
openssl (no cert-manager): MachineDeployment -> MachineSet -> Machine is Cluster API's own logic.

Infrastructure is a stand-in. Cluster API's in-memory backend lives in the
``sigs.k8s.io/cluster-api/test`` module: as a dependency that module asks for
``sigs.k8s.io/cluster-api`` at the v0.0.0 of its local replace, which the Go module proxy does
not serve; pinned, v1.13.7 needs ``sigs.k8s.io/cluster-api`` v1.13.7, which is not served either,
and v1.14.2 resolves, but ``test/infrastructure/inmemory`` is a library and the binary that
serves it (``test/infrastructure/docker``) had not finished compiling after 30 minutes here. It
would not do the whole job anyway: it keeps the workload cluster's Nodes in an in-memory
apiserver of its own, where karpy does not look. So the tests bring their own infrastructure
kinds (group ``infrastructure.testbed.karpy.dev``,
labelled for Cluster API's v1beta2 contract): a TestbedCluster that is provisioned at once, a
TestbedMachineTemplate, and TestbedMachines that the stand-in's loop marks provisioned with a
providerID ``testbed:///<namespace>/<name>``. For each Machine with a providerID it registers a
Node, as a kubelet would, annotated for kwok to run it, with the capacity of its template and
the labels and taints of its MachineDeployment's scale-from-zero annotations; it deletes that
Node once the Machine is gone. A Node it made is made once: karpy's termination deletes it first.
"""

from __future__ import annotations

import base64
import copy
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
import yaml

from karpy.apis.v1.common import NodeClassReference
from karpy.localcluster import ClusterInfo, ensure_clusterapi
from karpy.localcluster.process import free_port
from tests.support.kubehttp import KubeHTTP, KubeHTTPError
from tests.support.processes import stop

TESTBED_GROUP: Final = "infrastructure.testbed.karpy.dev"
TESTBED_VERSION: Final = "v1alpha1"
PROVIDER_ID_PREFIX: Final = "testbed:///"
NODE_ANNOTATION: Final = f"{TESTBED_GROUP}/machine"
"""On a Node the stand-in registered: ``<namespace>/<name>`` of its Machine."""
CAPI: Final = "/apis/cluster.x-k8s.io/v1beta2"
TESTBED: Final = f"/apis/{TESTBED_GROUP}/{TESTBED_VERSION}"
CRDS: Final = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@attrs.frozen
class ClusterAPIManager:
    """A running Cluster API core manager."""

    version: str
    log: Path
    process: subprocess.Popen[bytes] = attrs.field(eq=False, repr=False)


def _certificate(directory: Path) -> bytes:
    """A self-signed serving certificate for 127.0.0.1 (tls.crt, tls.key); returns the PEM the
    apiserver trusts it by."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
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
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return (directory / "tls.crt").read_bytes()


def _wait_established(kube: KubeHTTP, names: list[str], *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = kube.get(f"{CRDS}/{name}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} never became Established")
            time.sleep(0.1)


def install_clusterapi(kube: KubeHTTP, *, port: int, ca: bytes) -> None:
    """Cluster API's CRDs (conversion through its webhook) and its webhook configurations, all
    pointing at https://127.0.0.1:<port>."""
    built = ensure_clusterapi()
    bundle = base64.b64encode(ca).decode()
    url = f"https://127.0.0.1:{port}"
    names = []
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
        name = crd["metadata"]["name"]
        kube.apply(f"{CRDS}/{name}", crd)
        names.append(name)
    _wait_established(kube, names)
    for document in yaml.safe_load_all(built.webhooks.read_text()):
        if not document:
            continue
        configured = copy.deepcopy(document)
        for hook in configured["webhooks"]:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {"url": f"{url}{service['path']}", "caBundle": bundle}
        plural = (
            "mutatingwebhookconfigurations"
            if configured["kind"] == "MutatingWebhookConfiguration"
            else "validatingwebhookconfigurations"
        )
        name = f"cluster-api-{configured['metadata']['name']}"
        configured["metadata"] = {"name": name}
        kube.apply(f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}", configured)


@contextmanager
def clusterapi_manager(
    info: ClusterInfo, kube: KubeHTTP, state: Path
) -> Iterator[ClusterAPIManager]:
    """Install Cluster API and run its core manager until the block ends."""
    built = ensure_clusterapi()
    certs = state / "certs"
    ca = _certificate(certs)
    port, health, diagnostics = free_port(), free_port(), free_port()
    install_clusterapi(kube, port=port, ca=ca)
    install_testbed(kube)
    log = state / "cluster-api.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                str(built.manager),
                f"--webhook-port={port}",
                f"--webhook-cert-dir={certs}",
                f"--health-addr=127.0.0.1:{health}",
                f"--diagnostics-address=127.0.0.1:{diagnostics}",
                "--insecure-diagnostics",
                "--leader-elect=false",
                # Preflight checks compare control-plane versions; the testbed has no control
                # plane provider.
                "--machineset-preflight-checks=",
                "--sync-period=1m",
                # Cluster API rate-limits each object's reconciles, which guards a large fleet
                # and makes each Machine here take ~5 s instead of ~1 s.
                "--feature-gates=ReconcilerRateLimiting=false",
                "--v=2",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(info.kubeconfig)},
        )
    try:
        _wait_ready(process, f"http://127.0.0.1:{health}/readyz", log)
        yield ClusterAPIManager(version=built.version, log=log, process=process)
    finally:
        stop(process)


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"Cluster API's manager exited ({process.returncode}):\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"Cluster API's manager was not ready in 120 s; see {log}")


# --------------------------------------------------------------------------- the testbed


def _testbed_crd(kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{TESTBED_GROUP}",
            # Cluster API finds the version of a provider kind for its v1beta2 contract here.
            "labels": {"cluster.x-k8s.io/v1beta2": TESTBED_VERSION},
        },
        "spec": {
            "group": TESTBED_GROUP,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": TESTBED_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def install_testbed(kube: KubeHTTP) -> None:
    names = []
    for kind, plural in (
        ("TestbedCluster", "testbedclusters"),
        ("TestbedMachineTemplate", "testbedmachinetemplates"),
        ("TestbedMachine", "testbedmachines"),
    ):
        crd = _testbed_crd(kind, plural)
        kube.apply(f"{CRDS}/{crd['metadata']['name']}", crd)
        names.append(crd["metadata"]["name"])
    _wait_established(kube, names)


def provider_id(namespace: str, name: str) -> str:
    return f"{PROVIDER_ID_PREFIX}{namespace}/{name}"


def _labels(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _taints(text: str) -> list[dict[str, str]]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        head, effect = part.rsplit(":", 1)
        key, _, value = head.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return out


class Testbed:
    """The infrastructure stand-in's loop (see the module docstring), on a thread of its own so
    it serves every test of the session, whatever their event loops."""

    def __init__(self, kube: KubeHTTP, *, interval: float = 0.2) -> None:
        self._kube = kube
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capi-testbed", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> Testbed:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sync()
            except (KubeHTTPError, OSError) as error:  # the next pass tries again
                self.errors.append(str(error))

    def sync(self) -> None:
        """One pass: provision infrastructure, register and remove Nodes."""
        for cluster in self._kube.get(f"{TESTBED}/testbedclusters")["items"]:
            if not (cluster.get("status") or {}).get("initialization", {}).get("provisioned"):
                meta = cluster["metadata"]
                self._kube.merge_patch(
                    f"{TESTBED}/namespaces/{meta['namespace']}/testbedclusters/{meta['name']}/status",
                    {"status": {"initialization": {"provisioned": True}}},
                )
        for machine in self._kube.get(f"{TESTBED}/testbedmachines")["items"]:
            meta = machine["metadata"]
            path = f"{TESTBED}/namespaces/{meta['namespace']}/testbedmachines/{meta['name']}"
            if meta.get("deletionTimestamp"):
                continue
            if not (machine.get("spec") or {}).get("providerID"):
                self._kube.merge_patch(
                    path, {"spec": {"providerID": provider_id(meta["namespace"], meta["name"])}}
                )
            if not (machine.get("status") or {}).get("initialization", {}).get("provisioned"):
                self._kube.merge_patch(
                    f"{path}/status", {"status": {"initialization": {"provisioned": True}}}
                )
        deployments = {
            (md["metadata"]["namespace"], md["metadata"]["name"]): md
            for md in self._kube.get(f"{CAPI}/machinedeployments")["items"]
        }
        machines = self._kube.get(f"{CAPI}/machines")["items"]
        alive = set()
        for machine in machines:
            meta = machine["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            alive.add(key)
            pid = (machine.get("spec") or {}).get("providerID")
            annotations = meta.get("annotations") or {}
            if not pid or meta.get("deletionTimestamp") or annotations.get(NODE_ANNOTATION):
                continue
            md = deployments.get(
                (
                    meta["namespace"],
                    (meta.get("labels") or {}).get("cluster.x-k8s.io/deployment-name", ""),
                )
            )
            self._register(machine, md)
            self._kube.merge_patch(
                f"{CAPI}/namespaces/{meta['namespace']}/machines/{meta['name']}",
                {"metadata": {"annotations": {NODE_ANNOTATION: "registered"}}},
            )
        for node in self._kube.get("/api/v1/nodes")["items"]:
            owner = (node["metadata"].get("annotations") or {}).get(NODE_ANNOTATION)
            if owner and owner not in alive:
                self._kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")

    def _register(self, machine: Mapping[str, Any], md: Mapping[str, Any] | None) -> None:
        meta = machine["metadata"]
        spec = machine["spec"]
        annotations = (md or {}).get("metadata", {}).get("annotations") or {}
        name = f"{meta['name']}"
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            **_labels(annotations.get("capacity.cluster-autoscaler.kubernetes.io/labels", "")),
        }
        if spec.get("failureDomain"):
            labels["topology.kubernetes.io/zone"] = spec["failureDomain"]
        capacity = {
            "cpu": annotations.get("capacity.cluster-autoscaler.kubernetes.io/cpu", "2"),
            "memory": annotations.get("capacity.cluster-autoscaler.kubernetes.io/memory", "4Gi"),
            "pods": annotations.get("capacity.cluster-autoscaler.kubernetes.io/maxPods", "110"),
        }
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    "kwok.x-k8s.io/node": "fake",
                    NODE_ANNOTATION: f"{meta['namespace']}/{meta['name']}",
                },
            },
            "spec": {
                "providerID": spec["providerID"],
                "taints": _taints(
                    annotations.get("capacity.cluster-autoscaler.kubernetes.io/taints", "")
                ),
            },
            "status": {"capacity": capacity, "allocatable": capacity},
        }
        try:
            self._kube.request("POST", "/api/v1/nodes", node)
        except KubeHTTPError as error:
            if error.status != 409:
                raise


# --------------------------------------------------------------------------- fixtures' objects


def workload_cluster(kube: KubeHTTP, namespace: str, name: str) -> None:
    """A Cluster on the testbed (no control-plane provider: this cluster is its own workload
    cluster), Ready for MachineDeployments."""
    kube.apply(
        f"{TESTBED}/namespaces/{namespace}/testbedclusters/{name}",
        {
            "apiVersion": f"{TESTBED_GROUP}/{TESTBED_VERSION}",
            "kind": "TestbedCluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}},
        },
    )
    kube.apply(
        f"{CAPI}/namespaces/{namespace}/clusters/{name}",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "infrastructureRef": {
                    "apiGroup": TESTBED_GROUP,
                    "kind": "TestbedCluster",
                    "name": name,
                },
            },
        },
    )


def machine_deployment(
    kube: KubeHTTP,
    namespace: str,
    name: str,
    *,
    cluster: str,
    cpu: str,
    memory: str,
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    replicas: int = 0,
    version: str = "v1.33.13",
    max_size: int | None = None,
    announce_shape: bool = True,
) -> dict[str, Any]:
    """A MachineDeployment (and its TestbedMachineTemplate) announcing its shape through the
    scale-from-zero annotations, as an operator would for the cluster-autoscaler; without
    `announce_shape`, through the template's status.capacity instead, as an infrastructure
    provider that implements Cluster API's scale-from-zero contract reports it."""
    kube.apply(
        f"{TESTBED}/namespaces/{namespace}/testbedmachinetemplates/{name}",
        {
            "apiVersion": f"{TESTBED_GROUP}/{TESTBED_VERSION}",
            "kind": "TestbedMachineTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"cpu": cpu, "memory": memory}}},
        },
    )
    notes = {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0"}
    if announce_shape:
        notes["capacity.cluster-autoscaler.kubernetes.io/cpu"] = cpu
        notes["capacity.cluster-autoscaler.kubernetes.io/memory"] = memory
        notes["capacity.cluster-autoscaler.kubernetes.io/maxPods"] = "110"
    else:
        kube.merge_patch(
            f"{TESTBED}/namespaces/{namespace}/testbedmachinetemplates/{name}/status",
            {"status": {"capacity": {"cpu": cpu, "memory": memory}}},
        )
    notes.update(annotations or {})
    if max_size is not None:
        notes["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"] = str(max_size)
    template_spec: dict[str, Any] = {
        "clusterName": cluster,
        "version": version,
        "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
        "infrastructureRef": {
            "apiGroup": TESTBED_GROUP,
            "kind": "TestbedMachineTemplate",
            "name": name,
        },
    }
    if zone is not None:
        template_spec["failureDomain"] = zone
    return kube.apply(  # type: ignore[no-any-return]
        f"{CAPI}/namespaces/{namespace}/machinedeployments/{name}",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachineDeployment",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(labels or {}),
                "annotations": notes,
            },
            "spec": {
                "clusterName": cluster,
                "replicas": replicas,
                "selector": {"matchLabels": {"testbed.karpy.dev/pool": name}},
                "template": {
                    "metadata": {"labels": {"testbed.karpy.dev/pool": name}},
                    "spec": template_spec,
                },
            },
        },
    )


def machines(kube: KubeHTTP, namespace: str) -> list[dict[str, Any]]:
    return kube.get(f"{CAPI}/namespaces/{namespace}/machines")["items"]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- the session fixture


@attrs.frozen
class ClusterAPIEnv:
    """Cluster API running on the session's cluster, with the testbed's loop."""

    manager: ClusterAPIManager
    testbed: Testbed = attrs.field(eq=False)
    kube: KubeHTTP = attrs.field(eq=False)


@pytest.fixture(scope="session")
def clusterapi(
    cluster_info: ClusterInfo, kube_http: KubeHTTP, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterAPIEnv]:
    """Cluster API's manager and the testbed on the session's cluster (started on first use;
    the tests that use it share one xdist group, so one worker runs it)."""
    state = tmp_path_factory.mktemp("cluster-api")
    with clusterapi_manager(cluster_info, kube_http, state) as manager, Testbed(kube_http) as bed:
        yield ClusterAPIEnv(manager=manager, testbed=bed, kube=kube_http)


def fleet(kube: KubeHTTP, namespace: str) -> None:
    """A namespace with a Cluster and two MachineDeployments labelled ``karpy.sh/fleet``:
    ``small`` (2 vCPU, 8 GiB, zone-a, priced per vCPU and GiB: $0.096/h at the defaults) and
    ``large`` (8 vCPU, 32 GiB, zone-b, annotated $0.20/h)."""
    kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    workload_cluster(kube, namespace, "work")
    labels = {"karpy.sh/fleet": namespace}
    machine_deployment(
        kube,
        namespace,
        "small",
        cluster="work",
        cpu="2",
        memory="8Gi",
        zone="zone-a",
        labels=labels,
    )
    machine_deployment(
        kube,
        namespace,
        "large",
        cluster="work",
        cpu="8",
        memory="32Gi",
        zone="zone-b",
        labels=labels,
        annotations={"karpenter.cluster.x-k8s.io/price": "0.20"},
    )


def nodeclass(kube: KubeHTTP, name: str) -> NodeClassReference:
    """A ClusterAPINodeClass selecting the MachineDeployments of `fleet(kube, name)`."""
    kube.apply(
        f"/apis/karpenter.cluster.x-k8s.io/v1alpha1/clusterapinodeclasses/{name}",
        {
            "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
            "kind": "ClusterAPINodeClass",
            "metadata": {"name": name},
            "spec": {"scalableResourceSelector": {"matchLabels": {"karpy.sh/fleet": name}}},
        },
    )
    return NodeClassReference(
        group="karpenter.cluster.x-k8s.io", kind="ClusterAPINodeClass", name=name
    )


def remove_fleet(kube: KubeHTTP, namespace: str) -> None:
    """Delete the NodeClass and the namespace (Cluster API removes its Machines)."""
    kube.delete(f"/apis/karpenter.cluster.x-k8s.io/v1alpha1/clusterapinodeclasses/{namespace}")
    kube.delete(f"/api/v1/namespaces/{namespace}")
