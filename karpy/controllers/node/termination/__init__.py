"""The Node termination controller: the karpenter.sh/termination finalizer on Nodes.

Register `TerminationController` with a Runner keyed by Node name (see its docstring).
"""

from karpy.controllers.node.termination.controller import TerminationController
from karpy.controllers.node.termination.eviction import EVICTION_BACKOFF, Evictor

__all__ = ["EVICTION_BACKOFF", "Evictor", "TerminationController"]
