"""Write helpers: encoding objects for create, and the merge-patch bodies karpy sends.

Controllers change objects by patch, not update: a merge patch touches only the fields it names,
so two controllers writing different fields never clobber each other. Lists are the exception
(a merge patch replaces a list whole), so a finalizer edit computes the new list from the object
as read and is written under an optimistic lock on the version read; a lost race (a stale read)
surfaces as ConflictError, which a reconciler answers with a silent requeue (house rule 4).
Every body is built here, and controllers never write one by hand: they evolve the object they
read and hand before and after to `KubeClient.patch`, which sends the merge patch between the
two (`object_patch`, as controller-runtime's `client.MergeFrom`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from karpy.apis.codec import to_dict
from karpy.apis.kube.common import Taint
from karpy.apis.meta import ObjectMeta
from karpy.kube.resources import ResourceKind

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


def finalizer_patch(metadata: ObjectMeta, finalizer: str, *, present: bool) -> dict[str, Any]:
    """The `metadata` fragment of a merge patch that adds (`present=True`) or removes `finalizer`
    from the list in `metadata`; empty when the list already is as wanted.

    The list is replaced whole (an emptied list is sent as null), so the patch must only apply at
    the version `metadata` was read at: send it with `metadata.resourceVersion`.
    """
    if not finalizer:
        msg = f"{metadata.name!r}: the finalizer to edit must be a non-empty string"
        raise ValueError(msg)
    current = list(metadata.finalizers)
    if (finalizer in current) == present:
        return {}
    wanted = [*current, finalizer] if present else [f for f in current if f != finalizer]
    return {"finalizers": wanted or None}


def taint_patch(taints: Sequence[Taint], taint: Taint, *, present: bool) -> dict[str, Any]:
    """The `spec` fragment of a Node merge patch that adds (`present=True`) or removes `taint`
    (matched by key and effect) from `taints`; empty when the list already is as wanted.

    Like a finalizer edit, the list is replaced whole: send it at the version `taints` was read at.
    """
    has = any(t.key == taint.key and t.effect == taint.effect for t in taints)
    if has == present:
        return {}
    kept = [t for t in taints if (t.key, t.effect) != (taint.key, taint.effect)]
    wanted = [*kept, taint] if present else kept
    return {"spec": {"taints": [to_dict(t) for t in wanted] or None}}


def status_patch(old: object | None, new: object) -> dict[str, Any]:
    """A status merge patch turning status `old` into `new` (karpy.apis models).

    Without `old`, fields `new` leaves unset are left as they are on the server. With it, the
    fields `old` had and `new` leaves empty are sent as null, so stale values are removed.
    """
    body: dict[str, Any] = to_dict(new)
    if old is not None:
        for key in to_dict(old):
            body.setdefault(key, None)
    return {"status": body}


def merge_patch(before: Any, after: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns JSON value `before` into `after`.

    Keys `after` lacks are sent as null (removed), maps are diffed key by key at every depth,
    and everything else that differs is sent whole (lists included: a merge patch replaces a
    list). Values compare as JSON does (`1`, `1.0` and `true` differ). An empty map means "no
    change" only at the top; `apply_merge_patch(before, patch)` gives `after` back whenever
    `after` holds no null inside a map (which RFC 7386 cannot express).
    """
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
        return after
    body: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        body[key] = None
    for key, value in after.items():
        if key not in before:
            body[key] = value
        elif isinstance(value, Mapping) and isinstance(before[key], Mapping):
            inner = merge_patch(before[key], value)
            if inner:
                body[key] = inner
        elif not _same_json(before[key], value):
            body[key] = value
    return body


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """`target` with the JSON merge patch `patch` applied, as the apiserver applies it (RFC 7386
    section 2): a map patches a map key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def object_patch(before: object, after: object) -> dict[str, Any]:
    """The merge patch that turns the object `before` (a karpy.apis model, as read) into
    `after` (the same object evolved), in wire form; empty when they encode alike.

    The codec omits empty maps, and RFC 7386 reads a missing map as one to remove whole. That
    is never what an evolved object means for an object's sections (`spec` and `status` hold
    fields karpy does not model) nor for its labels and annotations (maps several writers
    share, edited key by key): when `after` empties one of those, the patch names each removed
    key (set to null), so it removes exactly what `after` removed and nothing else.
    """
    old, new = to_dict(before), to_dict(after)
    for section in _SECTIONS:
        if old.get(section) and section not in new:
            new[section] = {}
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    for shared in _SHARED_MAPS:
        if old_meta.get(shared) and shared not in new_meta:
            new["metadata"] = new_meta = {**new_meta, shared: {}}
    body = merge_patch(old, new)
    return body if isinstance(body, dict) else {}


_SECTIONS: Final = ("metadata", "spec", "status")
_SHARED_MAPS: Final = ("labels", "annotations")


def _same_json(a: Any, b: Any) -> bool:
    return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        b, option=orjson.OPT_SORT_KEYS
    )
