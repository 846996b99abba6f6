"""benchmarks/perf_suite.py at a tenth of Karpenter's size, so the harness cannot rot.

The suite's basic scenario (100 pods of Karpenter's two sizes, then 70 with consolidation) and one
point of its many-NodePools sweep (10 NodePools, 2 pods each: out, in, out) run on the session's
cluster exactly as the benchmark runs them (its own `karpy run` process, sampled through /proc;
the audit log read by karpy's User-Agent). No figure is held to a time: the test asserts that
every phase completes, that the table has a row per measure and that each figure is one a cluster
could produce (utilisation within (0, 1], memory and CPU positive and finite).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from karpy.localcluster import ClusterInfo

# No figure is held to a time, so it runs beside other tests, outside the chains of heavy tests.
pytestmark = [pytest.mark.timeout(600)]

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _suite() -> ModuleType:
    """benchmarks/perf_suite.py (benchmarks/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("perf_suite", BENCHMARKS / "perf_suite.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("perf_suite", module)
    spec.loader.exec_module(module)
    return module


async def test_the_perf_suite_runs_basic_and_a_nodepool_sweep_point(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    suite = _suite()
    # consolidateAfter 0s and a 15 s quiet window: the phases end whether or not a consolidation
    # pass removed a node (that is the benchmark's to measure, not this test's).
    options = suite.Options(quiet=15.0, consolidate_after="0s")
    known = suite.scenarios(0.1, pool_counts=(10,))
    results = []
    for name in ("basic", "pools-10"):
        results += await suite.run_scenario(
            cluster_info,
            known[name],
            namespace=namespace,
            options=options,
            log=tmp_path / f"karpy-{name}.log",
        )
        await suite.clear(cluster_info, namespace)

    phases = [(m.scenario, m.phase) for m in results]
    assert phases == [
        ("basic", "scale-out"),
        ("basic", "consolidation"),
        ("pools-10", "scale-out"),
        ("pools-10", "scale-in"),
        ("pools-10", "scale-out again"),
    ]
    expected_pods = {
        ("basic", "scale-out"): 100,
        ("basic", "consolidation"): 70,
        ("pools-10", "scale-out"): 20,
        ("pools-10", "scale-in"): 10,
        ("pools-10", "scale-out again"): 20,
    }
    for m in results:
        assert m.completed, m
        assert m.pods == expected_pods[m.scenario, m.phase], m
        assert 0 <= m.seconds < math.inf, m
        assert 0 < m.cpu_util <= 1, m
        assert 0 < m.memory_util <= 1, m
        assert m.nodes > 0, m
        assert 20 < m.rss_p95_mb < 4096, m
        assert 0 <= m.cores < 4, m
        assert m.requests_per_s >= 0, m
    # The pools scenario's NodePools each made at least one node of their own.
    assert all(m.nodes >= 10 for m in results if m.scenario == "pools-10"), results
    # karpy asked the apiserver for something while it scaled out.
    assert all(m.requests_per_s > 0 for m in results if m.phase == "scale-out"), results

    rows = suite.rows(results)
    table = suite.table(rows).splitlines()
    assert table[0] == "| scenario | measure | Karpenter | karpy | ratio |"
    assert len(table) == 2 + len(rows) == 2 + 7 * len(results)
    assert all(line.startswith("| ") and line.count(" | ") == 4 for line in table[2:]), table
    basic_time = next(r for r in rows if r.scenario == "basic scale-out")
    assert (basic_time.measure, basic_time.threshold) == ("time to healthy", "< 120 s")
    assert float(basic_time.ratio) == pytest.approx(results[0].seconds / 120, abs=0.01)
