"""What a lifecycle sub-reconciler hands back to the controller.

Sub-reconcilers never write the NodeClaim themselves (house rule 4): they evolve a working copy and
say whether the parent should stop there, and with which Result. The parent then writes at most one
metadata patch and one status patch.
"""

from __future__ import annotations

import attrs

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.runtime.reconciler import Result


@attrs.frozen
class Outcome:
    """The working copy after one step; `stop` ends the chain with that Result.

    `deleted` says the step deleted the NodeClaim (a timeout, insufficient capacity): the parent
    writes nothing more, finalization takes over.
    """

    nodeclaim: NodeClaim
    stop: Result | None = None
    deleted: bool = False
