"""The secondary indexes cluster state keeps for the core kinds, and their names.

Reconciles look objects up by what the cloud or the scheduler knows them by: a NodeClaim's Node by
providerID (only the cloud knows which machine joined as which Node), a Node's pods by
spec.nodeName, a Node's NodeClaim by the status.nodeName registration recorded (the Node may be
gone from cluster state by the time its last pod leaves), a Node's VolumeAttachments by
spec.nodeName (termination waits for them), a NodePool's NodeClaims by their nodepool label (the
pool's status sums them on each of their events: a scan of every NodeClaim there grows with the
fleet times its churn). Each index is a function from an object
to the values it is found under.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import VolumeAttachment
from karpy.apis.v1.labels import LABEL_NODEPOOL
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.kinds import NODECLAIMS, NODES, PODS, VOLUME_ATTACHMENTS

BY_PROVIDER_ID: Final = "providerID"
BY_NODE_NAME: Final = "nodeName"
BY_NODEPOOL: Final = "nodepool"
"""NodeClaims by the NodePool that owns them (the karpenter.sh/nodepool label)."""
BY_LAUNCH: Final = "launch"
"""NodeClaims whose launch has not resolved a providerID, all under the value `LAUNCH_PENDING`."""
LAUNCH_PENDING: Final = "pending"


def _node_provider_id(node: Node) -> Iterable[str]:
    return (node.spec.provider_id,) if node.spec.provider_id else ()


def _nodeclaim_provider_id(claim: NodeClaim) -> Iterable[str]:
    return (claim.status.provider_id,) if claim.status.provider_id else ()


def _nodeclaim_node_name(claim: NodeClaim) -> Iterable[str]:
    return (claim.status.node_name,) if claim.status.node_name else ()


def _nodeclaim_pool(claim: NodeClaim) -> Iterable[str]:
    pool = claim.metadata.labels.get(LABEL_NODEPOOL)
    return (pool,) if pool else ()


def _nodeclaim_launch(claim: NodeClaim) -> Iterable[str]:
    return () if claim.status.provider_id else (LAUNCH_PENDING,)


def _pod_node_name(pod: Pod) -> Iterable[str]:
    return (pod.spec.node_name,) if pod.spec.node_name else ()


def _attachment_node_name(attachment: VolumeAttachment) -> Iterable[str]:
    return (attachment.spec.node_name,) if attachment.spec.node_name else ()


DEFAULT_INDEXES: Final[Mapping[str, Mapping[str, Any]]] = {
    NODES.kind: {BY_PROVIDER_ID: _node_provider_id},
    NODECLAIMS.kind: {
        BY_PROVIDER_ID: _nodeclaim_provider_id,
        BY_NODE_NAME: _nodeclaim_node_name,
        BY_NODEPOOL: _nodeclaim_pool,
        BY_LAUNCH: _nodeclaim_launch,
    },
    PODS.kind: {BY_NODE_NAME: _pod_node_name},
    VOLUME_ATTACHMENTS.kind: {BY_NODE_NAME: _attachment_node_name},
}
"""Indexes by kind name; `ClusterState.register` keeps these unless told otherwise."""
