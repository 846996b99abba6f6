"""Scenario files (YAML or JSON) -> the core's frozen values.

``karpy simulate`` and ``karpy explain`` read a scenario: NodePools, an instance-type catalog (or
``provider: fake``), existing nodes with their pods, DaemonSets, and pending pods or Deployments
with replicas. Field names follow the Kubernetes objects they stand for (camelCase, the same
nesting for affinity and topology spread), so a pod spec can be pasted in with little editing.
This module does file I/O; the core below it does none. See docs/simulate.md for the format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import attrs
import yaml

from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.pods import (
    NOTHING,
    Container,
    HostPort,
    InclusionPolicy,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    PodUID,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
)
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.scheduling import SchedulerOptions
from karpy.core.scheduling.preferences import PreferencePolicy
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, NodeName, NodePool, NodePoolName
from karpy.core.snapshot import Node as ClusterNode
from karpy.core.taints import Effect, Taint, Toleration, TolerationOperator
from karpy.simulate.reader import Node, ScenarioError
from karpy.testing.instancetypes import make_instance_types

ALL_ADDRESSES = "0.0.0.0"  # noqa: S104 -- Kubernetes' default hostIP, "every address"


@attrs.frozen
class Scenario:
    """A parsed scenario: the snapshot, the pending pods and solver options."""

    snapshot: ClusterSnapshot
    pods: tuple[Pod, ...]
    options: SchedulerOptions


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
    counter = _Counter()
    pools = tuple(_nodepool(n) for n in root.req("nodePools").items())
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise root.req("nodePools").fail("nodepool names must be unique")
    catalog = _catalog(root.req("instanceTypes"))
    nodes = tuple(_node(n, counter) for n in _items(root.get("nodes")))
    daemonsets = tuple(_daemonset(n, counter) for n in _items(root.get("daemonSets")))
    pods: list[Pod] = [_pod(n, counter) for n in _items(root.get("pods"))]
    for dep in _items(root.get("deployments")):
        pods.extend(_deployment(dep, counter))
    uids = [p.uid for p in pods] + [p.uid for n in nodes for p in n.pods]
    if len(set(uids)) != len(uids):
        raise root.fail("pod names must be unique per namespace")
    namespaces = {
        k: tuple(sorted(v.string_map().items())) for k, v in _entries(root.get("namespaces"))
    }
    snapshot = ClusterSnapshot(
        nodepools=pools,
        instance_types={p.name: catalog for p in pools},
        nodes=nodes,
        daemonsets=daemonsets,
        namespaces=namespaces,
    )
    return Scenario(snapshot, tuple(pods), _options(root.get("options")))


class _Counter:
    """Creation order across the whole file (stands in for creationTimestamp)."""

    def __init__(self) -> None:
        self.value = 0

    def next(self) -> int:
        self.value += 1
        return self.value


def _items(node: Node | None) -> Iterable[Node]:
    return () if node is None else node.items()


def _entries(node: Node | None) -> Iterable[tuple[str, Node]]:
    return () if node is None else node.entries()


# --------------------------------------------------------------------------- small pieces
def _resources(node: Node | None) -> Resources:
    if node is None:
        return Resources()
    return node.convert(lambda n: Resources.of({k: v.convert(_quantity) for k, v in n.entries()}))


def _quantity(node: Node) -> str | int | float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise node.fail(f"expected a quantity, got {value!r}")
    Resources.of({"probe": value})  # raises QuantityError (a ValueError) with the quantity quoted
    return value


def _requirement(node: Node) -> Requirement:
    node.check_keys({"key", "operator", "values", "minValues"})
    values = [v.text() for v in _items(node.get("values"))]
    min_values = node.get("minValues")
    return node.convert(
        lambda _: Requirement.new(
            node.req("key").text(),
            node.req("operator").text(),
            values,
            min_values=None if min_values is None else min_values.integer(),
        )
    )


def _requirements(node: Node | None) -> Requirements:
    return Requirements(_requirement(n) for n in _items(node))


def _selector_term(node: Node) -> Requirements:
    node.check_keys({"matchExpressions", "matchFields"})
    if node.get("matchFields") is not None:
        raise node.req("matchFields").fail("matchFields is not supported by the simulator")
    return _requirements(node.get("matchExpressions"))


def _label_selector(node: Node) -> LabelSelector:
    node.check_keys({"matchLabels", "matchExpressions"})
    labels = node.get("matchLabels")
    exprs = [_requirement(n) for n in _items(node.get("matchExpressions"))]
    return LabelSelector.of(labels.string_map() if labels else None, exprs)


def _taint(node: Node) -> Taint:
    node.check_keys({"key", "value", "effect"})
    effect = node.req("effect")
    value = node.get("value")
    return Taint(
        node.req("key").text(),
        effect.convert(lambda n: Effect(n.text())),
        value.text() if value else "",
    )


def _toleration(node: Node) -> Toleration:
    node.check_keys({"key", "operator", "value", "effect", "tolerationSeconds"})
    op = node.get("operator")
    effect = node.get("effect")
    value = node.get("value")
    key = node.get("key")
    return Toleration(
        key=key.text() if key else "",
        operator=op.convert(lambda n: TolerationOperator(n.text()))
        if op
        else TolerationOperator.EQUAL,
        value=value.text() if value else "",
        effect=effect.convert(lambda n: Effect(n.text())) if effect else None,
    )


# --------------------------------------------------------------------------- nodepools and catalog
def _nodepool(node: Node) -> NodePool:
    node.check_keys(
        {"name", "weight", "requirements", "labels", "taints", "startupTaints", "limits"}
    )
    weight = node.get("weight")
    labels = node.get("labels")
    return NodePool(
        name=NodePoolName(node.req("name").text()),
        requirements=_requirements(node.get("requirements")),
        labels=labels.string_map() if labels else {},
        taints=tuple(_taint(t) for t in _items(node.get("taints"))),
        startup_taints=tuple(_taint(t) for t in _items(node.get("startupTaints"))),
        limits=_resources(node.get("limits")),
        weight=weight.integer() if weight else 0,
    )


def _catalog(node: Node) -> tuple[InstanceType, ...]:
    node.check_keys({"provider", "count", "items"})
    provider = node.get("provider")
    if provider is not None:
        if provider.text() != "fake":
            raise provider.fail(f"unknown provider {provider.text()!r} (supported: fake)")
        count = node.get("count")
        return make_instance_types(count.integer() if count else 400)
    return tuple(_instance_type(n) for n in node.req("items").items())


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
        _resources(node.req("capacity")),
        offerings,
        overhead=_resources(node.get("overhead")),
        labels=labels.string_map() if labels else None,
    )


# --------------------------------------------------------------------------- pods
_POD_KEYS = {
    "name",
    "namespace",
    "uid",
    "labels",
    "owner",
    "requests",
    "containers",
    "initContainers",
    "overhead",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "hostPorts",
    "volumeTopology",
    "priority",
}


def _container(node: Node) -> Container:
    node.check_keys({"name", "requests", "restartPolicy", "ports"})
    policy = node.get("restartPolicy")
    if policy is not None and policy.text() != "Always":
        raise policy.fail("only restartPolicy: Always (a sidecar) is meaningful here")
    name = node.get("name")
    return Container(
        name.text() if name else "",
        _resources(node.get("requests")),
        restart_always=policy is not None,
    )


def _container_ports(node: Node) -> list[HostPort]:
    out: list[HostPort] = []
    for port in _items(node.get("ports")):
        port.check_keys({"containerPort", "hostPort", "protocol", "hostIP", "name"})
        host = port.get("hostPort")
        if host is not None:
            proto, ip = port.get("protocol"), port.get("hostIP")
            out.append(
                HostPort(
                    host.integer(),
                    proto.text() if proto else "TCP",
                    ip.text() if ip else ALL_ADDRESSES,
                )
            )
    return out


def _affinity_term(node: Node) -> PodAffinityTerm:
    node.check_keys({"labelSelector", "topologyKey", "namespaces", "namespaceSelector"})
    ns_sel = node.get("namespaceSelector")
    selector = node.get("labelSelector")
    return PodAffinityTerm(
        selector=_label_selector(selector) if selector else NOTHING,
        topology_key=node.req("topologyKey").text(),
        namespaces=frozenset(n.text() for n in _items(node.get("namespaces"))),
        namespace_selector=_label_selector(ns_sel) if ns_sel else None,
    )


def _pod_affinity(
    node: Node | None,
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    if node is None:
        return (), ()
    node.check_keys(
        {
            "requiredDuringSchedulingIgnoredDuringExecution",
            "preferredDuringSchedulingIgnoredDuringExecution",
        }
    )
    required = tuple(
        _affinity_term(n)
        for n in _items(node.get("requiredDuringSchedulingIgnoredDuringExecution"))
    )
    preferred = []
    for n in _items(node.get("preferredDuringSchedulingIgnoredDuringExecution")):
        n.check_keys({"weight", "podAffinityTerm"})
        preferred.append(
            WeightedPodAffinityTerm(
                n.req("weight").integer(), _affinity_term(n.req("podAffinityTerm"))
            )
        )
    return required, tuple(preferred)


def _spread(node: Node) -> TopologySpreadConstraint:
    node.check_keys(
        {
            "maxSkew",
            "topologyKey",
            "whenUnsatisfiable",
            "labelSelector",
            "minDomains",
            "nodeAffinityPolicy",
            "nodeTaintsPolicy",
            "matchLabelKeys",
        }
    )
    skew = node.req("maxSkew").integer()
    if skew < 1:
        raise node.req("maxSkew").fail("must be at least 1")
    when = node.get("whenUnsatisfiable")
    min_domains = node.get("minDomains")
    aff, taints = node.get("nodeAffinityPolicy"), node.get("nodeTaintsPolicy")
    selector = node.get("labelSelector")
    return TopologySpreadConstraint(
        topology_key=node.req("topologyKey").text(),
        max_skew=skew,
        selector=_label_selector(selector) if selector else NOTHING,
        when_unsatisfiable=when.convert(lambda n: WhenUnsatisfiable(n.text()))
        if when
        else WhenUnsatisfiable.DO_NOT_SCHEDULE,
        min_domains=min_domains.integer() if min_domains else None,
        node_affinity_policy=aff.convert(lambda n: InclusionPolicy(n.text()))
        if aff
        else InclusionPolicy.HONOR,
        node_taints_policy=taints.convert(lambda n: InclusionPolicy(n.text()))
        if taints
        else InclusionPolicy.IGNORE,
        match_label_keys=tuple(k.text() for k in _items(node.get("matchLabelKeys"))),
    )


def _pod(
    node: Node, counter: _Counter, *, name: str | None = None, owner: str | None = None
) -> Pod:
    node.check_keys(_POD_KEYS)
    pod_name = name or node.req("name").text()
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    containers = [_container(c) for c in _items(node.get("containers"))]
    ports: list[HostPort] = []
    for c in _items(node.get("containers")):
        ports.extend(_container_ports(c))
    if node.get("requests") is not None:
        containers.insert(0, Container("main", _resources(node.get("requests"))))
    for hp in _items(node.get("hostPorts")):
        hp.check_keys({"port", "protocol", "hostIP"})
        proto, ip = hp.get("protocol"), hp.get("hostIP")
        ports.append(
            HostPort(
                hp.req("port").integer(),
                proto.text() if proto else "TCP",
                ip.text() if ip else ALL_ADDRESSES,
            )
        )
    labels, selector, prio = node.get("labels"), node.get("nodeSelector"), node.get("priority")
    affinity = node.get("affinity")
    required_na: tuple[Requirements, ...] = ()
    preferred_na: tuple[PreferredSchedulingTerm, ...] = ()
    pod_aff: tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]] = ((), ())
    pod_anti: tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]] = ((), ())
    if affinity is not None:
        affinity.check_keys({"nodeAffinity", "podAffinity", "podAntiAffinity"})
        na = affinity.get("nodeAffinity")
        if na is not None:
            na.check_keys(
                {
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    "preferredDuringSchedulingIgnoredDuringExecution",
                }
            )
            req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
            if req is not None:
                req.check_keys({"nodeSelectorTerms"})
                required_na = tuple(_selector_term(t) for t in req.req("nodeSelectorTerms").items())
            prefs = []
            for p in _items(na.get("preferredDuringSchedulingIgnoredDuringExecution")):
                p.check_keys({"weight", "preference"})
                prefs.append(
                    PreferredSchedulingTerm(
                        p.req("weight").integer(), _selector_term(p.req("preference"))
                    )
                )
            preferred_na = tuple(prefs)
        pod_aff = _pod_affinity(affinity.get("podAffinity"))
        pod_anti = _pod_affinity(affinity.get("podAntiAffinity"))
    uid = node.get("uid")
    owner_node = node.get("owner")
    return Pod(
        uid=PodUID(uid.text() if uid else f"{namespace}/{pod_name}"),
        namespace=namespace,
        name=pod_name,
        labels=labels.string_map() if labels else {},
        owner=owner or (owner_node.text() if owner_node else None),
        containers=tuple(containers),
        init_containers=tuple(_container(c) for c in _items(node.get("initContainers"))),
        overhead=_resources(node.get("overhead")),
        node_selector=selector.string_map() if selector else {},
        required_node_affinity=required_na,
        preferred_node_affinity=preferred_na,
        tolerations=tuple(_toleration(t) for t in _items(node.get("tolerations"))),
        topology_spread=tuple(_spread(s) for s in _items(node.get("topologySpreadConstraints"))),
        pod_affinity=pod_aff[0],
        preferred_pod_affinity=pod_aff[1],
        pod_anti_affinity=pod_anti[0],
        preferred_pod_anti_affinity=pod_anti[1],
        host_ports=tuple(ports),
        volume_requirements=tuple(_selector_term(t) for t in _items(node.get("volumeTopology"))),
        priority=prio.integer() if prio else 0,
        creation=counter.next(),
    )


def _deployment(node: Node, counter: _Counter) -> list[Pod]:
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
        _pod(Node(data, template.path), counter, name=f"{name}-{i}", owner=owner)
        for i in range(replicas)
    ]


def _node(node: Node, counter: _Counter) -> ClusterNode:
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
    allocatable = _resources(node.req("allocatable"))
    capacity = node.get("capacity")
    name = node.req("name").text()
    return ClusterNode(
        name=NodeName(name),
        labels=labels.string_map() if labels else {},
        taints=tuple(_taint(t) for t in _items(node.get("taints"))),
        allocatable=allocatable,
        capacity=_resources(capacity) if capacity else allocatable,
        pods=tuple(_pod(p, counter) for p in _items(node.get("pods"))),
        nodepool=NodePoolName(pool.text()) if pool else None,
        initialized=init.boolean() if init else True,
        in_flight=flight.boolean() if flight else False,
    )


def _daemonset(node: Node, counter: _Counter) -> DaemonSet:
    node.check_keys({"name", "namespace", "template"})
    name = node.req("name").text()
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    data = dict(node.req("template").mapping())
    data.setdefault("name", name)
    data["namespace"] = namespace
    pod = _pod(Node(data, node.req("template").path), counter)
    return DaemonSet(namespace, name, pod)


def _options(node: Node | None) -> SchedulerOptions:
    if node is None:
        return SchedulerOptions()
    node.check_keys({"maxInstanceTypes", "preferencePolicy", "improve"})
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
    )


__all__ = ["Scenario", "ScenarioError", "load", "parse"]
