"""`karpy simulate --from-cluster`: snapshot a live cluster into a scenario file.

It lists the cluster once and writes what `karpy simulate` and `karpy explain` read offline:
NodePools, the instance types the cloud provider offers each of them (asked of the provider as
the provisioner asks it, so a NodeClass's subnets and zones count), Nodes with the pods bound to
them, NodeClaims still on their way (in flight), DaemonSets and the pending pods — and what
protects nodes from consolidation: the NodePools' disruption settings and budgets, the
do-not-disrupt annotations of pods and nodes, the pods' start times and the
PodDisruptionBudgets, with the time of the snapshot as the scenario's `now`. A user can
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
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from karpy.apis.codec import format_time, to_dict
from karpy.apis.kube.common import Taint
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import DaemonSet, PodDisruptionBudget
from karpy.apis.meta import HasMetadata
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodepool import Budget, NodePool
from karpy.cloudprovider.overlay import OverlaidCloudProvider
from karpy.cloudprovider.registry import ProviderError
from karpy.controllers.disruption.facts import ANNOTATION_MIN_IMPROVEMENT
from karpy.core.disruption.consolidation import parse_min_improvement
from karpy.core.instancetypes import InstanceType
from karpy.core.overlays import Overlay, PriceMode
from karpy.kube.errors import KubeConfigError, KubeError
from karpy.kube.kinds import (
    DAEMONSETS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from karpy.operator.listing import listed_cluster
from karpy.runtime.options import Options, OptionsError, load
from karpy.state.pods import (
    DO_NOT_DISRUPT_ANNOTATIONS,
    do_not_disrupt,
    is_provisionable,
    is_terminal,
)
from karpy.state.protection import do_not_disrupt_seconds
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
    disruption = pool.spec.disruption
    out["disruption"] = {
        "consolidationPolicy": str(disruption.consolidation_policy),
        "consolidateAfter": disruption.consolidate_after,
        "budgets": [_budget(b) for b in disruption.budgets],
    }
    improvement = pool.metadata.annotations.get(ANNOTATION_MIN_IMPROVEMENT)
    if improvement is not None and _valid_min_improvement(improvement):
        out["disruption"]["minimumImprovement"] = improvement
    return out


def _valid_min_improvement(text: str) -> bool:
    try:
        parse_min_improvement(text, source=ANNOTATION_MIN_IMPROVEMENT)
    except ValueError:
        return False
    return True


def _budget(budget: Budget) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": budget.nodes}
    if budget.reasons:
        out["reasons"] = [str(r) for r in budget.reasons]
    if budget.schedule is not None:
        out["schedule"] = budget.schedule
    if budget.duration is not None:
        out["duration"] = budget.duration
    return out


def protection_annotations(obj: HasMetadata) -> dict[str, str]:
    """The object's annotations that protect it from disruption, and no others: the
    `karpenter.sh/do-not-disrupt` family, as the disruption controller reads them."""
    annotations = obj.metadata.annotations
    return {k: annotations[k] for k in DO_NOT_DISRUPT_ANNOTATIONS if k in annotations}


def _pod_annotations(pod: Pod) -> dict[str, str]:
    """`protection_annotations` of a pod. A do-not-disrupt value that is neither "true" nor a
    duration protects the pod for good in a cluster (it fails safe) and is refused in a
    scenario, so it is written as "true", which the scenario reads alike."""
    out = protection_annotations(pod)
    value = out.get(wk.ANNOTATION_DO_NOT_DISRUPT)
    if value is not None:
        try:
            do_not_disrupt_seconds(value)
        except ValueError:
            out[wk.ANNOTATION_DO_NOT_DISRUPT] = "true"
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
    annotations = _pod_annotations(pod)
    if annotations:
        out["annotations"] = annotations
    # A do-not-disrupt duration counts from here; the controller falls back to the creation
    # time of a pod that has not started.
    started = pod.status.start_time or pod.metadata.creation_timestamp
    if started is not None:
        out["startTime"] = format_time(started)
    return out


def scenario_pdb(pdb: PodDisruptionBudget) -> dict[str, Any]:
    """A PodDisruptionBudget as a scenario item. Its status is left out: the simulation
    recomputes it from the scenario's pods, as the Kubernetes disruption controller does."""
    spec = pdb.spec
    out: dict[str, Any] = {"name": pdb.metadata.name, "namespace": pdb.metadata.namespace}
    if spec.selector is not None:
        out["selector"] = to_dict(spec.selector)
    if spec.max_unavailable is not None:
        out["maxUnavailable"] = spec.max_unavailable
    else:
        # Neither set: no pod need stay healthy, which minAvailable 0 says in the scenario.
        out["minAvailable"] = 0 if spec.min_available is None else spec.min_available
    return out


def _node_entries(view: ClusterView) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    registered = set()
    for node in sorted(view.nodes(), key=lambda n: n.metadata.name or ""):
        name = node.metadata.name or ""
        registered.add(name)
        labels = dict(node.metadata.labels)
        entry: dict[str, Any] = {"name": name, "labels": labels}
        annotations = protection_annotations(node)
        if not do_not_disrupt(node) and any(do_not_disrupt(c) for c in view.nodeclaims_on(name)):
            # The node's NodeClaim protects it as well (the disruption controller reads both).
            annotations[wk.ANNOTATION_DO_NOT_DISRUPT] = "true"
        if annotations:
            entry["annotations"] = annotations
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
        annotations = protection_annotations(claim)
        entries.append(
            {
                "name": claim.metadata.name,
                "labels": labels,
                **({"annotations": annotations} if annotations else {}),
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
    for key in ("uid", "owner", "annotations", "startTime"):
        entry.pop(key, None)  # a DaemonSet's pods are sized in, never disrupted
    entry["labels"] = template.get("metadata", {}).get("labels", {})
    return {
        "name": ds.metadata.name,
        "namespace": ds.metadata.namespace,
        "template": {k: v for k, v in entry.items() if k not in {"name", "namespace"} and v},
    }


async def snapshot(options: Options) -> dict[str, Any]:
    """The live cluster as a scenario document. Raises KubeError, KubeConfigError or
    ProviderError."""
    kinds = (NODES, PODS, NODEPOOLS, NODECLAIMS, DAEMONSETS, PODDISRUPTIONBUDGETS)
    async with listed_cluster(options, kinds, meter="karpy.snapshot") as cluster:
        now = cluster.clock.now()
        catalog: dict[str, dict[str, Any]] = {}
        pools = sorted(cluster.view.nodepools(), key=lambda p: p.metadata.name or "")
        # The catalog as the cloud reports it: the scenario applies its nodeOverlays itself.
        provider = cluster.provider
        if isinstance(provider, OverlaidCloudProvider):
            provider = provider.inner
        for pool in pools:
            for instance_type in await provider.get_instance_types(pool):
                catalog.setdefault(instance_type.name, scenario_instance_type(instance_type))
    document = scenario_document(
        cluster.view, pools, [catalog[name] for name in sorted(catalog)], now=now
    )
    if cluster.overlays is not None and cluster.overlays.overlays():
        document["nodeOverlays"] = [scenario_overlay(o) for o in cluster.overlays.overlays()]
    return document


def scenario_overlay(overlay: Overlay) -> dict[str, Any]:
    """A NodeOverlay the cluster applies, as a scenario's `nodeOverlays` entry."""
    entry: dict[str, Any] = {"name": overlay.name}
    if overlay.weight:
        entry["weight"] = overlay.weight
    requirements = [
        {"key": r.key, "operator": op.value, **({"values": list(values)} if values else {})}
        for r in overlay.requirements
        for op, values in r.expressions()
    ]
    if requirements:
        entry["requirements"] = requirements
    if overlay.price is not None:
        field = "price" if overlay.price.mode is PriceMode.SET else "priceAdjustment"
        entry[field] = overlay.price.text
    if overlay.capacity:
        entry["capacity"] = overlay.capacity.render()
    return entry


def scenario_document(
    view: ClusterView,
    pools: Sequence[NodePool],
    instance_types: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
) -> dict[str, Any]:
    """The scenario for what `view` holds at `now` (the snapshot's time, which becomes the
    scenario's clock): `pools`, their `instance_types` (scenario items), the nodes, in-flight
    NodeClaims, DaemonSets, pending pods and PodDisruptionBudgets."""
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
        "podDisruptionBudgets": [
            scenario_pdb(pdb)
            for pdb in sorted(
                view.objects(PODDISRUPTIONBUDGETS),
                key=lambda p: (p.metadata.namespace or "", p.metadata.name or ""),
            )
        ],
        "now": format_time(now),
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
