"""Manifests of a fleet on the infrastructure stand-in: a Cluster (its own workload cluster), and
MachineDeployments announcing their shape as an operator does for the cluster-autoscaler.

``demo_fleet`` is what ``karpy demo --provider clusterapi`` plays on, and what the tests' fleets
are made of: ``small`` (2 vCPU, 8 GiB in zone-a, priced per vCPU and GiB: $0.096/h at the
provider's defaults) and ``large`` (8 vCPU, 32 GiB in zone-b, annotated $0.20/h).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy_clusterapi.apis import labels as capi
from karpy_clusterapi.apis.nodeclass import ClusterAPINodeClass
from karpy_clusterapi_testbed.infrastructure import GROUP, VERSION

CAPI_API_VERSION: Final = "cluster.x-k8s.io/v1beta2"
TESTBED_API_VERSION: Final = f"{GROUP}/{VERSION}"
FLEET_LABEL: Final = "karpy.sh/fleet"
"""On a fleet's MachineDeployments: the fleet's name, which its NodeClass selects."""
POOL_LABEL: Final = "testbed.karpy.dev/pool"


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def workload_cluster(namespace: str, name: str) -> list[dict[str, Any]]:
    """A Cluster on the stand-in (no control-plane provider: this cluster is its own workload
    cluster), and its TestbedCluster."""
    return [
        {
            "apiVersion": TESTBED_API_VERSION,
            "kind": "TestbedCluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}},
        },
        {
            "apiVersion": CAPI_API_VERSION,
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "infrastructureRef": {"apiGroup": GROUP, "kind": "TestbedCluster", "name": name},
            },
        },
    ]


def machine_template(namespace: str, name: str, *, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": TESTBED_API_VERSION,
        "kind": "TestbedMachineTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"cpu": cpu, "memory": memory}}},
    }


def machine_deployment(
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
    """A MachineDeployment of the stand-in's template `name` (see `machine_template`), its shape
    announced through the scale-from-zero annotations unless `announce_shape` is False (then
    its template's status.capacity must say it)."""
    notes = {capi.ANNOTATION_MIN_SIZE: "0"}
    if announce_shape:
        notes[capi.ANNOTATION_CPU] = cpu
        notes[capi.ANNOTATION_MEMORY] = memory
        notes[capi.ANNOTATION_MAX_PODS] = "110"
    notes.update(annotations or {})
    if max_size is not None:
        notes[capi.ANNOTATION_MAX_SIZE] = str(max_size)
    template_spec: dict[str, Any] = {
        "clusterName": cluster,
        "version": version,
        "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
        "infrastructureRef": {"apiGroup": GROUP, "kind": "TestbedMachineTemplate", "name": name},
    }
    if zone is not None:
        template_spec["failureDomain"] = zone
    return {
        "apiVersion": CAPI_API_VERSION,
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
            "selector": {"matchLabels": {POOL_LABEL: name}},
            "template": {"metadata": {"labels": {POOL_LABEL: name}}, "spec": template_spec},
        },
    }


def demo_fleet(name: str, *, small_max_size: int | None = None) -> list[dict[str, Any]]:
    """The namespace `name` with a Cluster and the two MachineDeployments (with their templates)
    labelled ``karpy.sh/fleet=<name>``; `small_max_size` caps small."""
    labels = {FLEET_LABEL: name}
    return [
        namespace(name),
        *workload_cluster(name, "work"),
        machine_template(name, "small", cpu="2", memory="8Gi"),
        machine_deployment(
            name,
            "small",
            cluster="work",
            cpu="2",
            memory="8Gi",
            zone="zone-a",
            labels=labels,
            max_size=small_max_size,
        ),
        machine_template(name, "large", cpu="8", memory="32Gi"),
        machine_deployment(
            name,
            "large",
            cluster="work",
            cpu="8",
            memory="32Gi",
            zone="zone-b",
            labels=labels,
            annotations={capi.ANNOTATION_PRICE: "0.20"},
        ),
    ]


def nodeclass(name: str) -> dict[str, Any]:
    """A ClusterAPINodeClass `name` selecting the MachineDeployments of `demo_fleet(name)`."""
    return {
        "apiVersion": f"{ClusterAPINodeClass.GROUP}/{ClusterAPINodeClass.VERSION}",
        "kind": ClusterAPINodeClass.KIND,
        "metadata": {"name": name},
        "spec": {"scalableResourceSelector": {"matchLabels": {FLEET_LABEL: name}}},
    }
