"""karpenter.sh's own taints as values, for the controllers that put them on and take them off.

`karpenter.sh/disrupted:NoSchedule` marks a Node that is leaving: the disruption queue puts it on
a candidate before its replacement launches, termination puts it on every Node it drains, and
the scheduling simulation keeps pods off it either way.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.v1 import labels as wk

DISRUPTED_TAINT: Final = Taint(key=wk.TAINT_DISRUPTED_KEY, effect=TaintEffect.NO_SCHEDULE)
