"""The Events the legacy translator records on the v1alpha5 objects it translates, one
constructor each."""

from __future__ import annotations

from typing import Any, Final

from karpy.apis.meta import HasMetadata
from karpy.kube.events import Event, warning
from karpy.kube.resources import ResourceKind

MESSAGE_LIMIT: Final = 1024
"""Characters of a translation message an event keeps."""


def translation_warnings(kind: ResourceKind[Any], obj: HasMetadata, warnings: str) -> Event:
    """`obj` translated, but some of its fields have no v1 equivalent (`warnings`)."""
    return _warning(kind, obj, "TranslationWarnings", warnings)


def translation_failed(kind: ResourceKind[Any], obj: HasMetadata, message: str) -> Event:
    """`obj` cannot be translated: `message` says why."""
    return _warning(kind, obj, "TranslationFailed", message)


def _warning(kind: ResourceKind[Any], obj: HasMetadata, reason: str, message: str) -> Event:
    return warning(kind, obj, reason, message[:MESSAGE_LIMIT])
