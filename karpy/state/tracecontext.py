"""A NodeClaim's origin in the traces: the span that asked for it, kept on the object.

The provisioner (for a batch) and the disruption queue (for a command) write their span's W3C
``traceparent`` into the annotation ``karpy.sh/traceparent`` of each NodeClaim they create. The
lifecycle controller reads it back — in this process or in one started after a restart, since
it lives on the API server — to put the launch (and its provider call) into that trace and to
link the registration and initialization spans to it.
"""

from __future__ import annotations

import attrs
from opentelemetry.trace import Span

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.runtime.telemetry import traceparent


def with_origin(nodeclaim: NodeClaim, span: Span) -> NodeClaim:
    """`nodeclaim` annotated with `span`'s traceparent (unchanged when `span` is not recorded,
    as with no exporter configured)."""
    value = traceparent(span)
    if value is None:
        return nodeclaim
    annotations = {**nodeclaim.metadata.annotations, wk.ANNOTATION_TRACEPARENT: value}
    return attrs.evolve(
        nodeclaim, metadata=attrs.evolve(nodeclaim.metadata, annotations=annotations)
    )


def origin(nodeclaim: NodeClaim) -> str | None:
    """The traceparent of the span that created `nodeclaim`, if it carries one."""
    return nodeclaim.metadata.annotations.get(wk.ANNOTATION_TRACEPARENT)
