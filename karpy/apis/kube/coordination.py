"""Lease (coordination.k8s.io/v1): leader election for the karpy daemon.

Only one karpy replica may act at a time; the Lease records the holder and when it last
renewed, with microsecond times (MicroTime) as the apiserver stores them.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from karpy.apis.meta import ObjectMeta


@attrs.frozen(kw_only=True)
class LeaseSpec:
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    lease_transitions: int | None = None


@attrs.frozen(kw_only=True)
class Lease:
    KIND: ClassVar[str] = "Lease"
    API_VERSION: ClassVar[str] = "coordination.k8s.io/v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: LeaseSpec = attrs.field(factory=LeaseSpec)
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"
