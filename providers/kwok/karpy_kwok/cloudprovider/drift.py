"""Why a kwok instance no longer matches its KWOKNodeClass.

kwok instances have no image or network to drift from: only the NodeClass spec, whose hash a
launch records on the NodeClaim (``karpy_kwok.providers.nodeclass.stamped``).
"""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.protocol import DriftReason
from karpy_kwok.apis.kwoknodeclass import (
    ANNOTATION_NODECLASS_HASH,
    ANNOTATION_NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION,
    static_hash,
)
from karpy_kwok.providers.nodeclass import NodeClasses, is_kwok

NODECLASS_DRIFT: Final = DriftReason("NodeClassDrift")


async def drift_reason(nodeclaim: NodeClaim, nodeclasses: NodeClasses) -> DriftReason | None:
    """NodeClassDrift when the KWOKNodeClass's spec changed since the NodeClaim was launched
    (its recorded hash, of the same hash version, differs). None when the NodeClass is gone or
    not ours."""
    ref = nodeclaim.spec.node_class_ref
    if not is_kwok(ref):
        return None
    annotations = nodeclaim.metadata.annotations
    recorded = annotations.get(ANNOTATION_NODECLASS_HASH)
    if not recorded or annotations.get(ANNOTATION_NODECLASS_HASH_VERSION) != NODECLASS_HASH_VERSION:
        return None
    nodeclass = await nodeclasses.get(ref.name)
    if nodeclass is None or static_hash(nodeclass.spec) == recorded:
        return None
    return NODECLASS_DRIFT
