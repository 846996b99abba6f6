"""How long each disruption method takes to decide (Karpenter's
``karpenter_voluntary_disruption_decision_evaluation_duration_seconds``).

Karpenter times each method's evaluation, labelled by its reason and consolidation type. The
methods are pure and run in a worker thread inside one core pass, which has no clock; so the
controller hands the core each method wrapped in `timed`, which measures its `compute` on the
monotonic clock and records it. The wrapper is the method in every other respect (its name and
reason are the method's), so the core cannot tell them apart.
"""

from __future__ import annotations

import time
from typing import ClassVar

from opentelemetry.metrics import Histogram

from karpy.core.disruption.methods import Kind, Method, MethodInput, Outcome, Reason


def timed(method: Method, histogram: Histogram) -> Method:
    """`method`, each of whose evaluations is recorded in `histogram`."""
    labels = {
        "reason": method.reason.value.lower(),
        "consolidation_type": method.name.consolidation_type,
    }

    class Timed:
        name: ClassVar[Kind] = method.name
        reason: ClassVar[Reason] = method.reason

        def compute(self, given: MethodInput) -> Outcome:
            started = time.monotonic()
            try:
                return method.compute(given)
            finally:
                histogram.record(time.monotonic() - started, labels)

    return Timed()
