"""Scenario files (YAML or JSON) -> the core's frozen values.

``karpy simulate`` and ``karpy explain`` read a scenario: NodePools, an instance-type catalog (or
``provider: fake``), existing nodes with their pods, DaemonSets, and pending pods or Deployments
with replicas, and CapacityBuffers (their chunks solved as virtual pods behind the pending
ones). Field names follow the Kubernetes objects they stand for (camelCase, the same
nesting for affinity and topology spread), so a pod spec can be pasted in with little editing.
This module does file I/O; the core below it does none. See docs/simulate.md for the format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Final

import attrs
import yaml

from karpy.apis.autoscaling.capacitybuffer import GROUP
from karpy.apis.codec import DecodeError, from_dict
from karpy.apis.duration import parse_duration
from karpy.apis.kube.node import Node as KubeNode
from karpy.apis.kube.pod import Pod as KubePod
from karpy.apis.kube.workloads import PodDisruptionBudget
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.core.buffers import BufferSizeError, buffer_replicas
from karpy.core.disruption.budgets import BudgetSpec, budget_limit
from karpy.core.disruption.candidates import Policy, PoolDisruption
from karpy.core.disruption.consolidation import parse_min_improvement
from karpy.core.disruption.cron import parse_schedule
from karpy.core.disruption.methods import Reason
from karpy.core.disruption.pdb import scaled
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.pods import Pod
from karpy.core.resources import PODS, Resources
from karpy.core.scheduling import SchedulerOptions
from karpy.core.scheduling.preferences import MinValuesPolicy, PreferencePolicy
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, NodeName, NodePool, NodePoolName
from karpy.core.snapshot import Node as ClusterNode
from karpy.simulate.consolidate import DEFAULT_NOW, Protection
from karpy.simulate.overlays import OverlayPlan, parse_overlays
from karpy.simulate.podspec import (
    CreationCounter,
    decode_pod,
    entries_of,
    items_of,
    parse_pod,
    parse_requirements,
    parse_resources,
    parse_taint,
)
from karpy.simulate.reader import Node, ScenarioError
from karpy.state.pods import do_not_disrupt
from karpy.state.podview import label_selector
from karpy.state.protection import do_not_disrupt_seconds, do_not_disrupt_until
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
    protection: Protection = attrs.field(factory=Protection)
    """do-not-disrupt pods and nodes, and PodDisruptionBudgets (`--consolidate` reads them)."""
    now: float = DEFAULT_NOW
    """The scenario's clock (epoch seconds): budget schedules and do-not-disrupt durations
    are evaluated at it."""
    overlays: OverlayPlan = attrs.field(factory=OverlayPlan)
    """The scenario's NodeOverlays as judged; the snapshot's catalogs have them applied."""
    buffers: tuple[Pod, ...] = ()
    """The CapacityBuffers' virtual pods, one per chunk (karpy.core.buffers)."""


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
            "podDisruptionBudgets",
            "now",
            "nodeOverlays",
            "capacityBuffers",
        }
    )
    counter = CreationCounter()
    pools = tuple(_nodepool(n) for n in root.req("nodePools").items())
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise root.req("nodePools").fail("nodepool names must be unique")
    catalog = _catalog(root.req("instanceTypes"))
    parsed = [_node(n, counter) for n in items_of(root.get("nodes"))]
    nodes = tuple(node for node, _, _ in parsed)
    daemonsets = tuple(_daemonset(n, counter) for n in items_of(root.get("daemonSets")))
    pods: list[Pod] = [parse_pod(n, counter) for n in items_of(root.get("pods"))]
    workloads: dict[tuple[str, str], tuple[int, Node]] = {}
    for dep in items_of(root.get("deployments")):
        pods.extend(_deployment(dep, counter))
        ns = dep.get("namespace")
        key = (ns.text() if ns else "default", dep.req("name").text())
        workloads[key] = (dep.req("replicas").integer(), dep.req("template"))
    buffers = [
        p for b in items_of(root.get("capacityBuffers")) for p in _buffer(b, counter, workloads)
    ]
    every = [*pods, *buffers, *(p for n in nodes for p in n.pods)]
    repeated = sorted(k for k, n in Counter(p.key for p in every).items() if n > 1)
    if repeated:
        raise root.fail(f"pod names must be unique per namespace: {', '.join(repeated)} repeated")
    repeated = sorted(u for u, n in Counter(p.uid for p in every).items() if n > 1)
    if repeated:
        raise root.fail(f"pod uids must be unique: {', '.join(repeated)} repeated")
    namespaces = {
        k: tuple(sorted(v.string_map().items())) for k, v in entries_of(root.get("namespaces"))
    }
    overlays = parse_overlays(root.get("nodeOverlays"), pools, catalog)
    snapshot = ClusterSnapshot(
        nodepools=pools,
        instance_types={p.name: overlays.types_for(p.name) for p in pools},
        nodes=nodes,
        daemonsets=daemonsets,
        namespaces=namespaces,
    )
    disruption: dict[str, PoolDisruption] = {
        p.name: _disruption(n.get("disruption"))
        for p, n in zip(pools, root.req("nodePools").items(), strict=True)
    }
    now = root.get("now")
    protection = Protection(
        pods={uid: until for _, found, _ in parsed for uid, until in found.items()},
        nodes=frozenset(node.name for node, _, held in parsed if held),
        pdbs=_pdbs(root.get("podDisruptionBudgets")),
    )
    return Scenario(
        snapshot,
        tuple(pods),
        _options(root.get("options")),
        disruption,
        protection=protection,
        now=now.time().timestamp() if now else DEFAULT_NOW,
        overlays=overlays,
        buffers=tuple(buffers),
    )


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
    limits = parse_resources(node.get("limits"))
    for key, amount in limits.items():
        # As the apiserver and NodePool validation: karpy's one limit, never below zero.
        if key.startswith("karpy.sh/") and key != wk.LIMIT_COST_PER_HOUR:
            msg = f"unknown limit {key!r}: the only karpy.sh/ limit is {wk.LIMIT_COST_PER_HOUR}"
            raise node.req("limits").fail(msg)
        if key == wk.LIMIT_COST_PER_HOUR and amount < 0:
            raise node.req("limits").fail(f"{key} must not be negative")
    return NodePool(
        name=NodePoolName(node.req("name").text()),
        requirements=parse_requirements(node.get("requirements")),
        labels=labels.string_map() if labels else {},
        taints=tuple(parse_taint(t) for t in items_of(node.get("taints"))),
        startup_taints=tuple(parse_taint(t) for t in items_of(node.get("startupTaints"))),
        limits=limits,
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
    """A budget: `nodes`, `reasons`, and `schedule` (cron, UTC) with `duration` together;
    checked as the controller checks them, so a bad value is refused here, naming the field,
    rather than failing closed in the pass."""
    node.check_keys({"nodes", "reasons", "schedule", "duration"})
    reasons = frozenset(r.text() for r in items_of(node.get("reasons")))
    unknown = sorted(reasons - {r.value for r in Reason})
    if unknown:
        raise node.req("reasons").fail(f"unknown disruption reason {unknown[0]!r}")
    nodes = node.req("nodes")
    _core(nodes, lambda n: budget_limit(BudgetSpec(nodes=n.text()), total=1))
    schedule, duration = node.get("schedule"), node.get("duration")
    if (schedule is None) != (duration is None):
        raise node.fail("schedule and duration are set together (a window needs both)")
    if schedule is None or duration is None:
        return BudgetSpec(nodes=nodes.text(), reasons=reasons)
    schedule.convert(lambda n: parse_schedule(n.text()))
    try:
        length = parse_duration(duration.text(), field_name="duration")
    except ValueError:
        raise duration.fail(f"{duration.value!r} is not a duration (e.g. 30m, 8h)") from None
    if length is None:
        raise duration.fail("Never is not a window length")
    return BudgetSpec(
        nodes=nodes.text(),
        schedule=schedule.text(),
        duration=length.total_seconds(),
        reasons=reasons,
    )


def _core(node: Node, check: Callable[[Node], object]) -> None:
    """Run a check of the core on `node`; its ValueError ("<its field>: <problem>") becomes an
    error about the scenario's field."""
    try:
        check(node)
    except ValueError as err:
        _, sep, problem = str(err).partition(": ")
        raise node.fail(problem if sep else str(err)) from err


# --------------------------------------------------------------------------- protection
def _pod_protection(node: Node, kube: KubePod) -> float | None:
    """Until when the pod's `karpenter.sh/do-not-disrupt` protects it, as the controller
    reads it; a value that is neither "true" nor a duration is refused."""
    annotations = node.get("annotations")
    value = annotations.get(wk.ANNOTATION_DO_NOT_DISRUPT) if annotations else None
    if value is not None:
        _core(value, lambda n: do_not_disrupt_seconds(n.text()))
    return do_not_disrupt_until(kube)


def _pdbs(node: Node | None) -> tuple[PodDisruptionBudget, ...]:
    found = tuple(_pdb(n) for n in items_of(node))
    keys = Counter((p.metadata.namespace, p.metadata.name) for p in found)
    repeated = sorted(f"{ns}/{name}" for (ns, name), n in keys.items() if n > 1)
    if repeated and node is not None:
        raise node.fail(f"names must be unique per namespace: {', '.join(repeated)} repeated")
    return found


def _pdb_problem(node: Node, problem: str) -> str:
    """A codec problem ("<text> @ $.spec.<path>") about the scenario PDB's own field."""
    text, sep, path = problem.rpartition(" @ ")
    if not sep:
        return f"{node.path}: {problem}"
    field = path.removeprefix("$.").removeprefix("spec.").removeprefix("metadata.")
    return f"{node.path}.{field}: {text}"


def _int_or_percent(node: Node) -> int | str:
    raw = node.value
    if not isinstance(raw, int | str) or isinstance(raw, bool):
        raise node.fail(f"expected an integer or a percentage, got {raw!r}")
    _core(node, lambda _: scaled(raw, 0, field=node.path))
    return raw


def _pdb(node: Node) -> PodDisruptionBudget:
    """A PodDisruptionBudget: name, namespace (default), selector (matchLabels /
    matchExpressions; none selects no pod, as in Kubernetes), and one of minAvailable and
    maxUnavailable (an integer or a percentage)."""
    node.check_keys({"name", "namespace", "selector", "minAvailable", "maxUnavailable"})
    ns = node.get("namespace")
    metadata = {"name": node.req("name").text(), "namespace": ns.text() if ns else "default"}
    spec: dict[str, object] = {}
    limits = {k: node.get(k) for k in ("minAvailable", "maxUnavailable")}
    for key, value in limits.items():
        if value is not None:
            spec[key] = _int_or_percent(value)
    if all(v is not None for v in limits.values()):
        raise node.fail("minAvailable and maxUnavailable cannot both be set")
    if all(v is None for v in limits.values()):
        raise node.fail("set minAvailable or maxUnavailable")
    selector = node.get("selector")
    if selector is not None:
        selector.check_keys({"matchLabels", "matchExpressions"})
        spec["selector"] = selector.value
    try:
        pdb = from_dict(PodDisruptionBudget, {"metadata": metadata, "spec": spec})
    except DecodeError as err:
        raise ScenarioError("; ".join(_pdb_problem(node, p) for p in err.problems)) from err
    if selector is not None:
        _core(selector, lambda _: label_selector(pdb.spec.selector, field="selector"))
    return pdb


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


def _buffer(
    node: Node, counter: CreationCounter, workloads: Mapping[tuple[str, str], tuple[int, Node]]
) -> list[Pod]:
    """A CapacityBuffer's virtual pods. Its chunk is a pod `template` (a podTemplateRef) or a
    scenario `deployment` (a scalableRef: its template, and its replicas for `percentage`);
    `replicas`, `percentage` and `limits` size it as the capacitybuffer controller does."""
    node.check_keys(
        {"name", "namespace", "template", "deployment", "replicas", "percentage", "limits"}
    )
    name = node.req("name").text()
    ns = node.get("namespace")
    namespace = ns.text() if ns else "default"
    template, deployment = node.get("template"), node.get("deployment")
    if (template is None) == (deployment is None):
        raise node.fail("exactly one of template and deployment must be set")
    percentage = node.get("percentage")
    if percentage is not None and deployment is None:
        raise percentage.fail("percentage applies only with deployment (a share of its replicas)")
    workload_replicas: int | None = None
    if deployment is not None:
        found = workloads.get((namespace, deployment.text()))
        if found is None:
            raise deployment.fail(f"no deployment {deployment.text()!r} in namespace {namespace}")
        workload_replicas, template = found
    assert template is not None  # noqa: S101 - one of the two is set, checked above
    data = dict(template.mapping())
    data["namespace"] = namespace
    owner = f"{GROUP}/CapacityBuffer/{namespace}/{name}"

    def chunk(i: int) -> Pod:
        return parse_pod(
            Node(data, template.path), counter, name=f"capacity-buffer-{name}-{i}", owner=owner
        )

    replicas, limits = node.get("replicas"), node.get("limits")
    try:
        size = buffer_replicas(
            replicas=replicas.integer() if replicas else None,
            percentage=percentage.integer() if percentage else None,
            workload_replicas=workload_replicas,
            limits=dict(parse_resources(limits)) if limits else None,
            chunk=chunk(0).requests(),
        )
    except BufferSizeError as err:
        raise node.fail(str(err)) from err
    return [chunk(i + 1) for i in range(size)]


def _node(node: Node, counter: CreationCounter) -> tuple[ClusterNode, dict[str, float], bool]:
    """A node, its pods' do-not-disrupt ends (by uid) and whether the node itself is annotated
    `karpenter.sh/do-not-disrupt: "true"`."""
    node.check_keys(
        {
            "name",
            "labels",
            "annotations",
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
    pods: list[Pod] = []
    protected: dict[str, float] = {}
    for item in items_of(node.get("pods")):
        pod, kube = decode_pod(item, counter)
        pods.append(pod)
        until = _pod_protection(item, kube)
        if until is not None:
            protected[pod.uid] = until
    annotations = node.get("annotations")
    meta = ObjectMeta(annotations=annotations.string_map() if annotations else {})
    cluster_node = ClusterNode(
        name=NodeName(name),
        labels=labels.string_map() if labels else {},
        taints=tuple(parse_taint(t) for t in items_of(node.get("taints"))),
        allocatable=allocatable,
        capacity=_with_pods(parse_resources(capacity)) if capacity else allocatable,
        pods=tuple(pods),
        nodepool=NodePoolName(pool.text()) if pool else None,
        initialized=init.boolean() if init else True,
        in_flight=flight.boolean() if flight else False,
    )
    return cluster_node, protected, do_not_disrupt(KubeNode(metadata=meta))


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
