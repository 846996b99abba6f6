"""The pure scheduler: ``solve(snapshot, pods, options) -> Results``.

Pure like the rest of ``karpy.core``: no I/O, clock, logging or unseeded randomness, so that a
plan can be reproduced from its inputs alone.
"""

from karpy.core.scheduling.options import Packing, SchedulerOptions
from karpy.core.scheduling.results import Explanation, NodeClaimPlan, Nomination, Results
from karpy.core.scheduling.scheduler import solve

__all__ = [
    "Explanation",
    "NodeClaimPlan",
    "Nomination",
    "Packing",
    "Results",
    "SchedulerOptions",
    "solve",
]
