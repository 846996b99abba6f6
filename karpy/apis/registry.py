"""Which model decodes which (apiVersion, kind), and every model class karpy knows.

The kube adapter receives untyped objects from watches; `model_for` picks the class to decode
them into, and tests walk `all_models()` to prove every class round-trips.

karpy.apis holds only karpenter.sh and Kubernetes kinds. A provider's NodeClass model lives in
the provider's distribution, which declares its CRDs under the entry-point group ``karpy.apis``
(e.g. ``aws = "karpy_aws.apis.crds:CRDS"``, a tuple of `karpy.apis.crds.CRDInfo`); karpy never
imports a provider, so the provider kinds are found there, lazily, in entry-point name order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from importlib import metadata
from typing import Any, Final

import attrs

from karpy.apis.autoscaling.capacitybuffer import CapacityBuffer
from karpy.apis.codec import DecodeError, from_dict
from karpy.apis.kube.coordination import Lease
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from karpy.apis.kube.workloads import DaemonSet, PodDisruptionBudget
from karpy.apis.v1.labels import ProviderLabels
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.apis.v1alpha1.nodeoverlay import NodeOverlay
from karpy.apis.v1alpha5.machine import Machine
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.apis.v1beta1 import nodepool as v1beta1

API_ENTRY_POINT_GROUP: Final = "karpy.apis"

# karpy's own CRD kinds, first in generation order.
CORE_CRD_KINDS: Final[tuple[type[Any], ...]] = (
    NodePool,
    NodeClaim,
    Provisioner,
    Machine,
    NodeOverlay,
    CapacityBuffer,
)

# Older versions of karpy's CRD kinds, served beside v1 and converted (karpy.apis.conversion).
CORE_SERVED_KINDS: Final[tuple[type[Any], ...]] = (v1beta1.NodePool, v1beta1.NodeClaim)

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


@functools.cache
def provider_crds() -> tuple[Any, ...]:
    """The CRD declarations (`karpy.apis.crds.CRDInfo`) of every installed provider, in
    entry-point name order; imported on first use. Raises ImportError or AttributeError when
    an entry point cannot be loaded, TypeError when it is not a tuple of declarations."""
    found: list[Any] = []
    seen: set[tuple[str, str]] = set()
    for entry_point in sorted(
        metadata.entry_points(group=API_ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value)
    ):
        if (entry_point.name, entry_point.value) in seen:
            continue  # one distribution seen twice on sys.path (editable installs)
        seen.add((entry_point.name, entry_point.value))
        declared = entry_point.load()
        if not isinstance(declared, tuple) or not all(hasattr(d, "model") for d in declared):
            msg = (
                f"{API_ENTRY_POINT_GROUP} entry point {entry_point.value!r} is not CRD declarations"
            )
            raise TypeError(msg)
        found.extend(declared)
    return tuple(found)


def provider_node_class(provider: str) -> tuple[str, str]:
    """(group, kind) of the NodeClass `provider` declares first under the ``karpy.apis`` entry
    points: what a v1beta1 nodeClassRef without kind or apiVersion meant. LookupError names the
    installed providers when `provider` declares none."""
    found = {ep.name: ep for ep in metadata.entry_points(group=API_ENTRY_POINT_GROUP)}
    if provider not in found:
        msg = f"provider {provider!r} declares no API kinds (installed: {', '.join(sorted(found))})"
        raise LookupError(msg)
    declared = found[provider].load()
    model = declared[0].model
    return model.GROUP, model.KIND


def provider_labels() -> tuple[ProviderLabels, ...]:
    """The label names each installed provider declares with its CRDs (`CRDInfo.labels`), in
    entry-point name order."""
    return tuple(d.labels for d in provider_crds() if getattr(d, "labels", None) is not None)


def crd_kinds() -> tuple[type[Any], ...]:
    """The kinds whose CRDs karpy ships (deploy/crds), in generation order: karpy's own, then
    each provider's."""
    return (*CORE_CRD_KINDS, *(declared.model for declared in provider_crds()))


@functools.cache
def registry() -> Mapping[tuple[str, str], type[Any]]:
    """The model of every (apiVersion, kind) karpy decodes, providers' kinds included."""
    served = (
        *CORE_SERVED_KINDS,
        *(s.model for declared in provider_crds() for s in getattr(declared, "served", ())),
    )
    return {(_api_version(cls), cls.KIND): cls for cls in (*crd_kinds(), *served, *CORE_KINDS)}


def model_for(api_version: str, kind: str) -> type[Any]:
    """The model class for an (apiVersion, kind); KeyError names the pair when unknown."""
    try:
        return registry()[(api_version, kind)]
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
    stack = list(registry().values())
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
