"""The core kinds karpy informs on, with their REST coordinates and decoders.

Each `ResourceKind` binds a model from karpy.apis to the path it is listed and watched at, and
decodes through the shared codec, so an informer needs nothing but the kind.
"""

from __future__ import annotations

import functools
from typing import Final

from karpy.apis.codec import from_dict
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.kube.resources import ResourceKind

NODES: Final = ResourceKind[Node](
    kind="Node",
    plural="nodes",
    version="v1",
    namespaced=False,
    decode=functools.partial(from_dict, Node),
)
PODS: Final = ResourceKind[Pod](
    kind="Pod",
    plural="pods",
    version="v1",
    namespaced=True,
    decode=functools.partial(from_dict, Pod),
)
