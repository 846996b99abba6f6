"""CustomResourceDefinition conversion: the older versions a CRD serves and how a
ConversionReview is answered.

A CRD stores one version (v1) and may serve older ones (v1beta1). The apiserver converts
between them by asking a webhook; karpy answers it here, purely: `review` takes the
ConversionReview the apiserver sent and returns the response, with each object converted by
the functions its CRD declares (`ServedVersion`). The HTTPS side lives in
karpy.runtime.webhook; the CRDs name their older versions in karpy.apis.crds.

An object that cannot be converted fails the whole review with a message naming the object
and the field, which the apiserver hands to the client as the reason its request failed:
nothing is stored half-converted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from karpy.apis.codec import DecodeError, from_dict, to_dict
from karpy.apis.v1alpha5.translate import TranslationError
from karpy.apis.v1beta1.convert import NodeClassDefaults

REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"

Convert = Callable[[Any, NodeClassDefaults], Any]


@attrs.frozen(kw_only=True)
class ServedVersion:
    """An older version a CRD serves beside its stored one: its model, and the two pure
    functions between it and the stored model (each may raise TranslationError)."""

    model: type[Any]
    to_storage: Convert
    from_storage: Convert


@attrs.frozen(kw_only=True)
class Convertible:
    """One kind's stored model and the older versions it serves."""

    storage: type[Any]
    served: tuple[ServedVersion, ...]

    def version(self, api_version: str) -> ServedVersion | None:
        """The older version named `api_version`, None for the stored one; KeyError when
        neither."""
        if api_version == f"{self.storage.GROUP}/{self.storage.VERSION}":
            return None
        for served in self.served:
            if api_version == f"{served.model.GROUP}/{served.model.VERSION}":
                return served
        msg = f"{self.storage.KIND} is not served as {api_version}"
        raise KeyError(msg)


Kinds = Mapping[tuple[str, str], Convertible]
"""(group, kind) -> how that kind converts."""


def _convert(
    obj: Mapping[str, Any], desired: str, kinds: Kinds, defaults: NodeClassDefaults
) -> dict[str, Any]:
    kind, source = obj.get("kind"), obj.get("apiVersion")
    group = source.partition("/")[0] if isinstance(source, str) else ""
    convertible = kinds.get((group, kind)) if isinstance(kind, str) else None
    if convertible is None or not isinstance(source, str):
        msg = f"karpy converts no {source} {kind}"
        raise KeyError(msg)
    if source == desired:
        return dict(obj)
    old, new = convertible.version(source), convertible.version(desired)
    stored = from_dict((old.model if old else convertible.storage), obj)
    if old is not None:
        stored = old.to_storage(stored, defaults)
    out = to_dict(new.from_storage(stored, defaults) if new is not None else stored)
    # The apiserver keeps metadata as it was (a webhook may change only labels and
    # annotations, which these conversions never do); hand it back untouched.
    out["metadata"] = obj.get("metadata", {})
    out["apiVersion"] = desired
    return out


def _label(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{obj.get('apiVersion')} {obj.get('kind')} {name or '<no name>'!r}"


def review(
    request: Mapping[str, Any],
    *,
    kinds: Kinds,
    defaults: NodeClassDefaults,
) -> dict[str, Any]:
    """The ConversionReview answering `request` (a decoded ConversionReview): every object
    converted to `request.desiredAPIVersion`, or a Failure naming the first object and field
    that could not be."""
    body = request.get("request")
    uid = body.get("uid", "") if isinstance(body, Mapping) else ""
    response: dict[str, Any] = {"uid": uid}
    try:
        if not isinstance(body, Mapping) or not isinstance(body.get("desiredAPIVersion"), str):
            raise ValueError("request.desiredAPIVersion: Required value")
        objects = body.get("objects") or []
        converted = []
        for obj in objects:
            try:
                converted.append(_convert(obj, body["desiredAPIVersion"], kinds, defaults))
            except (TranslationError, DecodeError) as error:
                problems = "; ".join(error.problems)
                raise ValueError(f"{_label(obj)}: {problems}") from None
            except KeyError as error:
                raise ValueError(f"{_label(obj)}: {error.args[0]}") from None
    except ValueError as error:
        response["result"] = {"status": "Failure", "message": str(error)}
    else:
        response["result"] = {"status": "Success"}
        response["convertedObjects"] = converted
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}
