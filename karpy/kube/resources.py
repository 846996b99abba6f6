"""What karpy needs to know about a resource kind to list, watch and decode it.

A `ResourceKind[T]` pairs the REST coordinates of a kind with the decoder that turns its JSON into
the typed model `T`, so the watch and client code stays generic and the models (karpy.apis) stay
free of transport concerns. `ObjectRef` is the identity of one object, read from its metadata here
so the layers above never touch raw metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from karpy.runtime.reconciler import KeyDescription

T = TypeVar("T")

Decoder = Callable[[Mapping[str, Any]], T]


@attrs.frozen
class ResourceKind(Generic[T]):
    """REST coordinates of one kind plus its decoder. `group` is "" for the core API."""

    kind: str
    plural: str
    version: str
    decode: Decoder[T] = attrs.field(eq=False, repr=False)
    group: str = ""
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """Path of the collection, cluster-wide when `namespace` is None."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        if self.namespaced and not namespace:
            msg = f"{self.kind} {name!r}: a namespace is required for a namespaced kind"
            raise ValueError(msg)
        return f"{self.collection_path(namespace if self.namespaced else None)}/{name}"


@attrs.frozen
class ObjectRef:
    """Identity of one object: kind, namespace ("" when cluster-scoped), name, uid and version."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str = attrs.field(eq=False)

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name): unique within a kind."""
        return (self.namespace, self.name)

    def describe(self) -> KeyDescription:
        """Span attributes and log fields naming this object (e.g. log field `pod: ns/name`)."""
        qualified = f"{self.namespace}/{self.name}" if self.namespace else self.name
        span = {
            "k8s.object.kind": self.kind,
            "k8s.object.name": self.name,
            "k8s.object.uid": self.uid,
        }
        if self.namespace:
            span["k8s.namespace.name"] = self.namespace
        return KeyDescription(span_attributes=span, log_fields={self.kind.lower(): qualified})


def ref_of(kind: ResourceKind[Any], raw: Mapping[str, Any]) -> ObjectRef:
    """Read an object's identity from its JSON; raises ValueError naming what is missing."""
    metadata = raw.get("metadata")
    if not isinstance(metadata, Mapping):
        msg = f"{kind.kind} object has no metadata"
        raise ValueError(msg)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        msg = f"{kind.kind} object has no metadata.name"
        raise ValueError(msg)
    namespace = metadata.get("namespace", "")
    return ObjectRef(
        kind=kind.kind,
        namespace=namespace if isinstance(namespace, str) else "",
        name=name,
        uid=str(metadata.get("uid", "")),
        resource_version=str(metadata.get("resourceVersion", "")),
    )


@attrs.frozen
class Item(Generic[T]):
    """One decoded object with its identity."""

    ref: ObjectRef
    obj: T


@attrs.frozen
class Listed(Generic[T]):
    """A complete, consistent list of a kind and the resourceVersion to watch from.

    In a watch stream it is the LISTED sentinel: everything before it is superseded, and the state
    should be replaced by `items`.
    """

    items: tuple[Item[T], ...]
    resource_version: str


class DecodeError(ValueError):
    """An object's JSON did not decode into its model; the message names the object."""

    def __init__(self, ref: ObjectRef, cause: Exception) -> None:
        where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
        super().__init__(f"cannot decode {ref.kind} {where}: {cause}")
        self.ref = ref


def decode_item(kind: ResourceKind[T], raw: Mapping[str, Any]) -> Item[T]:
    """Decode one object, or raise `DecodeError` (ValueError for a missing identity)."""
    ref = ref_of(kind, raw)
    try:
        obj = kind.decode(raw)
    except Exception as error:
        raise DecodeError(ref, error) from error
    return Item(ref=ref, obj=obj)
