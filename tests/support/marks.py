"""Marks that shape how the suite shares the machine when it runs on several workers.

scripts/check runs pytest on three workers (pytest-xdist, ``--dist loadgroup``), each with a
local cluster of its own. A few tests are heavy far beyond the rest, or measure time: they start
a whole control plane or several ``karpy`` processes of their own, or assert how long a
leadership handover takes against a lease's duration. Three of them at once on a two-core
machine starve each other and every worker's cluster. So each is in one of two chains, xdist
groups whose tests run one after another on one worker: at most two heavy tests run at once,
while the third worker runs the ordinary tests. The chains are balanced by their measured
durations (about eight minutes each on a quiet machine) and handed out first (tests/conftest.py),
since each is one worker's longest stretch. tests/unit/test_suite_groups.py proves the grouping
holds with the pytest and pytest-xdist the suite installs. Without xdist (``-n 0``) the marks do
nothing.
"""

from __future__ import annotations

import pytest

CHAIN_A = pytest.mark.xdist_group("heavy-a")
"""Run on the worker of the other tests so marked, one after another; never beside them."""

CHAIN_B = pytest.mark.xdist_group("heavy-b")
"""The second chain: beside chain A, never beside another of its own."""

CHAINS = frozenset({"heavy-a", "heavy-b"})


TOOLS = (pytest.mark.tools, pytest.mark.timeout(1500))
"""Needs helm or Jaeger. ``scripts/check`` builds those beside pytest, at low priority, on a
fresh machine (the suite mostly waits on control planes, so a core is free); these tests run
last (tests/conftest.py) and may wait for the build, hence the longer timeout."""
