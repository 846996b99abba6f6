"""`karpy simulate --from-cluster`: snapshot a live cluster into a scenario file.

It lists the cluster once and writes what `karpy simulate` and `karpy explain` read offline:
NodePools, the instance types the cloud provider offers each of them (asked of the provider as
the provisioner asks it, so a NodeClass's subnets and zones count), Nodes with the pods bound to
them, NodeClaims still on their way (in flight), DaemonSets and the pending pods. A user can
attach the file to a bug report, or edit a NodePool in it and see the plan change before
applying anything.

This is a process of its own (it connects and builds a provider), hence the operator layer;
`karpy.simulate` reads the file and never touches the network.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from karpy.apis.codec import to_dict
from karpy.apis.kube.common import Taint
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import DaemonSet
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.registry import ProviderError
from karpy.core.instancetypes import InstanceType
from karpy.kube.errors import KubeConfigError, KubeError
from karpy.kube.kinds import DAEMONSETS, NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.operator.listing import listed_cluster
from karpy.runtime.options import Options, OptionsError, load
from karpy.state.pods import is_provisionable, is_terminal
from karpy.state.view import ClusterView

SNAPSHOT_TIMEOUT = 120.0
"""Seconds the whole snapshot (lists and instance-type lookups) may take."""
PER_POOL_KEYS = (wk.LABEL_INSTANCE_TYPE, wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE)


def _taint(taint: Taint) -> dict[str, Any]:
    out: dict[str, Any] = {"key": taint.key, "effect": str(taint.effect)}
    if taint.value:
        out["value"] = taint.value
    return out


def _requirement(req: Any) -> dict[str, Any]:
    wire = to_dict(req)
    return {k: wire[k] for k in ("key", "operator", "values", "minValues") if k in wire}


def scenario_nodepool(pool: NodePool) -> dict[str, Any]:
    template = pool.spec.template
    out: dict[str, Any] = {"name": pool.metadata.name}
    if pool.spec.weight is not None:
        out["weight"] = pool.spec.weight
    out["requirements"] = [_requirement(r) for r in template.spec.requirements]
    if template.metadata.labels:
        out["labels"] = dict(template.metadata.labels)
    if template.spec.taints:
        out["taints"] = [_taint(t) for t in template.spec.taints]
    if template.spec.startup_taints:
        out["startupTaints"] = [_taint(t) for t in template.spec.startup_taints]
    if pool.spec.limits:
        out["limits"] = dict(pool.spec.limits)
    return out


def scenario_instance_type(instance_type: InstanceType) -> dict[str, Any]:
    labels = {
        r.key: next(iter(r.values))
        for r in instance_type.requirements
        if r.key not in PER_POOL_KEYS and not r.complement and len(r.values) == 1
    }
    out: dict[str, Any] = {"name": instance_type.name, "capacity": instance_type.capacity.render()}
    if len(instance_type.overhead):
        out["overhead"] = instance_type.overhead.render()
    if labels:
        out["labels"] = dict(sorted(labels.items()))
    out["offerings"] = [
        {
            "zone": o.zone,
            "capacityType": o.capacity_type,
            "price": o.price,
            **({} if o.available else {"available": False}),
        }
        for o in instance_type.offerings
    ]
    return out


def _container(container: Mapping[str, Any], *, init: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": container.get("name", "")}
    requests = (container.get("resources") or {}).get("requests")
    if requests:
        out["requests"] = requests
    if container.get("ports"):
        out["ports"] = container["ports"]
    if init and container.get("restartPolicy") == "Always":
        out["restartPolicy"] = "Always"
    return out


def scenario_pod(pod: Pod) -> dict[str, Any]:
    """A live Pod as a scenario pod: the fields the simulator reads, in its format."""
    wire = to_dict(pod)
    meta, spec = wire.get("metadata", {}), wire.get("spec", {})
    out: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    if meta.get("uid"):
        out["uid"] = meta["uid"]
    if meta.get("labels"):
        out["labels"] = meta["labels"]
    owner = next((r for r in pod.metadata.owner_references if r.controller), None)
    if owner is not None:
        out["owner"] = f"{owner.kind}/{owner.uid}"
    out["containers"] = [_container(c, init=False) for c in spec.get("containers", [])]
    inits = [_container(c, init=True) for c in spec.get("initContainers", [])]
    if inits:
        out["initContainers"] = inits
    for key in ("overhead", "nodeSelector", "affinity", "tolerations", "priority"):
        if spec.get(key) not in (None, {}, []):
            out[key] = spec[key]
    if spec.get("topologySpreadConstraints"):
        out["topologySpreadConstraints"] = spec["topologySpreadConstraints"]
    return out


def _node_entries(view: ClusterView) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    registered = set()
    for node in sorted(view.nodes(), key=lambda n: n.metadata.name or ""):
        name = node.metadata.name or ""
        registered.add(name)
        labels = dict(node.metadata.labels)
        entry: dict[str, Any] = {"name": name, "labels": labels}
        if node.spec.taints:
            entry["taints"] = [_taint(t) for t in node.spec.taints]
        entry["allocatable"] = dict(node.status.allocatable)
        entry["capacity"] = dict(node.status.capacity)
        if wk.LABEL_NODEPOOL in labels:
            entry["nodePool"] = labels[wk.LABEL_NODEPOOL]
            entry["initialized"] = labels.get(wk.LABEL_NODE_INITIALIZED) == "true"
        entry["pods"] = [
            scenario_pod(p)
            for p in sorted(view.pods_on(name), key=lambda p: p.metadata.name or "")
            if not is_terminal(p)
        ]
        entries.append(entry)
    for claim in sorted(view.nodeclaims(), key=lambda c: c.metadata.name or ""):
        if claim.status.node_name in registered or not claim.status.allocatable:
            continue  # registered (listed above), or not launched yet: nothing to place on
        labels = dict(claim.metadata.labels)
        entries.append(
            {
                "name": claim.metadata.name,
                "labels": labels,
                "allocatable": dict(claim.status.allocatable),
                "capacity": dict(claim.status.capacity or claim.status.allocatable),
                "nodePool": labels.get(wk.LABEL_NODEPOOL),
                "inFlight": True,
                "initialized": False,
            }
        )
    return entries


def _daemonset(ds: DaemonSet) -> dict[str, Any]:
    template = to_dict(ds.spec.template)
    pod = Pod(metadata=ds.metadata, spec=ds.spec.template.spec)
    entry = scenario_pod(pod)
    entry.pop("uid", None)
    entry.pop("owner", None)
    entry["labels"] = template.get("metadata", {}).get("labels", {})
    return {
        "name": ds.metadata.name,
        "namespace": ds.metadata.namespace,
        "template": {k: v for k, v in entry.items() if k not in {"name", "namespace"} and v},
    }


async def snapshot(options: Options) -> dict[str, Any]:
    """The live cluster as a scenario document. Raises KubeError, KubeConfigError or
    ProviderError."""
    kinds = (NODES, PODS, NODEPOOLS, NODECLAIMS, DAEMONSETS)
    async with listed_cluster(options, kinds, meter="karpy.snapshot") as cluster:
        catalog: dict[str, dict[str, Any]] = {}
        pools = sorted(cluster.view.nodepools(), key=lambda p: p.metadata.name or "")
        for pool in pools:
            for instance_type in await cluster.provider.get_instance_types(pool):
                catalog.setdefault(instance_type.name, scenario_instance_type(instance_type))
    return scenario_document(cluster.view, pools, [catalog[name] for name in sorted(catalog)])


def scenario_document(
    view: ClusterView, pools: Sequence[NodePool], instance_types: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The scenario for what `view` holds: `pools`, their `instance_types` (scenario items),
    the nodes, in-flight NodeClaims, DaemonSets and pending pods."""
    pending = [
        scenario_pod(p)
        for p in sorted(view.pods(), key=lambda p: (p.metadata.namespace or "", p.metadata.name))
        if is_provisionable(p)
    ]
    return {
        "nodePools": [scenario_nodepool(p) for p in pools],
        "instanceTypes": {"items": list(instance_types)},
        "nodes": _node_entries(view),
        "daemonSets": [
            _daemonset(ds)
            for ds in sorted(
                view.objects(DAEMONSETS),
                key=lambda d: (d.metadata.namespace or "", d.metadata.name or ""),
            )
        ],
        "pods": pending,
    }


def main(argv: Sequence[str]) -> int:
    """`karpy simulate --from-cluster [-o FILE] [karpy run flags]`: 0 written, 2 on failure."""
    parser = argparse.ArgumentParser(
        prog="karpy simulate --from-cluster",
        description="Snapshot a live cluster into a scenario file for karpy simulate/explain.",
    )
    parser.add_argument("-o", "--output", default="-", help="scenario file (default stdout)")
    known, rest = parser.parse_known_args([a for a in argv if a != "--from-cluster"])
    try:
        options = load(rest, os.environ)
        document = asyncio.run(asyncio.wait_for(snapshot(options), SNAPSHOT_TIMEOUT))
    except (OptionsError, KubeConfigError, KubeError, ProviderError, TimeoutError) as error:
        sys.stderr.write(f"karpy simulate --from-cluster: {error}\n")
        return 2
    text = yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=True)
    if known.output == "-":
        sys.stdout.write(text)
    else:
        Path(known.output).write_text(text, encoding="utf-8")
    return 0
