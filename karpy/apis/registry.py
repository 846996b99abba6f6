"""Which model decodes which (apiVersion, kind), and every model class karpy defines.

The kube adapter receives untyped objects from watches; `model_for` picks the class to decode
them into, and tests walk `all_models()` to prove every class round-trips.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from karpy.apis.codec import DecodeError, from_dict
from karpy.apis.kube.coordination import Lease
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from karpy.apis.kube.workloads import DaemonSet, PodDisruptionBudget
from karpy.apis.v1.ec2nodeclass import EC2NodeClass
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.apis.v1alpha1.kwoknodeclass import KWOKNodeClass

# The kinds whose CRDs karpy ships (deploy/crds), in generation order.
CRD_KINDS: Final[tuple[type[Any], ...]] = (NodePool, NodeClaim, EC2NodeClass, KWOKNodeClass)

CORE_KINDS: Final[tuple[type[Any], ...]] = (
    Pod,
    Node,
    DaemonSet,
    PodDisruptionBudget,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CSINode,
    Lease,
)


def _api_version(cls: type[Any]) -> str:
    version: str = cls.API_VERSION if hasattr(cls, "API_VERSION") else f"{cls.GROUP}/{cls.VERSION}"
    return version


REGISTRY: Final[Mapping[tuple[str, str], type[Any]]] = {
    (_api_version(cls), cls.KIND): cls for cls in (*CRD_KINDS, *CORE_KINDS)
}


def model_for(api_version: str, kind: str) -> type[Any]:
    """The model class for an (apiVersion, kind); KeyError names the pair when unknown."""
    try:
        return REGISTRY[(api_version, kind)]
    except KeyError:
        msg = f"karpy has no model for apiVersion={api_version!r} kind={kind!r}"
        raise KeyError(msg) from None


def decode_object(data: Mapping[str, Any]) -> object:
    """Decode a dict by its own apiVersion and kind."""
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise DecodeError("object", ["apiVersion and kind must both be set to strings"])
    return from_dict(model_for(api_version, kind), data)


def all_models() -> Iterator[type[Any]]:
    """Every attrs class reachable from the registered kinds (each once)."""
    seen: set[type[Any]] = set()
    stack = list(REGISTRY.values())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        attrs.resolve_types(cls)
        yield cls
        for a in attrs.fields(cls):
            stack.extend(_attrs_classes_in(a.type))


def _attrs_classes_in(tp: Any) -> Iterator[type[Any]]:
    if isinstance(tp, type) and attrs.has(tp):
        yield tp
    for arg in getattr(tp, "__args__", ()):
        yield from _attrs_classes_in(arg)
