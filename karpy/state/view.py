"""ClusterView: the one read path every controller, core or provider, reads the cluster through.

Controllers never list from the apiserver in a reconcile: the informers already hold every object
karpy needs, current to the last watch event. A view is read-only (it has no way to change a
store) and cheap to hand out. A read may be a few milliseconds stale; writes stay optimistic, so a
stale read costs one 409 Conflict and a requeue, as in controller-runtime.

`synced` is Karpenter's `Synced()`: every informer has listed *and* every NodeClaim has resolved
its providerID. A NodeClaim still launching is capacity whose shape nobody knows yet; the
provisioner deciding before its launch resolves would count it as nothing and launch again (after
a restart mid scale-out, for every pod the unlaunched NodeClaims were made for). A launch that
fails for good does not hold sync forever: the lifecycle controller deletes a NodeClaim that
lacks capacity or a ready NodeClass at once, and any other NodeClaim not Launched within five
minutes, as Karpenter does. `informers_synced` is the weaker gate, for loops that only need a
full picture of what exists (the readiness probe, podevents, garbage collection).

Lookups by name and by the secondary indexes of `karpy.state.indexes` are O(1); `objects(kind)`
copies one store. A kind this process does not inform raises KeyError naming it, so a controller
wired without its inputs fails loudly instead of seeing an empty cluster.
"""

from __future__ import annotations

from typing import Any, TypeVar

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import VolumeAttachment
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS, VOLUME_ATTACHMENTS
from karpy.kube.resources import ResourceKind
from karpy.state.cluster import ClusterState
from karpy.state.indexes import (
    BY_LAUNCH,
    BY_NODE_NAME,
    BY_NODEPOOL,
    BY_PROVIDER_ID,
    LAUNCH_PENDING,
)
from karpy.state.pods import is_provisionable, is_terminal

T = TypeVar("T")


class ClusterView:
    """Read-only access to `ClusterState`: by name, by providerID, pods by node, any kind."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    @property
    def synced(self) -> bool:
        """Karpenter's `Synced()`: every informed kind has been listed and no NodeClaim is
        waiting for its launch to resolve a providerID."""
        return self._state.synced and not self.launching()

    @property
    def informers_synced(self) -> bool:
        """True once every informed kind has been listed (launches may still be resolving)."""
        return self._state.synced

    async def wait_synced(self) -> None:
        """Wait until every informed kind has been listed (`informers_synced`)."""
        await self._state.wait_synced()

    def launching(self) -> list[NodeClaim]:
        """NodeClaims whose providerID is not resolved yet (created, launch not recorded)."""
        if not self._state.has(NODECLAIMS):
            return []
        store = self._state.store(NODECLAIMS)
        try:
            return store.by_index(BY_LAUNCH, LAUNCH_PENDING)
        except KeyError:  # a store registered with custom indexes
            return [c for c in store.objects() if not c.status.provider_id]

    def nominated(self, node_name: str, now: float) -> bool:
        """Whether a provisioning pass nominated pending pods onto `node_name` (a Node's name,
        or an in-flight NodeClaim's while it has none) within the nomination window before
        `now` (UTC epoch seconds), and one of those pods is still pending or bound there; or
        the nomination is held past its window (no pass since it was made: the provisioner is
        waiting on cluster state) and one of its pods is still pending. Either way it also
        holds while any pod the same pass nominated elsewhere is pending: kube-scheduler binds
        where it likes, so a pod of this node's may have taken another's place (see
        `karpy.state.nominations`)."""
        nominations = self._state.nominations
        nomination = nominations.get(node_name, now=now)
        if nomination is None:
            return False
        pods = self._state.store(PODS)

        def live(namespace: str, name: str) -> Pod | None:
            pod = pods.get(name, namespace=namespace)
            if pod is None or pod.metadata.deletion_timestamp is not None or is_terminal(pod):
                return None
            return pod

        for namespace, name in nomination.pods:
            pod = live(namespace, name)
            if pod is None:
                continue
            if not pod.spec.node_name:
                return True  # still pending: held past the window until a pass looks again
            if pod.spec.node_name == node_name and not nomination.held:
                return True
        for namespace, name in nominations.pods_of_pass(nomination.made_by) - nomination.pods:
            pod = live(namespace, name)
            if pod is not None and not pod.spec.node_name:
                return True
        return False

    def nominations_known(self) -> bool:
        """Whether the nominations are this process's to trust: a provisioning pass has run
        since it started, or no pod is waiting for one (`is_provisionable`). A restarted
        process knows no nominations until its first pass rebuilds them."""
        if self._state.nominations.passes > 0 or not self._state.has(PODS):
            return True
        return not any(is_provisionable(p) for p in self._state.store(PODS).objects())

    @property
    def generation(self) -> tuple[int, int]:
        """What cluster state and the nominations are at: equal generations, same reads
        (karpy.state.generation), until a nomination lapses (`next_nomination_lapse`)."""
        return self._state.generation, self._state.nominations.version

    def next_nomination_lapse(self, now: float) -> float | None:
        """When the next nomination's window ends after `now` (UTC epoch seconds), if any."""
        return self._state.nominations.next_lapse(now)

    def informs(self, kind: ResourceKind[Any]) -> bool:
        """Whether this process keeps `kind` in cluster state."""
        return self._state.has(kind)

    # ---------------------------------------------------------------- any kind

    def get(self, kind: ResourceKind[T], name: str, *, namespace: str = "") -> T | None:
        """One object of `kind` by name, or None when cluster state does not hold it."""
        return self._state.store(kind).get(name, namespace=namespace)

    def objects(self, kind: ResourceKind[T]) -> list[T]:
        """Every object of `kind` (a new list; the objects are frozen)."""
        return self._state.store(kind).objects()

    # ---------------------------------------------------------------- core kinds

    def node(self, name: str) -> Node | None:
        return self._state.store(NODES).get(name)

    def nodes(self) -> list[Node]:
        return self._state.store(NODES).objects()

    def nodes_with_provider_id(self, provider_id: str) -> list[Node]:
        """Every Node whose spec.providerID is `provider_id` (normally none or one)."""
        return self._state.store(NODES).by_index(BY_PROVIDER_ID, provider_id)

    def nodeclaim(self, name: str) -> NodeClaim | None:
        return self._state.store(NODECLAIMS).get(name)

    def nodeclaims(self) -> list[NodeClaim]:
        return self._state.store(NODECLAIMS).objects()

    def nodeclaims_with_provider_id(self, provider_id: str) -> list[NodeClaim]:
        """Every NodeClaim whose status.providerID is `provider_id` (normally none or one)."""
        return self._state.store(NODECLAIMS).by_index(BY_PROVIDER_ID, provider_id)

    def nodeclaims_on(self, node_name: str) -> list[NodeClaim]:
        """Every NodeClaim registered as the Node `node_name` (status.nodeName; normally one)."""
        return self._state.store(NODECLAIMS).by_index(BY_NODE_NAME, node_name)

    def nodeclaims_of(self, nodepool: str) -> list[NodeClaim]:
        """Every NodeClaim of the NodePool `nodepool` (its karpenter.sh/nodepool label)."""
        return self._state.store(NODECLAIMS).by_index(BY_NODEPOOL, nodepool)

    def nodepool(self, name: str) -> NodePool | None:
        return self._state.store(NODEPOOLS).get(name)

    def nodepools(self) -> list[NodePool]:
        return self._state.store(NODEPOOLS).objects()

    def pods(self) -> list[Pod]:
        return self._state.store(PODS).objects()

    def pods_on(self, node_name: str) -> list[Pod]:
        """Every Pod bound to the Node `node_name` (spec.nodeName), terminal ones included."""
        return self._state.store(PODS).by_index(BY_NODE_NAME, node_name)

    def volume_attachments_on(self, node_name: str) -> list[VolumeAttachment]:
        """Every VolumeAttachment of the Node `node_name` (spec.nodeName), deleting ones
        included (a volume is attached until its VolumeAttachment is gone)."""
        return self._state.store(VOLUME_ATTACHMENTS).by_index(BY_NODE_NAME, node_name)
