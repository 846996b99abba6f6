"""ConfigMap (core/v1): karpy reads one, Karpenter v0.x's karpenter-global-settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from karpy.apis.meta import ObjectMeta


@attrs.frozen(kw_only=True)
class ConfigMap:
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "ConfigMap"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    data: Mapping[str, str] = attrs.field(factory=dict)
    api_version: str = "v1"
    kind: str = "ConfigMap"
