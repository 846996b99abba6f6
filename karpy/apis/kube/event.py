"""core/v1 Events, as `karpy explain node` reads them back: what the running controller last
reported about a Node or NodeClaim (`Unconsolidatable`, `DisruptionBlocked`).

karpy writes Events through `karpy.kube.events.Recorder`; this is the read side, only the fields
a reader needs to say what was reported, about what, and when.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from karpy.apis.meta import ObjectMeta


@attrs.frozen(kw_only=True)
class ObjectReference:
    """The object an Event is about."""

    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    api_version: str | None = None


@attrs.frozen(kw_only=True)
class Event:
    KIND: ClassVar[str] = "Event"
    API_VERSION: ClassVar[str] = "v1"

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    involved_object: ObjectReference = attrs.field(factory=ObjectReference)
    reason: str | None = None
    message: str | None = None
    type: str | None = None
    count: int | None = None
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    event_time: datetime | None = None
    api_version: str = "v1"
    kind: str = "Event"

    @property
    def time(self) -> datetime | None:
        """When it was last reported: lastTimestamp, else eventTime, else creation."""
        return self.last_timestamp or self.event_time or self.metadata.creation_timestamp
