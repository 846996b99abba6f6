"""Write helpers: encoding objects for create, merge-patch bodies, and finalizer edits.

Controllers change objects by patch, not update: a merge patch touches only the fields it names,
so two controllers writing different fields never clobber each other. Lists are the exception
(a merge patch replaces a list whole), so finalizer edits read the object, compute the new list
and write it under an optimistic lock on the version they read; a lost race surfaces as
ConflictError, which a reconciler answers with a silent requeue (house rule 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from karpy.apis.codec import to_dict
from karpy.kube.resources import ResourceKind, decode_item

if TYPE_CHECKING:
    from karpy.kube.client import KubeClient

T = TypeVar("T")

MERGE_PATCH: Final = "application/merge-patch+json"


def encode_object(kind: ResourceKind[Any], obj: object) -> dict[str, Any]:
    """`obj` (a karpy.apis model) as JSON for a create, with `apiVersion` and `kind` set.

    Raises ValueError when the model says it is of another kind, or has no metadata.name.
    """
    body = to_dict(obj)
    declared = body.get("kind")
    if declared not in (None, kind.kind):
        msg = f"cannot create a {declared} through the {kind.kind} endpoint"
        raise ValueError(msg)
    metadata = body.get("metadata") or {}
    if not metadata.get("name") and not metadata.get("generateName"):
        msg = f"{kind.kind}: metadata.name (or metadata.generateName) is required to create one"
        raise ValueError(msg)
    body["kind"] = kind.kind
    body["apiVersion"] = kind.api_version
    return body


def with_resource_version(patch: Mapping[str, Any], resource_version: str | None) -> dict[str, Any]:
    """A copy of a merge patch that, when `resource_version` is given, only applies at that
    version (the apiserver answers 409 Conflict otherwise)."""
    body = dict(patch)
    if resource_version is not None:
        if not resource_version:
            msg = "resource_version must be a non-empty version string or None"
            raise ValueError(msg)
        metadata = dict(body.get("metadata") or {})
        metadata["resourceVersion"] = resource_version
        body["metadata"] = metadata
    return body


async def add_finalizer(
    kube: KubeClient,
    kind: ResourceKind[T],
    name: str,
    finalizer: str,
    *,
    namespace: str | None = None,
) -> T:
    """Ensure `finalizer` is on the object; returns the object (unchanged if already there).

    Side effect: one GET, and one optimistic merge patch when the finalizer is missing.
    Raises NotFoundError if the object is gone, ConflictError if it changed in between (requeue).
    """
    return await _edit_finalizers(kube, kind, name, finalizer, add=True, namespace=namespace)


async def remove_finalizer(
    kube: KubeClient,
    kind: ResourceKind[T],
    name: str,
    finalizer: str,
    *,
    namespace: str | None = None,
) -> T:
    """Ensure `finalizer` is not on the object; returns the object as last seen.

    Removing the last finalizer of an object being deleted lets the apiserver delete it; the
    returned object then still shows the deletion timestamp. Raises NotFoundError if the object is
    gone, ConflictError if it changed between the read and the write.
    """
    return await _edit_finalizers(kube, kind, name, finalizer, add=False, namespace=namespace)


async def _edit_finalizers(
    kube: KubeClient,
    kind: ResourceKind[T],
    name: str,
    finalizer: str,
    *,
    add: bool,
    namespace: str | None,
) -> T:
    if not finalizer:
        msg = f"{kind.kind} {name!r}: the finalizer to edit must be a non-empty string"
        raise ValueError(msg)
    path = kind.object_path(name, namespace)
    raw = await kube.request("GET", path)
    metadata = raw.get("metadata") or {}
    current = [str(f) for f in metadata.get("finalizers") or []]
    if (finalizer in current) == add:
        return decode_item(kind, raw).obj
    wanted = [*current, finalizer] if add else [f for f in current if f != finalizer]
    patch = {"metadata": {"finalizers": wanted or None}}
    version = str(metadata.get("resourceVersion", "")) or None
    return await kube.merge_patch(kind, name, patch, namespace=namespace, resource_version=version)
