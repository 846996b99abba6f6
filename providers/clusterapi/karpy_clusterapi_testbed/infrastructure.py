"""The infrastructure stand-in: just enough of an infrastructure provider for Cluster API's
controllers to make Machines, and a kubelet's worth of Node for each.

Cluster API's own in-memory backend (in the ``sigs.k8s.io/cluster-api/test`` module) is not used:
as a dependency that module asks for ``sigs.k8s.io/cluster-api`` at the v0.0.0 of its local
replace, which the Go module proxy does not serve; pinned, v1.13.7 needs ``sigs.k8s.io/cluster-api``
v1.13.7, which is not served either, and v1.14.2 resolves, but ``test/infrastructure/inmemory`` is a
library and the binary that serves it (``test/infrastructure/docker``) had not finished compiling
after 30 minutes here. It would not do the whole job anyway: it keeps the workload cluster's Nodes
in an in-memory apiserver of its own, where karpy does not look.

So the stand-in brings its own kinds (group ``infrastructure.testbed.karpy.dev``, labelled for
Cluster API's v1beta2 contract): a TestbedCluster that is provisioned at once, a
TestbedMachineTemplate, and TestbedMachines that its loop marks provisioned with a providerID
``testbed:///<namespace>/<name>``. For each Machine with a providerID it registers a Node, as a
kubelet would, annotated for kwok to run it, with the capacity of its MachineDeployment's
scale-from-zero annotations and their labels and taints; it deletes that Node once the Machine is
gone. A Node it made is made once: karpy's termination deletes it first.

It reports what it sees of Machines (made, claimed by karpy, registered, removed) through a
callback, which the demo's timeline prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import attrs

from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError, NotFoundError
from karpy.kube.install import install_crds
from karpy_clusterapi.apis import labels as capi

log = logging.getLogger(__name__)

GROUP: Final = "infrastructure.testbed.karpy.dev"
VERSION: Final = "v1alpha1"
PROVIDER_ID_PREFIX: Final = "testbed:///"
NODE_ANNOTATION: Final = f"{GROUP}/machine"
"""On a Node the stand-in registered: ``<namespace>/<name>`` of its Machine (on the Machine:
``registered``)."""
CAPI: Final = "/apis/cluster.x-k8s.io/v1beta2"
TESTBED: Final = f"/apis/{GROUP}/{VERSION}"
KINDS: Final = (
    ("TestbedCluster", "testbedclusters"),
    ("TestbedMachineTemplate", "testbedmachinetemplates"),
    ("TestbedMachine", "testbedmachines"),
)

Happening = Literal["machine-created", "machine-claimed", "node-registered", "machine-removed"]
Report = Callable[[Happening, Mapping[str, str]], None]


def crds() -> list[dict[str, Any]]:
    """The stand-in's CRDs: schemaless, with a status subresource."""
    return [
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {
                "name": f"{plural}.{GROUP}",
                # Cluster API finds the version of a provider kind for its v1beta2 contract here.
                "labels": {"cluster.x-k8s.io/v1beta2": VERSION},
            },
            "spec": {
                "group": GROUP,
                "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": VERSION,
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
        for kind, plural in KINDS
    ]


async def install(kube: KubeClient) -> None:
    """The stand-in's CRDs, Established (bounded by the caller)."""
    await install_crds(kube, crds())


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


@attrs.define
class Testbed:
    """The stand-in's loop (see the module docstring): `sync` is one pass; `run` passes every
    `interval` seconds until cancelled, reporting each Machine's happenings to `report`."""

    kube: KubeClient
    report: Report
    interval: float = 0.2
    _seen: dict[str, str] = attrs.field(factory=dict)
    """Machines seen alive: key -> MachineDeployment."""
    _claimed: set[str] = attrs.field(factory=set)

    async def run(self) -> None:
        while True:
            try:
                await self.sync()
            except KubeError as error:
                # The next pass reads everything again.
                log.info("testbed pass cut short", extra={"error": str(error)})
            await asyncio.sleep(self.interval)

    async def _patch(self, path: str, body: Mapping[str, Any]) -> None:
        await self.kube.request(
            "PATCH", path, body=body, content_type="application/merge-patch+json"
        )

    async def sync(self) -> None:
        """One pass: provision infrastructure, register and remove Nodes."""
        clusters = await self.kube.request("GET", f"{TESTBED}/testbedclusters")
        for cluster in clusters.get("items") or []:
            if not (cluster.get("status") or {}).get("initialization", {}).get("provisioned"):
                meta = cluster["metadata"]
                await self._patch(
                    f"{TESTBED}/namespaces/{meta['namespace']}/testbedclusters/{meta['name']}/status",
                    {"status": {"initialization": {"provisioned": True}}},
                )
        infra = await self.kube.request("GET", f"{TESTBED}/testbedmachines")
        for machine in infra.get("items") or []:
            meta = machine["metadata"]
            path = f"{TESTBED}/namespaces/{meta['namespace']}/testbedmachines/{meta['name']}"
            if meta.get("deletionTimestamp"):
                continue
            if not (machine.get("spec") or {}).get("providerID"):
                await self._patch(
                    path, {"spec": {"providerID": provider_id(meta["namespace"], meta["name"])}}
                )
            if not (machine.get("status") or {}).get("initialization", {}).get("provisioned"):
                await self._patch(
                    f"{path}/status", {"status": {"initialization": {"provisioned": True}}}
                )
        listed = await self.kube.request("GET", f"{CAPI}/machinedeployments")
        deployments = {
            (md["metadata"]["namespace"], md["metadata"]["name"]): md
            for md in listed.get("items") or []
        }
        machines = (await self.kube.request("GET", f"{CAPI}/machines")).get("items") or []
        alive: dict[str, str] = {}
        for machine in machines:
            await self._machine(machine, deployments, alive)
        for key in sorted(set(self._seen) - set(alive)):
            self.report("machine-removed", {"machine": key, "machinedeployment": self._seen[key]})
            self._claimed.discard(key)
        self._seen = alive
        nodes = (await self.kube.request("GET", "/api/v1/nodes")).get("items") or []
        for node in nodes:
            owner = (node["metadata"].get("annotations") or {}).get(NODE_ANNOTATION)
            if owner and owner not in alive:
                with contextlib.suppress(NotFoundError):
                    await self.kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")

    async def _machine(
        self,
        machine: Mapping[str, Any],
        deployments: Mapping[tuple[str, str], Mapping[str, Any]],
        alive: dict[str, str],
    ) -> None:
        meta = machine["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        labels = meta.get("labels") or {}
        deployment = str(labels.get(capi.LABEL_DEPLOYMENT_NAME, ""))
        alive[key] = deployment
        if key not in self._seen:
            self.report("machine-created", {"machine": key, "machinedeployment": deployment})
        claimed_by = labels.get(capi.LABEL_CLAIMED_BY)
        if claimed_by and key not in self._claimed:
            self._claimed.add(key)
            self.report(
                "machine-claimed",
                {"machine": key, "machinedeployment": deployment, "nodeclaim": str(claimed_by)},
            )
        pid = (machine.get("spec") or {}).get("providerID")
        annotations = meta.get("annotations") or {}
        if not pid or meta.get("deletionTimestamp") or annotations.get(NODE_ANNOTATION):
            return
        md = deployments.get((meta["namespace"], deployment))
        await self._register(machine, md)
        await self._patch(
            f"{CAPI}/namespaces/{meta['namespace']}/machines/{meta['name']}",
            {"metadata": {"annotations": {NODE_ANNOTATION: "registered"}}},
        )
        self.report(
            "node-registered",
            {"machine": key, "machinedeployment": deployment, "node": meta["name"]},
        )

    async def _register(self, machine: Mapping[str, Any], md: Mapping[str, Any] | None) -> None:
        meta = machine["metadata"]
        spec = machine["spec"]
        annotations = (md or {}).get("metadata", {}).get("annotations") or {}
        name = str(meta["name"])
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            **_labels(annotations.get(capi.ANNOTATION_LABELS, "")),
        }
        if spec.get("failureDomain"):
            labels["topology.kubernetes.io/zone"] = spec["failureDomain"]
        capacity = {
            "cpu": annotations.get(capi.ANNOTATION_CPU, "2"),
            "memory": annotations.get(capi.ANNOTATION_MEMORY, "4Gi"),
            "pods": annotations.get(capi.ANNOTATION_MAX_PODS, "110"),
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
                "taints": _taints(annotations.get(capi.ANNOTATION_TAINTS, "")),
            },
            "status": {"capacity": capacity, "allocatable": capacity},
        }
        try:
            await self.kube.request("POST", "/api/v1/nodes", body=node)
        except KubeError as error:
            if error.status != 409:
                raise

    async def delete_nodes(self) -> None:
        """Delete every Node the stand-in registered (at shutdown)."""
        nodes = (await self.kube.request("GET", "/api/v1/nodes")).get("items") or []
        for node in nodes:
            if (node["metadata"].get("annotations") or {}).get(NODE_ANNOTATION):
                with contextlib.suppress(NotFoundError):
                    await self.kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
