"""One consistent read of the cluster, translated into the scheduling core's ClusterSnapshot.

The provisioner solves against a frozen `karpy.core.snapshot.ClusterSnapshot`; this module builds
it from the API models the informers keep: Nodes with the pods bound to them, NodeClaims that
have no Node yet (in flight: launched ones by their allocatable, launching ones by the least of
their instance-type options), NodePools as templates, DaemonSets as per-node overhead. Pods
the provisioner wants placed are translated here too, each on its own: a pod the core cannot
represent (a bad quantity, an unresolvable volume) becomes an `ObjectError` naming the pod and
the field, and the rest of the batch goes on. A read is translated once (`translate_cluster`)
and any number of snapshots are built from that translation, some Nodes and NodeClaims left out
of each (the disruption controller's simulations, each without its candidates); `build_snapshot`
is both steps at once. The reading side (`read_cluster`) reads through a
`ClusterView` and is synchronous, so it sees every store at the same instant: stores change only
between awaits on the event loop.
The translation side is pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import attrs

from karpy.apis.kube.common import Taint as KubeTaint
from karpy.apis.kube.node import Node as KubeNode
from karpy.apis.kube.pod import Pod as KubePod
from karpy.apis.kube.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from karpy.apis.kube.workloads import DaemonSet as KubeDaemonSet
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool as KubeNodePool
from karpy.cloudprovider.requirements import requirements_from_api
from karpy.core import pods as cp
from karpy.core.instancetypes import InstanceType
from karpy.core.requirements import RequirementError, Requirements
from karpy.core.resources import Resources
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, Node, NodeName, NodePool, NodePoolName
from karpy.core.taints import Effect, Taint
from karpy.kube.resources import ResourceKind
from karpy.state.pods import is_terminal
from karpy.state.podview import (
    ObjectError,
    TranslationError,
    VolumeIndex,
    pod_view,
    resources_of,
)
from karpy.state.view import ClusterView

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def taint(t: KubeTaint) -> Taint:
    """An API taint as a core taint."""
    return Taint(t.key, Effect(t.effect), t.value or "")


def translate_pod(
    pod: KubePod, *, creation: int = 0, volumes: VolumeIndex | None = None
) -> cp.Pod | ObjectError:
    """The core view of `pod`, or an error naming the pod and the field the core refused."""
    meta = pod.metadata
    namespace, name = meta.namespace or "default", meta.name or ""
    try:
        if not meta.uid:
            raise TranslationError("metadata.uid: missing")
        return pod_view(meta, pod.spec, uid=meta.uid, creation=creation, volumes=volumes)
    except (TranslationError, ValueError) as e:
        return ObjectError("Pod", namespace, name, meta.uid or "", f"Pod {namespace}/{name}: {e}")


def nodepool_template(pool: KubeNodePool) -> NodePool:
    """The parts of a NodePool scheduling reads; raises TranslationError naming the field."""
    name = pool.metadata.name or ""
    template = pool.spec.template
    try:
        reqs = requirements_from_api(
            template.spec.requirements, field="spec.template.spec.requirements"
        )
        limits = resources_of(pool.spec.limits, field="spec.limits")
    except (RequirementError, TranslationError) as e:
        raise TranslationError(f"NodePool {name}: {e}") from e
    return NodePool(
        name=NodePoolName(name),
        requirements=reqs,
        labels=dict(template.metadata.labels),
        taints=tuple(taint(t) for t in template.spec.taints),
        startup_taints=tuple(taint(t) for t in template.spec.startup_taints),
        limits=limits,
        weight=pool.spec.weight or 0,
        static=pool.spec.replicas is not None,
    )


def existing_node(node: KubeNode, pods: Iterable[cp.Pod]) -> Node:
    """A registered Node and the pods bound to it; raises TranslationError naming the field."""
    name = node.metadata.name or ""
    labels = dict(node.metadata.labels)
    try:
        allocatable = resources_of(node.status.allocatable, field="status.allocatable")
        capacity = resources_of(node.status.capacity, field="status.capacity")
    except TranslationError as e:
        raise TranslationError(f"Node {name}: {e}") from e
    pool = labels.get(wk.LABEL_NODEPOOL)
    return Node(
        name=NodeName(name),
        labels=labels,
        taints=tuple(taint(t) for t in node.spec.taints),
        allocatable=allocatable,
        capacity=capacity,
        pods=tuple(pods),
        nodepool=NodePoolName(pool) if pool else None,
        # An unmanaged node is usable as it is; a managed one once karpy marked it initialized.
        initialized=pool is None or labels.get(wk.LABEL_NODE_INITIALIZED) == "true",
    )


def in_flight_node(claim: NodeClaim, instance_types: Sequence[InstanceType] = ()) -> Node:
    """A NodeClaim whose Node has not registered, as a node the solver may fill.

    A launched NodeClaim brings its allocatable and capacity. One still launching is modelled
    from what it asked for, as Karpenter models an in-flight NodeClaim: whichever of its
    instance-type options the cloud picks, it will have at least the smallest allocatable among
    them (`instance_types` are its NodePool's; the NodeClaim's own requirements narrow them),
    and never less than its resource requests. Without this, capacity being launched counts as
    none, and a pass (after a restart, say) launches again for pods it already covers.
    """
    name = claim.metadata.name or ""
    labels = dict(claim.metadata.labels)
    try:
        reqs = requirements_from_api(claim.spec.requirements, field="spec.requirements")
        if claim.status.allocatable:
            allocatable = resources_of(claim.status.allocatable, field="status.allocatable")
            capacity = resources_of(claim.status.capacity, field="status.capacity")
        else:
            requests = resources_of(claim.spec.resources.requests, field="spec.resources.requests")
            allocatable, capacity = _least_of_options(reqs, requests, instance_types)
    except (RequirementError, TranslationError) as e:
        raise TranslationError(f"NodeClaim {name}: {e}") from e
    for key in reqs.keys():  # noqa: SIM118 - Requirements iterates Requirement values
        value = reqs.single_value(key)
        if value is not None:
            labels.setdefault(key, value)
    pool = labels.get(wk.LABEL_NODEPOOL)
    return Node(
        name=NodeName(claim.status.node_name or name),
        labels=labels,
        taints=tuple(taint(t) for t in (*claim.spec.taints, *claim.spec.startup_taints)),
        allocatable=allocatable,
        capacity=capacity,
        nodepool=NodePoolName(pool) if pool else None,
        initialized=False,
        in_flight=True,
    )


def _least(amounts: Sequence[Resources]) -> Resources:
    """Per resource, the smallest amount among `amounts` (a resource some lack counts 0)."""
    if not amounts:
        return Resources()
    keys = set(amounts[0]).intersection(*amounts[1:])
    return Resources.milli({k: min(a[k] for a in amounts) for k in keys})


def _least_of_options(
    reqs: Requirements, requests: Resources, instance_types: Sequence[InstanceType]
) -> tuple[Resources, Resources]:
    """(allocatable, capacity) an unlaunched NodeClaim is sure to have: the least of the
    instance types it may launch as that fit its requests, else its requests alone."""
    allowed = reqs.get(wk.LABEL_INSTANCE_TYPE)
    options = [
        it
        for it in instance_types
        if (allowed is None or allowed.has(it.name)) and requests.fits(it.allocatable)
    ]
    if not options:
        return requests, requests
    allocatable = _least([it.allocatable for it in options])
    return allocatable, _least([it.capacity for it in options])


def daemonset(ds: KubeDaemonSet) -> DaemonSet:
    """A DaemonSet as the pod it would run on every node; raises TranslationError."""
    namespace, name = ds.metadata.namespace or "default", ds.metadata.name or ""
    meta = attrs.evolve(ds.spec.template.metadata, namespace=namespace, name=name)
    try:
        pod = pod_view(meta, ds.spec.template.spec, uid=f"daemonset/{namespace}/{name}")
    except TranslationError as e:
        raise TranslationError(f"DaemonSet {namespace}/{name}: spec.template.{e}") from e
    return DaemonSet(namespace, name, pod)


@attrs.frozen(kw_only=True)
class ClusterObjects:
    """The API objects a snapshot is built from (one consistent read)."""

    nodes: Sequence[KubeNode] = ()
    pods: Sequence[KubePod] = ()
    nodepools: Sequence[KubeNodePool] = ()
    nodeclaims: Sequence[NodeClaim] = ()
    daemonsets: Sequence[KubeDaemonSet] = ()
    volumes: VolumeIndex = attrs.field(factory=VolumeIndex)
    namespaces: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SnapshotKinds:
    """The optional kinds `read_cluster` reads when wiring registered them (None: not watched)."""

    daemonsets: ResourceKind[KubeDaemonSet] | None = None
    persistent_volumes: ResourceKind[PersistentVolume] | None = None
    persistent_volume_claims: ResourceKind[PersistentVolumeClaim] | None = None
    storage_classes: ResourceKind[StorageClass] | None = None


def _objects(view: ClusterView, kind: ResourceKind[T] | None) -> list[T]:
    return view.objects(kind) if kind is not None else []


def read_cluster(view: ClusterView, *, optional: SnapshotKinds | None = None) -> ClusterObjects:
    """Every object a snapshot needs, read in one synchronous step (hence consistent).

    Nodes, Pods, NodePools and NodeClaims must be registered; the `optional` kinds are read when
    given. Raises KeyError naming a required kind that is not registered.
    """
    extra = optional or SnapshotKinds()
    claims = {
        (c.metadata.namespace or "", c.metadata.name or ""): c
        for c in _objects(view, extra.persistent_volume_claims)
    }
    return ClusterObjects(
        nodes=view.nodes(),
        pods=view.pods(),
        nodepools=view.nodepools(),
        nodeclaims=view.nodeclaims(),
        daemonsets=_objects(view, extra.daemonsets),
        volumes=VolumeIndex(
            claims=claims,
            volumes={v.metadata.name or "": v for v in _objects(view, extra.persistent_volumes)},
            classes={s.metadata.name or "": s for s in _objects(view, extra.storage_classes)},
        ),
    )


@attrs.frozen(kw_only=True)
class SnapshotBuild:
    """A snapshot, the pods to place (in creation order) and every object left out, with why."""

    snapshot: ClusterSnapshot
    pods: tuple[cp.Pod, ...]
    errors: tuple[ObjectError, ...]


def _creation_order(pods: Iterable[KubePod]) -> list[KubePod]:
    return sorted(
        pods,
        key=lambda p: (
            p.metadata.creation_timestamp or _EPOCH,
            p.metadata.namespace or "",
            p.metadata.name or "",
        ),
    )


def _error(kind: str, meta_namespace: str | None, name: str | None, message: str) -> ObjectError:
    return ObjectError(kind, meta_namespace or "", name or "", "", message)


@attrs.frozen(kw_only=True)
class ClaimPart:
    """A NodeClaim not being deleted, as an in-flight node (or the error translating it).

    `node` is None while the NodeClaim's Node is registered (it is then no in-flight node);
    translated only when that Node is left out of a build."""

    claim: NodeClaim
    node: Node | ObjectError | None


@attrs.frozen(kw_only=True)
class TranslatedCluster:
    """ClusterObjects translated once for the core, from which snapshots are built.

    Every snapshot of one read is built from here (`build`), with some nodes and NodeClaims
    left out if asked: translating every bound pod and node is the costly part, and a
    disruption pass builds dozens of snapshots of the same read, each without its candidates.
    The core Nodes (and their pods) are shared by every build, so what the core caches on
    them (requests, label requirements) is computed once per read.
    """

    nodepools: tuple[NodePool, ...]
    instance_types: Mapping[str, tuple[InstanceType, ...]]
    daemonsets: tuple[DaemonSet, ...]
    # Registered Nodes by name, in name order: the core Node, the error translating it, or None
    # for a Node being deleted (registered, so its NodeClaim is no in-flight node, but no target).
    nodes: tuple[tuple[str, Node | ObjectError | None], ...]
    claims: tuple[ClaimPart, ...]
    # The namespaces of the pods bound to each node name (registered or not).
    bound_namespaces: Mapping[str, frozenset[str]]
    namespace_labels: Mapping[str, Mapping[str, str]]
    volumes: VolumeIndex
    # Errors in the order build_snapshot reports them: NodePools, bound pods (with the node
    # they are bound to), DaemonSets.
    pool_errors: tuple[ObjectError, ...]
    pod_errors: tuple[tuple[str, ObjectError], ...]
    daemonset_errors: tuple[ObjectError, ...]

    def build(
        self,
        pending: Iterable[KubePod],
        *,
        without_nodes: Collection[str] = (),
        without_claims: Collection[str] = (),
    ) -> SnapshotBuild:
        """The snapshot of the translated objects less the Nodes named `without_nodes` (and
        the pods bound to them) and the NodeClaims named `without_claims`, with `pending`
        translated as the pods to place (in their own creation order).

        The same as `build_snapshot` over the objects with those left out: a NodeClaim whose
        Node is left out becomes in flight, as it would be were that Node never registered."""
        errors = [*self.pool_errors]
        errors.extend(e for node, e in self.pod_errors if node not in without_nodes)
        nodes: list[Node] = []
        for name, part in self.nodes:
            if name in without_nodes or part is None:
                continue
            if isinstance(part, ObjectError):
                errors.append(part)
            else:
                nodes.append(part)
        for claim in self.claims:
            if claim.claim.metadata.name in without_claims:
                continue
            flight = claim.node
            if flight is None:
                if claim.claim.status.node_name not in without_nodes:
                    continue  # its Node is registered
                flight = _in_flight(claim.claim, self.instance_types)
            if isinstance(flight, ObjectError):
                errors.append(flight)
            else:
                nodes.append(flight)
        errors.extend(self.daemonset_errors)

        views: list[cp.Pod] = []
        for i, pod in enumerate(_creation_order(pending)):
            view = translate_pod(pod, creation=i, volumes=self.volumes)
            if isinstance(view, ObjectError):
                errors.append(view)
            else:
                views.append(view)

        # Every namespace carries its own name as a label (set by the apiserver), so selectors
        # on it work for the namespaces pods live in even when Namespace objects are not watched.
        present = {p.namespace for p in views}
        for node, names in self.bound_namespaces.items():
            if node not in without_nodes:
                present.update(names)
        namespaces: dict[str, Mapping[str, str]] = {
            ns: {wk.LABEL_NAMESPACE_NAME: ns} for ns in present
        }
        for ns, labels in self.namespace_labels.items():
            namespaces[ns] = {wk.LABEL_NAMESPACE_NAME: ns, **labels}
        snapshot = ClusterSnapshot(
            nodepools=self.nodepools,
            instance_types=self.instance_types,
            nodes=tuple(nodes),
            daemonsets=self.daemonsets,
            namespaces={ns: cp.freeze_labels(labels) for ns, labels in namespaces.items()},
        )
        return SnapshotBuild(snapshot=snapshot, pods=tuple(views), errors=tuple(errors))


def _in_flight(
    claim: NodeClaim, instance_types: Mapping[str, Sequence[InstanceType]]
) -> Node | ObjectError:
    pool_types = instance_types.get(claim.metadata.labels.get(wk.LABEL_NODEPOOL, ""), ())
    try:
        return in_flight_node(claim, pool_types)
    except TranslationError as e:
        return _error("NodeClaim", None, claim.metadata.name, str(e))


def translate_cluster(
    objects: ClusterObjects, instance_types: Mapping[str, Sequence[InstanceType]]
) -> TranslatedCluster:
    """Translate `objects` once (see TranslatedCluster); `instance_types` maps a NodePool name
    to what the provider offers it.

    Nodes and NodePools being deleted are left out (nothing new may land on them); NodePools,
    nodes, NodeClaims or DaemonSets the core cannot represent are left out with an error, and
    so is each bound pod it cannot represent.
    """
    pools: list[NodePool] = []
    pool_errors: list[ObjectError] = []
    for pool in sorted(objects.nodepools, key=lambda p: p.metadata.name or ""):
        if pool.metadata.deletion_timestamp is not None:
            continue
        try:
            pools.append(nodepool_template(pool))
        except TranslationError as e:
            pool_errors.append(_error("NodePool", None, pool.metadata.name, str(e)))

    bound: dict[str, list[cp.Pod]] = {}
    namespaces: dict[str, set[str]] = {}
    pod_errors: list[tuple[str, ObjectError]] = []
    for i, pod in enumerate(_creation_order(objects.pods)):
        if not pod.spec.node_name or is_terminal(pod):
            continue
        view = translate_pod(pod, creation=i)
        if isinstance(view, ObjectError):
            pod_errors.append((pod.spec.node_name, view))
        else:
            bound.setdefault(pod.spec.node_name, []).append(view)
            namespaces.setdefault(pod.spec.node_name, set()).add(view.namespace)

    nodes: list[tuple[str, Node | ObjectError | None]] = []
    for node in sorted(objects.nodes, key=lambda n: n.metadata.name or ""):
        name = node.metadata.name or ""
        if node.metadata.deletion_timestamp is not None:
            nodes.append((name, None))
            continue
        try:
            nodes.append((name, existing_node(node, bound.get(name, ()))))
        except TranslationError as e:
            nodes.append((name, _error("Node", None, name, str(e))))
    registered = {name for name, _ in nodes}
    claims = tuple(
        ClaimPart(
            claim=claim,
            node=None
            if claim.status.node_name in registered
            else _in_flight(claim, instance_types),
        )
        for claim in sorted(objects.nodeclaims, key=lambda c: c.metadata.name or "")
        if claim.metadata.deletion_timestamp is None
    )

    daemonsets: list[DaemonSet] = []
    daemonset_errors: list[ObjectError] = []
    for ds in objects.daemonsets:
        try:
            daemonsets.append(daemonset(ds))
        except TranslationError as e:
            daemonset_errors.append(
                _error("DaemonSet", ds.metadata.namespace, ds.metadata.name, str(e))
            )

    return TranslatedCluster(
        nodepools=tuple(pools),
        instance_types={name: tuple(types) for name, types in instance_types.items()},
        daemonsets=tuple(daemonsets),
        nodes=tuple(nodes),
        claims=claims,
        bound_namespaces={node: frozenset(names) for node, names in namespaces.items()},
        namespace_labels=objects.namespaces,
        volumes=objects.volumes,
        pool_errors=tuple(pool_errors),
        pod_errors=tuple(pod_errors),
        daemonset_errors=tuple(daemonset_errors),
    )


def build_snapshot(
    objects: ClusterObjects,
    *,
    pending: Iterable[KubePod],
    instance_types: Mapping[str, Sequence[InstanceType]],
) -> SnapshotBuild:
    """Translate `objects` into a ClusterSnapshot and `pending` into core pods.

    Nodes and NodePools being deleted are left out (nothing new may land on them); NodePools,
    nodes or DaemonSets the core cannot represent are left out with an error, and so is each
    pending pod it cannot represent. `instance_types` maps a NodePool name to what the provider
    offers it. (`translate_cluster` and `TranslatedCluster.build` in one step.)
    """
    return translate_cluster(objects, instance_types).build(pending)
