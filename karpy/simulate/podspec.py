"""Scenario pods (and the small pieces they share with the rest of a scenario) -> core values.

Split from ``scenario.py`` so each stays readable. A scenario pod is written like a Kubernetes
Pod flattened one level (metadata and spec fields side by side) plus a few shorthands
(``requests`` for a one-container pod, ``owner``, ``hostPorts``, ``volumeTopology``). It is
turned into the Kubernetes Pod it stands for and decoded exactly as the operator decodes a
watched Pod: the codec's ``from_dict`` and ``karpy.state.podview.pod_view``. So a pod the
simulator accepts is read the same way in a cluster, and there is one Pod decoder to keep right.
Errors from either are reported with the scenario's own field path; unknown fields are errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from karpy.apis.codec import DecodeError, from_dict, unknown_fields
from karpy.apis.kube.pod import Pod as KubePod
from karpy.core.pods import HostPort, Pod, WhenUnsatisfiable
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.taints import Effect, Taint
from karpy.simulate.reader import Node, ScenarioError
from karpy.state.podview import TranslationError, pod_view

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


def parse_taint(node: Node) -> Taint:
    node.check_keys({"key", "value", "effect"})
    effect = node.req("effect")
    value = node.get("value")
    return Taint(
        node.req("key").text(),
        effect.convert(lambda n: Effect(n.text())),
        value.text() if value else "",
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
    "annotations",
    "startTime",
}
_CONTAINER_KEYS = {"name", "requests", "restartPolicy", "ports"}
# The fields a scenario pod shares with a Kubernetes PodSpec, passed through as written.
_SPEC_FIELDS = ("overhead", "affinity", "tolerations", "priority")

# karpy.state.podview shortens the long affinity field names in its paths; a scenario is
# written with the long ones, so errors are reported with those.
_PODVIEW_SHORTHANDS = (
    (
        re.compile(r"nodeAffinity\.required\."),
        "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.",
    ),
    (
        re.compile(r"nodeAffinity\.preferred\[(\d+)\]"),
        r"nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[\1].preference",
    ),
    (
        re.compile(r"(podAffinity|podAntiAffinity)\.required\["),
        r"\1.requiredDuringSchedulingIgnoredDuringExecution[",
    ),
    (
        re.compile(r"(podAffinity|podAntiAffinity)\.preferred\[(\d+)\]"),
        r"\1.preferredDuringSchedulingIgnoredDuringExecution[\2].podAffinityTerm",
    ),
)
_RESOURCE_NAME = re.compile(r"(requests|limits|overhead)\[([^\]]+)\]")
_CONTAINER = re.compile(r"spec\.(containers|initContainers)\[(\d+)\](.*)")


class _Paths:
    """Maps a field path of the Kubernetes Pod a scenario pod becomes back to the scenario's
    own path, so errors from the codec and from karpy.state.podview name what the user wrote."""

    def __init__(self, pod_path: str) -> None:
        self.pod_path = pod_path
        self.containers: list[str] = []  # scenario path of each spec.containers[k], "" = shorthand

    def scenario(self, kube_path: str) -> str:
        path = _RESOURCE_NAME.sub(r"\1.\2", kube_path.removeprefix("$").removeprefix("."))
        for pattern, replacement in _PODVIEW_SHORTHANDS:
            path = pattern.sub(replacement, path)
        container = _CONTAINER.fullmatch(path)
        if container is not None:
            kind, index, rest = container.group(1), int(container.group(2)), container.group(3)
            rest = rest.replace(".resources.requests", ".requests", 1)
            base = self.containers[index] if kind == "containers" else f"{kind}[{index}]"
            path = (base + rest).lstrip(".") or "requests"
        else:
            path = path.removeprefix("spec.").removeprefix("metadata.")
        return f"{self.pod_path}.{path}"

    def translation_error(self, message: str) -> ScenarioError:
        """A `TranslationError` message ("<path>: <problem>") about the scenario's field."""
        path, sep, problem = message.partition(": ")
        if not sep:
            return ScenarioError(f"{self.pod_path}: {message}")
        return ScenarioError(f"{self.scenario(path)}: {problem}")

    def decode_error(self, error: DecodeError) -> ScenarioError:
        """The codec's problems ("<problem> @ $.<path>"), each about the scenario's field."""
        parts = []
        for problem in error.problems:
            text, sep, path = problem.rpartition(" @ ")
            parts.append(f"{self.scenario(path)}: {text}" if sep else f"{self.pod_path}: {problem}")
        return ScenarioError("; ".join(parts))

    def unknown_error(self, paths: list[str]) -> ScenarioError:
        """Unknown keys, grouped by the mapping that holds them."""
        by_parent: dict[str, list[str]] = {}
        for path in paths:
            parent, _, key = self.scenario(path).rpartition(".")
            by_parent.setdefault(parent, []).append(key)
        return ScenarioError(
            "; ".join(f"{p}: unknown field(s) {', '.join(keys)}" for p, keys in by_parent.items())
        )


def _kube_container(node: Node) -> dict[str, object]:
    """A scenario container as a Kubernetes container (`requests` -> `resources.requests`)."""
    node.check_keys(_CONTAINER_KEYS)
    policy = node.get("restartPolicy")
    if policy is not None and policy.text() != "Always":
        raise policy.fail("only restartPolicy: Always (a sidecar) is meaningful here")
    name, requests, ports = node.get("name"), node.get("requests"), node.get("ports")
    out: dict[str, object] = {"name": name.text() if name else ""}
    if requests is not None:
        out["resources"] = {"requests": requests.value}
    if policy is not None:
        out["restartPolicy"] = policy.value
    if ports is not None:
        out["ports"] = ports.value
    return out


def _kube_spread(node: Node) -> object:
    """A spread constraint; whenUnsatisfiable defaults to DoNotSchedule, as the format says."""
    value = node.value
    if isinstance(value, dict) and "whenUnsatisfiable" not in value:
        return {**value, "whenUnsatisfiable": WhenUnsatisfiable.DO_NOT_SCHEDULE.value}
    return value


def _kube_pod(node: Node, *, name: str, namespace: str, paths: _Paths) -> dict[str, object]:
    """The Kubernetes Pod a scenario pod stands for (the shorthands `requests`, `owner`,
    `hostPorts` and `volumeTopology` aside), recording where each container came from."""
    labels, selector = node.get("labels"), node.get("nodeSelector")
    metadata: dict[str, object] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels.string_map()
    annotations = node.get("annotations")
    if annotations is not None:
        metadata["annotations"] = annotations.string_map()
    containers: list[dict[str, object]] = []
    requests = node.get("requests")
    if requests is not None:
        containers.append({"name": "main", "resources": {"requests": requests.value}})
        paths.containers.append("")
    for i, container in enumerate(items_of(node.get("containers"))):
        containers.append(_kube_container(container))
        paths.containers.append(f"containers[{i}]")
    spec: dict[str, object] = {"containers": containers}
    inits = [_kube_container(c) for c in items_of(node.get("initContainers"))]
    if inits:
        spec["initContainers"] = inits
    if selector is not None:
        spec["nodeSelector"] = selector.string_map()
    for key in _SPEC_FIELDS:
        child = node.get(key)
        if child is not None:
            spec[key] = child.value
    spreads = node.get("topologySpreadConstraints")
    if spreads is not None:
        spec["topologySpreadConstraints"] = [_kube_spread(c) for c in spreads.items()]
    pod: dict[str, object] = {"metadata": metadata, "spec": spec}
    started = node.get("startTime")
    if started is not None:
        pod["status"] = {"startTime": started.time()}
    return pod


def _host_port_shorthand(node: Node) -> list[HostPort]:
    ports: list[HostPort] = []
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
    return ports


def _refuse_negative_requests(node: Node) -> None:
    """Kubernetes refuses a negative request; so does a scenario, naming the field."""
    blocks = [node.get("requests")]
    for key in ("containers", "initContainers"):
        blocks.extend(c.get("requests") for c in items_of(node.get(key)))
    for block in blocks:
        for name, quantity in entries_of(block):
            value = quantity.value
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                continue  # not a quantity: the decoder names the field
            try:
                amount = Resources.of({name: value}).get_amount(name)
            except ValueError:
                continue  # not a valid quantity: the decoder names the field
            if amount < 0:
                raise quantity.fail(f"must not be negative, got {value!r}")


def parse_pod(
    node: Node, counter: CreationCounter, *, name: str | None = None, owner: str | None = None
) -> Pod:
    """A scenario pod as the core's pod, decoded as the operator decodes a watched Pod: the
    Kubernetes Pod it stands for goes through the codec (`from_dict`) and
    `karpy.state.podview.pod_view`. Errors name the scenario's field path."""
    return decode_pod(node, counter, name=name, owner=owner)[0]


def decode_pod(
    node: Node, counter: CreationCounter, *, name: str | None = None, owner: str | None = None
) -> tuple[Pod, KubePod]:
    """`parse_pod`, with the Kubernetes Pod the scenario pod stands for (its annotations and
    startTime, which the core's pod does not carry)."""
    node.check_keys(_POD_KEYS)
    _refuse_negative_requests(node)
    pod_name = name or node.req("name").text()
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    uid, owner_node = node.get("uid"), node.get("owner")
    paths = _Paths(node.path)
    data = _kube_pod(node, name=pod_name, namespace=namespace, paths=paths)
    unknown = unknown_fields(KubePod, data)
    if unknown:
        raise paths.unknown_error(unknown)
    try:
        kube = from_dict(KubePod, data)
    except DecodeError as err:
        raise paths.decode_error(err) from err
    host_ports = _host_port_shorthand(node)
    volumes = tuple(_selector_term(t) for t in items_of(node.get("volumeTopology")))
    try:
        pod = pod_view(
            kube.metadata,
            kube.spec,
            uid=uid.text() if uid else f"{namespace}/{pod_name}",
            creation=counter.next(),
        )
    except TranslationError as err:
        raise paths.translation_error(str(err)) from err
    core = attrs.evolve(
        pod,
        owner=owner or (owner_node.text() if owner_node else None),
        host_ports=(*pod.host_ports, *host_ports),
        volume_requirements=volumes,
    )
    return core, kube
