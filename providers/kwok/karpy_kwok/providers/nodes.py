"""A kwok instance is a Node: how a launched NodeClaim becomes its Node, and a Node its NodeClaim.

providerID. ``kwok://<node-name>``, the scheme Karpenter's kwok provider uses; the Node is named
after the NodeClaim, so a lookup needs no search and a retried create of the same NodeClaim hits
the existing Node instead of launching a second one. The Node also records the NodeClaim's UID
(annotation ``karpenter.kwok.sh/nodeclaim-uid``), as an EC2 launch carries a client token derived
from it: a create retried after a crash is recognised as the same launch, and a Node left by an
earlier NodeClaim of the same name is never taken for this one's.

Pure: no I/O, so the cloud provider, the launches pass and garbage collection agree on what is
"ours" by construction.
"""

from __future__ import annotations

from typing import Final

import attrs

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec, NodeStatus, NodeSystemInfo
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.providers.nodeclass import KWOK_NODE_CLASS

PROVIDER_ID_PREFIX: Final = "kwok://"
ANNOTATION_NODECLAIM_UID: Final = f"{kwoklabels.KWOK_GROUP}/nodeclaim-uid"
"""On a kwok Node: the UID of the NodeClaim it was launched for."""


def provider_id_of(node_name: str) -> str:
    return f"{PROVIDER_ID_PREFIX}{node_name}"


def node_name_of(provider_id: str) -> str | None:
    """The Node name a kwok providerID names, or None when it is not one of ours."""
    if not provider_id.startswith(PROVIDER_ID_PREFIX):
        return None
    name = provider_id.removeprefix(PROVIDER_ID_PREFIX)
    return name if name and "/" not in name else None


def launched_for(node: Node) -> str | None:
    """The UID of the NodeClaim `node` was launched for (None on a Node from before karpy
    recorded it)."""
    return node.metadata.annotations.get(ANNOTATION_NODECLAIM_UID) or None


def owns(uid: str | None, node: Node) -> bool:
    """Whether the NodeClaim with `uid`, of the Node's name, owns kwok `node`: it was launched
    for that UID (or recorded none)."""
    if uid is None:
        return False
    launched = launched_for(node)
    return launched is None or launched == uid


def is_ours(node: Node) -> bool:
    """Whether `node` is a kwok instance: annotated for kwok, labelled with its KWOKNodeClass and
    carrying the providerID of its own name."""
    return (
        node.metadata.annotations.get(wk.ANNOTATION_KWOK_NODE) == wk.KWOK_NODE_VALUE
        and kwoklabels.LABEL_KWOK_NODECLASS in node.metadata.labels
        and node_name_of(node.spec.provider_id or "") == node.metadata.name
    )


def node_of(launched: NodeClaim) -> Node:
    """The Node that is the instance of `launched`: its labels and taints, the unregistered
    taint, kwok's annotation and the NodeClaim's UID, its capacity and allocatable."""
    name = launched.metadata.name or ""
    labels = {
        **launched.metadata.labels,
        wk.LABEL_HOSTNAME: name,
        kwoklabels.LABEL_KWOK_NODECLASS: launched.spec.node_class_ref.name,
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


def as_launched(launched: NodeClaim, node: Node) -> NodeClaim:
    """`launched`, describing the already existing kwok `node` instead of a new choice."""
    labels = {**launched.metadata.labels, **node.metadata.labels}
    labels.pop(wk.LABEL_HOSTNAME, None)
    labels.pop(kwoklabels.LABEL_KWOK_NODECLASS, None)
    status = attrs.evolve(
        launched.status, capacity=node.status.capacity, allocatable=node.status.allocatable
    )
    metadata = attrs.evolve(launched.metadata, labels=labels)
    return attrs.evolve(launched, metadata=metadata, status=status)


def nodeclaim_of(node: Node) -> NodeClaim:
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
                name=labels[kwoklabels.LABEL_KWOK_NODECLASS],
            ),
        ),
        status=NodeClaimStatus(
            node_name=node.metadata.name,
            provider_id=node.spec.provider_id,
            capacity=node.status.capacity,
            allocatable=node.status.allocatable,
        ),
    )
