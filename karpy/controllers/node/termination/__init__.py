"""The Node termination controller: the karpenter.sh/termination finalizer on Nodes.

`TerminationController` is keyed by Node name; its `spec()` says what wakes it.
"""

from karpy.controllers.node.termination.controller import TerminationController
from karpy.controllers.node.termination.eviction import EVICTION_BACKOFF, Evictor

__all__ = ["EVICTION_BACKOFF", "Evictor", "TerminationController"]
