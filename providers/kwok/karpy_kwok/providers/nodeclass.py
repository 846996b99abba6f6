"""The KWOKNodeClass a launch or a drift check names, read from the operator's cluster view.

The provider owns the KWOKNodeClass kind and declares it, so the operator informs it; with the
operator's view a read comes from there, and from the apiserver only when the view does not hold
it yet (or when built without a view, in tests).
"""

from __future__ import annotations

from typing import Final

import attrs

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider import NodeClassNotReadyError
from karpy.cloudprovider.protocol import NodeClassKind
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.state.view import ClusterView
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import (
    ANNOTATION_NODECLASS_HASH,
    ANNOTATION_NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION,
    KWOKNodeClass,
    static_hash,
)

KWOK_NODE_CLASS: Final = NodeClassKind(group=kwoklabels.KWOK_GROUP, kind=KWOKNodeClass.KIND)


def is_kwok(ref: NodeClassReference) -> bool:
    """Whether `ref` names a KWOKNodeClass (by group and kind; any name)."""
    return (ref.group, ref.kind) == (KWOK_NODE_CLASS.group, KWOK_NODE_CLASS.kind)


class NodeClasses:
    """KWOKNodeClasses by name, from the view when it informs them, else from the apiserver."""

    def __init__(self, kube: KubeClient, view: ClusterView | None) -> None:
        self._kube = kube
        self._view = view

    async def get(self, name: str) -> KWOKNodeClass | None:
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

    async def ready(self, ref: NodeClassReference, *, owner: str) -> KWOKNodeClass:
        """The Ready KWOKNodeClass `ref` names; NodeClassNotReadyError naming `owner` if not."""
        if not is_kwok(ref):
            msg = f"{owner}: nodeClassRef {ref.group}/{ref.kind} is not a {KWOK_NODE_CLASS.kind}"
            raise NodeClassNotReadyError(msg)
        nodeclass = await self.get(ref.name)
        if nodeclass is None:
            msg = f"{owner}: KWOKNodeClass {ref.name!r} not found"
            raise NodeClassNotReadyError(msg)
        ready = next((c for c in nodeclass.status.conditions if c.type == "Ready"), None)
        if ready is None or ready.status is not ConditionStatus.TRUE:
            msg = f"{owner}: KWOKNodeClass {ref.name!r} is not Ready"
            raise NodeClassNotReadyError(msg)
        return nodeclass


def stamped(launched: NodeClaim, nodeclass: KWOKNodeClass) -> NodeClaim:
    """`launched` annotated with the hash of the NodeClass spec it was launched with."""
    annotations = {
        **launched.metadata.annotations,
        ANNOTATION_NODECLASS_HASH: static_hash(nodeclass.spec),
        ANNOTATION_NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION,
    }
    return attrs.evolve(launched, metadata=attrs.evolve(launched.metadata, annotations=annotations))
