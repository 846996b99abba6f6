"""Marks that shape how the suite shares the machine when it runs on several workers.

scripts/check runs pytest on two workers (pytest-xdist, ``--dist loadgroup``), each with a local
cluster of its own. A few tests are heavy far beyond the rest, or measure time: they start a
whole control plane or several ``karpy`` processes of their own, or assert how long a leadership
handover takes against a lease's duration. Two of them at once on a two-core machine would starve
each other and both workers' clusters; so they share one xdist group and run one after another on
one worker, while the other worker runs the ordinary tests. Without xdist (``-n 0``) the mark does
nothing.
"""

from __future__ import annotations

import pytest

ONE_AT_A_TIME = pytest.mark.xdist_group("one-at-a-time")
"""Run on the same worker as every other test so marked, never beside one of them."""


TOOLS = (pytest.mark.tools, pytest.mark.timeout(1500))
"""Needs helm or Jaeger. ``scripts/check`` builds those beside pytest, at low priority, on a
fresh machine (the suite mostly waits on control planes, so a core is free); these tests run
last (tests/conftest.py) and may wait for the build, hence the longer timeout."""
