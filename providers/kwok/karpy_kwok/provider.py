"""KwokCloudProvider: "launches" instances by creating Node objects that kwok then runs.

No cloud: an instance *is* a Node annotated ``kwok.x-k8s.io/node=fake``, which kwok (running
against the same apiserver) marks Ready and whose pods it moves to Running. So the provisioning
path — NodeClaim, launch, registration, initialization — runs end to end on any cluster.

providerID. ``kwok://<node-name>``, the scheme Karpenter's kwok provider uses; the Node is named
after the NodeClaim, so ``get`` needs no lookup and a retried create of the same NodeClaim hits
the existing Node instead of launching a second one. The Node also records the NodeClaim's UID
(annotation ``karpenter.kwok.sh/nodeclaim-uid``), as an EC2 launch carries a client token derived
from it: a create retried after a crash is recognised as the same launch, and a Node left by an
earlier NodeClaim of the same name is never taken for this one's.

Leaked instances. A kwok Node that no NodeClaim owns (its NodeClaim was deleted before the launch
was recorded, say) is deleted by the ``kwok.garbagecollection`` pass once it is older than
LEAK_GRACE seconds, as Karpenter's instance garbage collection does for EC2 instances; the pass
runs at start, every LEAK_PERIOD seconds, and when the grace of an instance it saw runs out. A
NodeClaim being deleted before its launch was recorded has its Node deleted by name (``delete``
falls back on the NodeClaim's name and UID when it has no providerID).

Registration delay. A real instance takes a while to join. With ``registration_delay`` > 0,
``create`` returns at once (the NodeClaim is Launched) and records a *pending launch*; the Node is
created once the delay has passed, by the ``kwok.launches`` pass, a periodic controller the
provider declares (`extension()`) and the operator runs with its own controllers (it is not part
of the CloudProvider Protocol). Pending launches are instances like any other to ``get``,
``list`` and ``delete``, so garbage collection and termination treat them correctly. With no
delay the Node is created inside ``create`` and the pass has nothing to do.

NodeClass. The provider owns the KWOKNodeClass kind and declares it, so the operator informs it;
with the operator's cluster view a launch reads the NodeClass there, and from the apiserver only
when the view does not hold it yet (or when built without a view, in tests). kwok's "instances"
are its Nodes, so ``get`` and ``list`` read Nodes from the same view: the simulated cloud costs
the apiserver no reads of its own.

Insufficient capacity. Offerings matched by ``unavailable`` selectors (settable at runtime with
``set_unavailable``) are reported with ``available=False`` and never launched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Final

import attrs

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec, NodeStatus, NodeSystemInfo
from karpy.apis.meta import ConditionStatus, ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.protocol import DriftReason, NodeClassKind, RepairPolicy
from karpy.cloudprovider.selection import cheapest_launch, launched_nodeclaim
from karpy.core.instancetypes import InstanceType
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, KubeError, NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.manager import Keys, ProviderExtension, Singleton
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_kwok.apis.kwoknodeclass import (
    ANNOTATION_NODECLASS_HASH,
    ANNOTATION_NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION,
    KWOKNodeClass,
    static_hash,
)
from karpy_kwok.catalog import CatalogEntry, OfferingSelector, instance_types
from karpy_kwok.kinds import KWOK_NODECLASSES

log = logging.getLogger(__name__)

PROVIDER_NAME: Final = "kwok"
PROVIDER_ID_PREFIX: Final = "kwok://"
KWOK_NODE_CLASS: Final = NodeClassKind(group=wk.KWOK_GROUP, kind=KWOKNodeClass.KIND)
RETRY_SECONDS: Final = 1.0
"""Wait before retrying a delayed Node creation that failed (the apiserver was unreachable)."""
NODECLASS_DRIFT: Final = DriftReason("NodeClassDrift")
REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
)
"""A kwok node that is not Ready for 30 minutes is replaced (Karpenter's kubelet policies)."""
LAUNCHES: Final = "kwok.launches"
"""The name of the pass that creates the Nodes of pending launches."""
GARBAGE_COLLECTION: Final = "kwok.garbagecollection"
"""The name of the pass that deletes kwok Nodes no NodeClaim owns."""
ANNOTATION_NODECLAIM_UID: Final = f"{wk.KWOK_GROUP}/nodeclaim-uid"
"""On a kwok Node: the UID of the NodeClaim it was launched for."""
LEAK_GRACE: Final = 30.0
"""Seconds a kwok Node may exist without a NodeClaim before it is collected (Karpenter's 30 s
for EC2 instances: the NodeClaim of a launch in progress may not show yet)."""
LEAK_PERIOD: Final = 120.0
"""Seconds between leaked-instance passes (Karpenter's two minutes)."""
NOT_SYNCED_REQUEUE: Final = 1.0


@attrs.frozen(kw_only=True)
class KwokOptions:
    registration_delay: float = 0.0
    """Seconds between a launch and its Node appearing (how long a real instance takes to join)."""
    unavailable: tuple[OfferingSelector, ...] = ()
    """Offerings that are out of capacity from the start."""


@attrs.frozen
class _Pending:
    node: Node
    nodeclaim: NodeClaim
    due: float


def provider_id_of(node_name: str) -> str:
    return f"{PROVIDER_ID_PREFIX}{node_name}"


def node_name_of(provider_id: str) -> str | None:
    """The Node name a kwok providerID names, or None when it is not one of ours."""
    if not provider_id.startswith(PROVIDER_ID_PREFIX):
        return None
    name = provider_id.removeprefix(PROVIDER_ID_PREFIX)
    return name if name and "/" not in name else None


class KwokCloudProvider:
    """A CloudProvider whose instances are kwok-managed Nodes (see the module docstring).

    Side effects: creates and deletes Nodes through `kube`; keeps pending launches in memory.
    """

    def __init__(
        self,
        kube: KubeClient,
        catalog: Sequence[CatalogEntry],
        *,
        options: KwokOptions,
        view: ClusterView | None = None,
        clock: Clock | None = None,
    ) -> None:
        if options.registration_delay < 0:
            msg = f"kwok registration_delay must not be negative, got {options.registration_delay}"
            raise ValueError(msg)
        self._kube = kube
        self._view = view
        self._clock = clock or SystemClock()
        self._catalog = tuple(catalog)
        self._options = options
        # Built once per availability change, not per call: the scheduler asks for every batch.
        self._types = instance_types(self._catalog, unavailable=options.unavailable)
        self._pending: dict[str, _Pending] = {}
        self._launches = Keys(LAUNCHES)

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    def set_unavailable(self, selectors: Iterable[OfferingSelector]) -> None:
        """Replace the set of out-of-capacity offerings (empty: everything is available)."""
        self._types = instance_types(self._catalog, unavailable=tuple(selectors))

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch on the cheapest compatible available offering (module docstring for the Node).

        Raises NodeClassNotReadyError when the KWOKNodeClass is missing or not Ready, and
        InsufficientCapacityError when no available offering fits.
        """
        name = nodeclaim.metadata.name
        pending = self._pending.get(name or "")
        if pending is not None:
            return pending.nodeclaim  # a retried create of a launch still pending
        nodeclass = await self._ready_nodeclass(
            nodeclaim.spec.node_class_ref, owner=f"nodeclaim {name!r}"
        )
        delay = self._registration_delay(nodeclass)
        launch = cheapest_launch(nodeclaim, self._types)
        if launch is None:
            msg = (
                f"nodeclaim {name!r}: no kwok instance type has an available offering that is"
                " compatible with its requirements and fits its requests"
            )
            raise InsufficientCapacityError(msg)
        if not name:
            msg = "nodeclaim has no metadata.name; kwok names its Node after it"
            raise ValueError(msg)
        launched = _stamped(
            launched_nodeclaim(nodeclaim, launch, provider_id=provider_id_of(name)), nodeclass
        )
        node = self._node(launched)
        if delay > 0:
            due = asyncio.get_running_loop().time() + delay
            self._pending[name] = _Pending(node, launched, due)
            self._launches.send(name)
        else:
            existing = await self._create_node(node)
            if existing is not None:
                # A retried create (the same NodeClaim UID): report the instance that was
                # launched the first time.
                launched = _as_launched(launched, existing)
        log.info(
            "launched kwok instance",
            extra={
                "nodeclaim": name,
                "provider_id": launched.status.provider_id,
                "instance_type": launch.instance_type.name,
                "zone": launch.offering.zone,
                "capacity_type": launch.offering.capacity_type,
            },
        )
        return launched

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the Node (or drop the pending launch); NodeClaimNotFoundError once it is gone.

        A NodeClaim without a providerID (deleted before its launch was recorded, or before it
        launched at all) is looked up by name: its Node, if the launch happened, carries its
        UID. A Node held by finalizers still exists, so deleting it again succeeds until it is
        gone.
        """
        provider_id = nodeclaim.status.provider_id
        if provider_id:
            name = self._node_name(provider_id)
        else:
            name = nodeclaim.metadata.name or ""
            node = await self._read_node(name) if name and name not in self._pending else None
            if name not in self._pending and (
                node is None or not _is_ours(node) or _launched_for(node) != nodeclaim.metadata.uid
            ):
                msg = f"nodeclaim {name!r} has no providerID and no kwok node of its own"
                raise NodeClaimNotFoundError(msg)
        if self._pending.pop(name, None) is not None:
            return
        try:
            await self._kube.delete(NODES, name)
        except NotFoundError as error:
            msg = f"nodeclaim {nodeclaim.metadata.name!r}: kwok node {name!r} not found"
            raise NodeClaimNotFoundError(msg) from error

    async def get(self, provider_id: str) -> NodeClaim:
        name = self._node_name(provider_id)
        pending = self._pending.get(name)
        if pending is not None:
            return pending.nodeclaim
        node = await self._read_node(name)
        if node is None:
            msg = f"kwok instance {provider_id!r} not found"
            raise NodeClaimNotFoundError(msg)
        if not _is_ours(node):
            msg = f"kwok instance {provider_id!r} not found (node {name!r} is not a kwok node)"
            raise NodeClaimNotFoundError(msg)
        return _nodeclaim_of(node)

    async def list(self) -> Sequence[NodeClaim]:
        found = {
            node.metadata.name: _nodeclaim_of(node)
            for node in await self._read_nodes()
            if _is_ours(node)
        }
        for name, pending in self._pending.items():
            found.setdefault(name, pending.nodeclaim)
        return tuple(found.values())

    async def _read_node(self, name: str) -> Node | None:
        """A kwok "instance" is its Node: read it from the operator's view, which informs Nodes,
        and from the apiserver only when built without one (tests)."""
        if self._view is not None and self._view.informs(NODES):
            return self._view.node(name)
        try:
            return await self._kube.get(NODES, name)
        except NotFoundError:
            return None

    async def _read_nodes(self) -> Sequence[Node]:
        """Every Node, from the view when there is one (see `_read_node`)."""
        if self._view is not None and self._view.informs(NODES):
            return self._view.nodes()
        return [item.obj for item in (await self._kube.list(NODES)).items]

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """The whole catalog, with out-of-capacity offerings marked, for a NodePool whose
        KWOKNodeClass exists and is Ready; NodeClassNotReadyError otherwise, so the provisioner
        plans nothing on that pool instead of creating NodeClaims that cannot launch."""
        await self._ready_nodeclass(
            nodepool.spec.template.spec.node_class_ref, owner=f"nodepool {nodepool.metadata.name!r}"
        )
        return self._types

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """NodeClassDrift when the KWOKNodeClass's spec changed since the NodeClaim was launched
        (its recorded hash, of the same hash version, differs); kwok instances have no image or
        network to drift from otherwise. None when the NodeClass is gone or not ours."""
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != (KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind):
            return None
        annotations = nodeclaim.metadata.annotations
        recorded = annotations.get(ANNOTATION_NODECLASS_HASH)
        if (
            not recorded
            or annotations.get(ANNOTATION_NODECLASS_HASH_VERSION) != NODECLASS_HASH_VERSION
        ):
            return None
        nodeclass = await self._nodeclass(ref.name)
        if nodeclass is None or static_hash(nodeclass.spec) == recorded:
            return None
        return NODECLASS_DRIFT

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        return REPAIR_POLICIES

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return (KWOK_NODE_CLASS,)

    def extension(self) -> ProviderExtension:
        """The KWOKNodeClass kind, and the pass that creates pending launches' Nodes (run at
        start, when a launch is recorded, and when the next one falls due)."""
        return ProviderExtension(
            kinds=(KWOK_NODECLASSES,),
            controllers=(
                Singleton(
                    name=LAUNCHES, reconcile=self.create_due_nodes, sources=(self._launches,)
                ),
                Singleton(name=GARBAGE_COLLECTION, reconcile=self.collect_leaked),
            ),
        )

    async def collect_leaked(self) -> Result:
        """Delete the kwok Nodes no NodeClaim owns that are older than LEAK_GRACE; come back
        after LEAK_PERIOD, or sooner when a Node seen here will be past its grace.

        Owned: a NodeClaim holds the Node's providerID, or a NodeClaim of the Node's name (a
        launch not recorded yet, whose retry claims it) has the UID the Node was launched for.
        NodeClaims are read (from cluster state) before the Nodes, so a Node launched between
        the two is younger than the grace. The view may lag the apiserver, so a Node about to
        be collected is checked once more against the NodeClaim of its name on the apiserver.
        Each collected Node is logged; the termination controller drains one that registered.
        """
        if self._view is None:
            return Result()  # built without cluster state (tests): no NodeClaims to judge by
        if not self._view.informers_synced:
            return Result(requeue_after=NOT_SYNCED_REQUEUE)
        claims = self._view.nodeclaims()
        held = {c.status.provider_id for c in claims if c.status.provider_id}
        named = {c.metadata.name: c.metadata.uid for c in claims if c.metadata.name}
        now = self._clock.now()
        again = LEAK_PERIOD
        for node in await self._read_nodes():
            name = node.metadata.name or ""
            if (
                not _is_ours(node)
                or node.metadata.deletion_timestamp is not None
                or node.spec.provider_id in held
                or _owns(named.get(name), node)
            ):
                continue
            created = node.metadata.creation_timestamp
            age = (now - created).total_seconds() if created is not None else 0.0
            if age < LEAK_GRACE:
                again = min(again, LEAK_GRACE - age + RETRY_SECONDS)
                continue
            if await self._owned_on_apiserver(node):
                continue
            self._pending.pop(name, None)
            try:
                await self._kube.delete(NODES, name)
            except NotFoundError:
                continue
            log.info(
                "garbage collected kwok instance",
                extra={
                    "node": name,
                    "provider_id": node.spec.provider_id,
                    "nodepool": node.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
                },
            )
        return Result(requeue_after=again)

    async def _owned_on_apiserver(self, node: Node) -> bool:
        """Whether the apiserver has a NodeClaim that owns `node` (see `collect_leaked`)."""
        try:
            claim = await self._kube.get(NODECLAIMS, node.metadata.name or "")
        except NotFoundError:
            return False
        return claim.status.provider_id == node.spec.provider_id or _owns(claim.metadata.uid, node)

    async def create_due_nodes(self) -> Result:
        """Create the Nodes of pending launches that have fallen due; ask to run again when the
        next one falls due.

        A failed creation is logged and retried after RETRY_SECONDS; a kwok Node that already
        exists counts as created; a launch deleted while its Node was being created has the Node
        deleted again. Failures are logged, never raised.
        """
        now = asyncio.get_running_loop().time()
        for name, pending in sorted(self._pending.items(), key=lambda kv: kv[1].due):
            if pending.due > now:
                break
            try:
                await self._create_node(pending.node)
            except CreateError as error:
                log.warning("failed creating kwok node", extra={"node": name, "error": str(error)})
                if self._pending.get(name) is pending:
                    del self._pending[name]
                continue
            except KubeError as error:
                log.warning(
                    "failed creating kwok node",
                    extra={"node": name, "error": str(error), "retry_after": RETRY_SECONDS},
                )
                if self._pending.get(name) is pending:
                    self._pending[name] = attrs.evolve(pending, due=now + RETRY_SECONDS)
                continue
            if self._pending.get(name) is pending:
                del self._pending[name]
            else:
                # Deleted while its Node was being created: the Node must not outlive it.
                await self._delete_orphan(name)
        if not self._pending:
            return Result()
        next_due = min(p.due for p in self._pending.values())
        return Result(requeue_after=max(next_due - asyncio.get_running_loop().time(), 0.0))

    # ------------------------------------------------------------------ helpers

    async def _delete_orphan(self, name: str) -> None:
        try:
            await self._kube.delete(NODES, name)
        except NotFoundError:
            return
        except KubeError as error:
            # list() still shows the Node, so garbage collection removes it later.
            log.warning("failed deleting kwok node", extra={"node": name, "error": str(error)})

    def _node_name(self, provider_id: str) -> str:
        name = node_name_of(provider_id)
        if name is None:
            msg = (
                f"providerID {provider_id!r} is not a kwok providerID ({PROVIDER_ID_PREFIX}<node>)"
            )
            raise NodeClaimNotFoundError(msg)
        return name

    def _registration_delay(self, nodeclass: KWOKNodeClass) -> float:
        """Seconds before the Node appears: the NodeClass's spec.nodeRegistrationDelay when it
        sets one, else the provider's registration-delay setting."""
        if nodeclass.spec.node_registration_delay is not None:
            return nodeclass.spec.registration_delay().total_seconds()
        return self._options.registration_delay

    async def _ready_nodeclass(self, ref: NodeClassReference, *, owner: str) -> KWOKNodeClass:
        """The Ready KWOKNodeClass `ref` names; NodeClassNotReadyError naming `owner` if not."""
        if (ref.group, ref.kind) != (KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind):
            msg = f"{owner}: nodeClassRef {ref.group}/{ref.kind} is not a {KWOK_NODE_CLASS.kind}"
            raise NodeClassNotReadyError(msg)
        nodeclass = await self._nodeclass(ref.name)
        if nodeclass is None:
            msg = f"{owner}: KWOKNodeClass {ref.name!r} not found"
            raise NodeClassNotReadyError(msg)
        ready = next((c for c in nodeclass.status.conditions if c.type == "Ready"), None)
        if ready is None or ready.status is not ConditionStatus.TRUE:
            msg = f"{owner}: KWOKNodeClass {ref.name!r} is not Ready"
            raise NodeClassNotReadyError(msg)
        return nodeclass

    async def _nodeclass(self, name: str) -> KWOKNodeClass | None:
        """The KWOKNodeClass from the view, or from the apiserver when the view does not hold
        it (yet); None when there is none."""
        nodeclass = (
            self._view.get(KWOK_NODECLASSES, name)
            if self._view is not None and self._view.informs(KWOK_NODECLASSES)
            else None
        )
        if nodeclass is not None:
            return nodeclass
        try:
            return await self._kube.get(KWOK_NODECLASSES, name)
        except NotFoundError:
            return None

    def _node(self, launched: NodeClaim) -> Node:
        name = launched.metadata.name or ""
        labels = {
            **launched.metadata.labels,
            wk.LABEL_HOSTNAME: name,
            wk.LABEL_KWOK_NODECLASS: launched.spec.node_class_ref.name,
        }
        taints = (
            *launched.spec.taints,
            *launched.spec.startup_taints,
            Taint(key=wk.TAINT_UNREGISTERED_KEY, effect=TaintEffect.NO_EXECUTE),
        )
        return Node(
            metadata=ObjectMeta(
                name=name,
                labels=labels,
                annotations={
                    wk.ANNOTATION_KWOK_NODE: wk.KWOK_NODE_VALUE,
                    **({ANNOTATION_NODECLAIM_UID: uid} if (uid := launched.metadata.uid) else {}),
                },
            ),
            spec=NodeSpec(provider_id=launched.status.provider_id, taints=taints),
            status=NodeStatus(
                capacity=launched.status.capacity,
                allocatable=launched.status.allocatable,
                node_info=NodeSystemInfo(
                    architecture=labels.get(wk.LABEL_ARCH, ""),
                    operating_system=labels.get(wk.LABEL_OS, ""),
                ),
            ),
        )

    async def _create_node(self, node: Node) -> Node | None:
        """Create the Node; when one of that name exists already, return it instead.

        Raises CreateError when the name is taken by a Node that is not a kwok instance.
        """
        try:
            await self._kube.create(NODES, node)
        except ConflictError:
            # The name is taken: read the Node that holds it from the apiserver, not the view,
            # which may not have seen it yet (a retried launch whose first create succeeded).
            name = node.metadata.name or ""
            existing = await self._kube.get(NODES, name)
            if not _is_ours(existing):
                msg = f"node {name!r} exists and is not a kwok instance"
                raise CreateError(
                    msg, condition_reason="NodeNameTaken", condition_message=msg
                ) from None
            mine, theirs = _launched_for(node), _launched_for(existing)
            if mine is not None and theirs is not None and mine != theirs:
                # Left by an earlier NodeClaim of the same name: garbage collection removes it.
                msg = f"node {name!r} is the kwok instance of another nodeclaim"
                raise CreateError(
                    msg, condition_reason="NodeNameTaken", condition_message=msg
                ) from None
            return existing
        return None


def _launched_for(node: Node) -> str | None:
    """The UID of the NodeClaim `node` was launched for (None on a Node from before karpy
    recorded it)."""
    return node.metadata.annotations.get(ANNOTATION_NODECLAIM_UID) or None


def _owns(uid: str | None, node: Node) -> bool:
    """Whether the NodeClaim with `uid`, of the Node's name, owns kwok `node`: it was launched
    for that UID (or recorded none)."""
    if uid is None:
        return False
    launched_for = _launched_for(node)
    return launched_for is None or launched_for == uid


def _is_ours(node: Node) -> bool:
    return (
        node.metadata.annotations.get(wk.ANNOTATION_KWOK_NODE) == wk.KWOK_NODE_VALUE
        and wk.LABEL_KWOK_NODECLASS in node.metadata.labels
        and node_name_of(node.spec.provider_id or "") == node.metadata.name
    )


def _stamped(launched: NodeClaim, nodeclass: KWOKNodeClass) -> NodeClaim:
    """`launched` annotated with the hash of the NodeClass spec it was launched with."""
    annotations = {
        **launched.metadata.annotations,
        ANNOTATION_NODECLASS_HASH: static_hash(nodeclass.spec),
        ANNOTATION_NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION,
    }
    return attrs.evolve(launched, metadata=attrs.evolve(launched.metadata, annotations=annotations))


def _as_launched(launched: NodeClaim, node: Node) -> NodeClaim:
    """`launched`, describing the already existing kwok `node` instead of a new choice."""
    labels = {**launched.metadata.labels, **node.metadata.labels}
    labels.pop(wk.LABEL_HOSTNAME, None)
    labels.pop(wk.LABEL_KWOK_NODECLASS, None)
    status = attrs.evolve(
        launched.status, capacity=node.status.capacity, allocatable=node.status.allocatable
    )
    metadata = attrs.evolve(launched.metadata, labels=labels)
    return attrs.evolve(launched, metadata=metadata, status=status)


def _nodeclaim_of(node: Node) -> NodeClaim:
    """The NodeClaim view of a kwok Node: its labels, providerID, capacity and NodeClass."""
    labels = node.metadata.labels
    return NodeClaim(
        metadata=ObjectMeta(
            name=node.metadata.name,
            labels=dict(labels),
            creation_timestamp=node.metadata.creation_timestamp,
            deletion_timestamp=node.metadata.deletion_timestamp,
        ),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=NodeClassReference(
                group=KWOK_NODE_CLASS.group,
                kind=KWOK_NODE_CLASS.kind,
                name=labels[wk.LABEL_KWOK_NODECLASS],
            ),
        ),
        status=NodeClaimStatus(
            node_name=node.metadata.name,
            provider_id=node.spec.provider_id,
            capacity=node.status.capacity,
            allocatable=node.status.allocatable,
        ),
    )
