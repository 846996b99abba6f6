"""Golden tests: `karpy convert` on every seed manifest, exactly as the articles printed them.

Each case fixes the command line (provider, cluster name, instance profile) and compares stdout,
the warnings and the exit code with files under tests/data/seeds/golden. Regenerate a golden
by deleting it and running with KARPY_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.convert.harness import check_golden, run_convert

SEEDS = Path(__file__).resolve().parents[2] / "data" / "seeds"
GOLDEN = SEEDS / "golden"

CASES = {
    "001-provisioner-aws": (["001-provisioner.yaml"], ["--cluster-name", "your-cluster-name"]),
    "001-provisioner-kwok": (["001-provisioner.yaml"], ["--provider", "kwok"]),
    "001-nginx": (["001-nginx.yaml"], []),
    "000-inflate": (["000-inflate.yaml"], []),
    "002-provisioner": (["002-provisioner.yaml"], ["--cluster-name", "eks-karpenter-demo"]),
    "003-awsnodetemplate": (["003-awsnodetemplate.yaml"], ["--cluster-name", "bys-dev-eks-main"]),
    "003-provisioner": (["003-provisioner.yaml"], ["--cluster-name", "bys-dev-eks-main"]),
    "004-provisioner-aws": (["004-provisioner.yaml"], ["--cluster-name", "demo"]),
    "004-provisioner-aws-profile": (
        ["004-provisioner.yaml"],
        ["--cluster-name", "demo", "--instance-profile", "KarpenterNodeInstanceProfile-demo"],
    ),
    "004-provisioner-kwok": (["004-provisioner.yaml"], ["--provider", "kwok"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_convert_matches_golden(case: str) -> None:
    files, flags = CASES[case]
    check_golden(GOLDEN / f"{case}.yaml", *run_convert(SEEDS, files, flags))


def test_seed_002_names_the_invalid_key() -> None:
    code, _, err = run_convert(SEEDS, ["002-provisioner.yaml"], ["--cluster-name", "x"])
    assert code == 1
    assert 'spec.requirements[3].key: Invalid value: " karpenter.sh/capacity-type"' in err


def test_seed_003_flat_yaml_is_refused_with_its_line() -> None:
    code, _, err = run_convert(SEEDS, ["003-awsnodetemplate.yaml"], [])
    assert code == 1
    assert 'line 11: mapping key "karpenter.sh/discovery" already defined' in err


def test_unrelated_documents_pass_through_unchanged() -> None:
    code, out, _ = run_convert(
        SEEDS, ["001-nginx.yaml", "001-provisioner.yaml"], ["--cluster-name", "c"]
    )
    assert code == 0
    assert out.startswith("---\napiVersion: apps/v1\nkind: Deployment\n")
    assert "kind: NodePool" in out
