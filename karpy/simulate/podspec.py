"""Pod specs (and the small pieces they share with the rest of a scenario) -> core values.

Split from ``scenario.py`` so each stays readable: this module turns one pod-shaped mapping —
containers, init containers and sidecars, node and pod (anti-)affinity, tolerations, topology
spread, host ports, volume topology — into a ``karpy.core.pods.Pod``, naming the field path in
every error.
"""

from __future__ import annotations

from collections.abc import Iterable

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
from karpy.core.taints import Effect, Taint, Toleration, TolerationOperator
from karpy.simulate.reader import Node

ALL_ADDRESSES = "0.0.0.0"  # noqa: S104 -- Kubernetes' default hostIP, "every address"


class CreationCounter:
    """Creation order across the whole file (stands in for creationTimestamp)."""

    def __init__(self) -> None:
        self.value = 0

    def next(self) -> int:
        self.value += 1
        return self.value


def items_of(node: Node | None) -> Iterable[Node]:
    return () if node is None else node.items()


def entries_of(node: Node | None) -> Iterable[tuple[str, Node]]:
    return () if node is None else node.entries()


# --------------------------------------------------------------------------- small pieces
def parse_resources(node: Node | None) -> Resources:
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
    values = [v.text() for v in items_of(node.get("values"))]
    min_values = node.get("minValues")
    return node.convert(
        lambda _: Requirement.new(
            node.req("key").text(),
            node.req("operator").text(),
            values,
            min_values=None if min_values is None else min_values.integer(),
        )
    )


def parse_requirements(node: Node | None) -> Requirements:
    return Requirements(_requirement(n) for n in items_of(node))


def _selector_term(node: Node) -> Requirements:
    node.check_keys({"matchExpressions", "matchFields"})
    if node.get("matchFields") is not None:
        raise node.req("matchFields").fail("matchFields is not supported by the simulator")
    return parse_requirements(node.get("matchExpressions"))


def _label_selector(node: Node) -> LabelSelector:
    node.check_keys({"matchLabels", "matchExpressions"})
    labels = node.get("matchLabels")
    exprs = [_requirement(n) for n in items_of(node.get("matchExpressions"))]
    return LabelSelector.of(labels.string_map() if labels else None, exprs)


def parse_taint(node: Node) -> Taint:
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
        parse_resources(node.get("requests")),
        restart_always=policy is not None,
    )


def _container_ports(node: Node) -> list[HostPort]:
    out: list[HostPort] = []
    for port in items_of(node.get("ports")):
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
        namespaces=frozenset(n.text() for n in items_of(node.get("namespaces"))),
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
        for n in items_of(node.get("requiredDuringSchedulingIgnoredDuringExecution"))
    )
    preferred = []
    for n in items_of(node.get("preferredDuringSchedulingIgnoredDuringExecution")):
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
        match_label_keys=tuple(k.text() for k in items_of(node.get("matchLabelKeys"))),
    )


def parse_pod(
    node: Node, counter: CreationCounter, *, name: str | None = None, owner: str | None = None
) -> Pod:
    node.check_keys(_POD_KEYS)
    pod_name = name or node.req("name").text()
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    containers = [_container(c) for c in items_of(node.get("containers"))]
    ports: list[HostPort] = []
    for c in items_of(node.get("containers")):
        ports.extend(_container_ports(c))
    if node.get("requests") is not None:
        containers.insert(0, Container("main", parse_resources(node.get("requests"))))
    for hp in items_of(node.get("hostPorts")):
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
            for p in items_of(na.get("preferredDuringSchedulingIgnoredDuringExecution")):
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
        init_containers=tuple(_container(c) for c in items_of(node.get("initContainers"))),
        overhead=parse_resources(node.get("overhead")),
        node_selector=selector.string_map() if selector else {},
        required_node_affinity=required_na,
        preferred_node_affinity=preferred_na,
        tolerations=tuple(_toleration(t) for t in items_of(node.get("tolerations"))),
        topology_spread=tuple(_spread(s) for s in items_of(node.get("topologySpreadConstraints"))),
        pod_affinity=pod_aff[0],
        preferred_pod_affinity=pod_aff[1],
        pod_anti_affinity=pod_anti[0],
        preferred_pod_anti_affinity=pod_anti[1],
        host_ports=tuple(ports),
        volume_requirements=tuple(_selector_term(t) for t in items_of(node.get("volumeTopology"))),
        priority=prio.integer() if prio else 0,
        creation=counter.next(),
    )
