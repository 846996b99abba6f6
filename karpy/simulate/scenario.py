"""Scenario files (YAML or JSON) -> the core's frozen values.

``karpy simulate`` and ``karpy explain`` read a scenario: NodePools, an instance-type catalog (or
``provider: fake``), existing nodes with their pods, DaemonSets, and pending pods or Deployments
with replicas. Field names follow the Kubernetes objects they stand for (camelCase, the same
nesting for affinity and topology spread), so a pod spec can be pasted in with little editing.
This module does file I/O; the core below it does none. See docs/simulate.md for the format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Final

import attrs
import yaml

from karpy.apis.duration import parse_duration
from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.candidates import Policy, PoolDisruption
from karpy.core.disruption.consolidation import parse_min_improvement
from karpy.core.disruption.methods import Reason
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.pods import Pod
from karpy.core.resources import PODS, Resources
from karpy.core.scheduling import SchedulerOptions
from karpy.core.scheduling.preferences import MinValuesPolicy, PreferencePolicy
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, NodeName, NodePool, NodePoolName
from karpy.core.snapshot import Node as ClusterNode
from karpy.simulate.podspec import (
    CreationCounter,
    entries_of,
    items_of,
    parse_pod,
    parse_requirements,
    parse_resources,
    parse_taint,
)
from karpy.simulate.reader import Node, ScenarioError
from karpy.testing.instancetypes import make_instance_types

DEFAULT_MAX_PODS = 110


@attrs.frozen
class Scenario:
    """A parsed scenario: the snapshot, the pending pods and solver options."""

    snapshot: ClusterSnapshot
    pods: tuple[Pod, ...]
    options: SchedulerOptions
    disruption: Mapping[str, PoolDisruption] = attrs.field(factory=dict)
    """Each NodePool's disruption settings (`karpy simulate --consolidate` reads them)."""


def load(path: str | Path) -> Scenario:
    """Read and parse a scenario file (``.json`` as JSON, anything else as YAML)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"{file}: cannot read scenario: {err.strerror}") from err
    try:
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ScenarioError(
            f"{file}: not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {err}"
        ) from err
    return parse(data)


def parse(data: object) -> Scenario:
    """Parse an already-decoded scenario document."""
    root = Node(data, "")
    root.check_keys(
        {
            "nodePools",
            "instanceTypes",
            "nodes",
            "daemonSets",
            "pods",
            "deployments",
            "namespaces",
            "options",
        }
    )
    counter = CreationCounter()
    pools = tuple(_nodepool(n) for n in root.req("nodePools").items())
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise root.req("nodePools").fail("nodepool names must be unique")
    catalog = _catalog(root.req("instanceTypes"))
    nodes = tuple(_node(n, counter) for n in items_of(root.get("nodes")))
    daemonsets = tuple(_daemonset(n, counter) for n in items_of(root.get("daemonSets")))
    pods: list[Pod] = [parse_pod(n, counter) for n in items_of(root.get("pods"))]
    for dep in items_of(root.get("deployments")):
        pods.extend(_deployment(dep, counter))
    every = [*pods, *(p for n in nodes for p in n.pods)]
    repeated = sorted(k for k, n in Counter(p.key for p in every).items() if n > 1)
    if repeated:
        raise root.fail(f"pod names must be unique per namespace: {', '.join(repeated)} repeated")
    repeated = sorted(u for u, n in Counter(p.uid for p in every).items() if n > 1)
    if repeated:
        raise root.fail(f"pod uids must be unique: {', '.join(repeated)} repeated")
    namespaces = {
        k: tuple(sorted(v.string_map().items())) for k, v in entries_of(root.get("namespaces"))
    }
    snapshot = ClusterSnapshot(
        nodepools=pools,
        instance_types={p.name: catalog for p in pools},
        nodes=nodes,
        daemonsets=daemonsets,
        namespaces=namespaces,
    )
    disruption: dict[str, PoolDisruption] = {
        p.name: _disruption(n.get("disruption"))
        for p, n in zip(pools, root.req("nodePools").items(), strict=True)
    }
    return Scenario(snapshot, tuple(pods), _options(root.get("options")), disruption)


# --------------------------------------------------------------------------- nodepools and catalog
def _nodepool(node: Node) -> NodePool:
    node.check_keys(
        {
            "name",
            "weight",
            "requirements",
            "labels",
            "taints",
            "startupTaints",
            "limits",
            "disruption",
        }
    )
    weight = node.get("weight")
    labels = node.get("labels")
    return NodePool(
        name=NodePoolName(node.req("name").text()),
        requirements=parse_requirements(node.get("requirements")),
        labels=labels.string_map() if labels else {},
        taints=tuple(parse_taint(t) for t in items_of(node.get("taints"))),
        startup_taints=tuple(parse_taint(t) for t in items_of(node.get("startupTaints"))),
        limits=parse_resources(node.get("limits")),
        weight=weight.integer() if weight else 0,
    )


def _disruption(node: Node | None) -> PoolDisruption:
    """A NodePool's `disruption`: consolidationPolicy (default WhenEmptyOrUnderutilized),
    consolidateAfter (default 0s; only Never matters, time does not pass in a scenario),
    budgets (`nodes` and `reasons`; default one budget of 10%) and minimumImprovement (a
    percentage, as the NodePool annotation karpy.sh/consolidation-min-improvement)."""
    if node is None:
        return PoolDisruption(consolidate_after=0.0)
    node.check_keys({"consolidationPolicy", "consolidateAfter", "budgets", "minimumImprovement"})
    policy = node.get("consolidationPolicy")
    after = node.get("consolidateAfter")
    improvement = node.get("minimumImprovement")
    budgets = tuple(_budget(b) for b in items_of(node.get("budgets")))
    parsed_after = (
        after.convert(lambda n: parse_duration(n.text(), field_name="consolidateAfter"))
        if after
        else timedelta(0)
    )
    return PoolDisruption(
        consolidate_after=None if parsed_after is None else parsed_after.total_seconds(),
        budgets=budgets or (BudgetSpec(),),
        policy=policy.convert(lambda n: Policy(n.text()))
        if policy
        else Policy.WHEN_EMPTY_OR_UNDERUTILIZED,
        min_improvement=(
            improvement.convert(
                lambda n: parse_min_improvement(n.text(), source="minimumImprovement")
            )
            if improvement
            else 0.0
        ),
    )


def _budget(node: Node) -> BudgetSpec:
    node.check_keys({"nodes", "reasons"})
    reasons = frozenset(r.text() for r in items_of(node.get("reasons")))
    unknown = sorted(reasons - {r.value for r in Reason})
    if unknown:
        raise node.req("reasons").fail(f"unknown disruption reason {unknown[0]!r}")
    return BudgetSpec(nodes=node.req("nodes").text(), reasons=reasons)


CATALOG_GROUP: Final = "karpy.catalogs"
"""Entry points naming installed providers' instance-type catalogs (see pyproject.toml)."""


def _catalog(node: Node) -> tuple[InstanceType, ...]:
    """The scenario's instance types; an empty catalog is bad input (nothing could launch)."""
    types = _catalog_types(node)
    if not types:
        raise node.fail("the instance type catalog is empty: give at least one instance type")
    return types


def _catalog_types(node: Node) -> tuple[InstanceType, ...]:
    node.check_keys({"provider", "count", "items"})
    provider = node.get("provider")
    if provider is not None:
        name = provider.text()
        count = node.get("count")
        if name == "fake":
            return make_instance_types(count.integer() if count else 400)
        if count is not None:
            raise count.fail("count is for the 'fake' catalog only")
        catalogs = {ep.name: ep for ep in metadata.entry_points(group=CATALOG_GROUP)}
        if name not in catalogs:
            supported = ", ".join(sorted({"fake", *catalogs}))
            raise provider.fail(f"unknown provider {name!r} (supported: {supported})")
        return tuple(catalogs[name].load()())
    return tuple(_instance_type(n) for n in node.req("items").items())


def _with_pods(resources: Resources) -> Resources:
    """Kubelet's default of 110 pods when a node or instance type does not say."""
    if PODS in resources:
        return resources
    return resources + Resources.of({PODS: DEFAULT_MAX_PODS})


def _instance_type(node: Node) -> InstanceType:
    node.check_keys({"name", "capacity", "overhead", "labels", "offerings"})
    offerings = []
    for off in node.req("offerings").items():
        off.check_keys({"zone", "capacityType", "price", "available"})
        available = off.get("available")
        offerings.append(
            Offering(
                off.req("zone").text(),
                off.req("capacityType").text(),
                off.req("price").number(),
                available.boolean() if available else True,
            )
        )
    labels = node.get("labels")
    return InstanceType.make(
        node.req("name").text(),
        _with_pods(parse_resources(node.req("capacity"))),
        offerings,
        overhead=parse_resources(node.get("overhead")),
        labels=labels.string_map() if labels else None,
    )


def _deployment(node: Node, counter: CreationCounter) -> list[Pod]:
    node.check_keys({"name", "namespace", "replicas", "template"})
    name = node.req("name").text()
    replicas = node.req("replicas").integer()
    if replicas < 0:
        raise node.req("replicas").fail("must not be negative")
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    template = node.req("template")
    template.mapping()
    if template.get("namespace") is not None and template.req("namespace").text() != namespace:
        raise template.req("namespace").fail("must match the deployment's namespace")
    data = dict(template.mapping())
    data["namespace"] = namespace
    owner = f"apps/Deployment/{namespace}/{name}"
    return [
        parse_pod(Node(data, template.path), counter, name=f"{name}-{i}", owner=owner)
        for i in range(replicas)
    ]


def _node(node: Node, counter: CreationCounter) -> ClusterNode:
    node.check_keys(
        {
            "name",
            "labels",
            "taints",
            "allocatable",
            "capacity",
            "pods",
            "nodePool",
            "initialized",
            "inFlight",
        }
    )
    labels, pool = node.get("labels"), node.get("nodePool")
    init, flight = node.get("initialized"), node.get("inFlight")
    allocatable = _with_pods(parse_resources(node.req("allocatable")))
    capacity = node.get("capacity")
    name = node.req("name").text()
    return ClusterNode(
        name=NodeName(name),
        labels=labels.string_map() if labels else {},
        taints=tuple(parse_taint(t) for t in items_of(node.get("taints"))),
        allocatable=allocatable,
        capacity=_with_pods(parse_resources(capacity)) if capacity else allocatable,
        pods=tuple(parse_pod(p, counter) for p in items_of(node.get("pods"))),
        nodepool=NodePoolName(pool.text()) if pool else None,
        initialized=init.boolean() if init else True,
        in_flight=flight.boolean() if flight else False,
    )


def _daemonset(node: Node, counter: CreationCounter) -> DaemonSet:
    node.check_keys({"name", "namespace", "template"})
    name = node.req("name").text()
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    data = dict(node.req("template").mapping())
    data.setdefault("name", name)
    data["namespace"] = namespace
    pod = parse_pod(Node(data, node.req("template").path), counter)
    return DaemonSet(namespace, name, pod)


def _options(node: Node | None) -> SchedulerOptions:
    if node is None:
        return SchedulerOptions()
    node.check_keys({"maxInstanceTypes", "preferencePolicy", "minValuesPolicy", "improve"})
    mvp = node.get("minValuesPolicy")
    mx, pp, imp = node.get("maxInstanceTypes"), node.get("preferencePolicy"), node.get("improve")
    max_types = mx.integer() if mx else 60
    if max_types < 1:
        raise node.req("maxInstanceTypes").fail("must be at least 1")
    return SchedulerOptions(
        max_instance_types=max_types,
        preference_policy=pp.convert(lambda n: PreferencePolicy(n.text()))
        if pp
        else PreferencePolicy.RESPECT,
        improve=imp.boolean() if imp else True,
        min_values_policy=(
            mvp.convert(lambda n: MinValuesPolicy(n.text())) if mvp else MinValuesPolicy.STRICT
        ),
    )


__all__ = ["Scenario", "ScenarioError", "load", "parse"]
