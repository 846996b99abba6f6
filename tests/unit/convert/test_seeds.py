"""Golden tests: `karpy convert` on every seed manifest, exactly as the articles printed them.

Each case fixes the command line (provider, cluster name, instance profile) and compares stdout,
the warnings and the exit code with files under tests/data/seeds/golden. Regenerate a golden
by deleting it and running with KARPY_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from karpy.convert.cli import main

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


def _run(files: list[str], flags: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(SEEDS)  # document names in messages are the relative file names
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*flags, *files])
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("case", sorted(CASES))
def test_convert_matches_golden(case: str) -> None:
    files, flags = CASES[case]
    code, out, err = _run(files, flags)
    actual = f"# exit {code}\n# stderr:\n" + "".join(f"# {line}\n" for line in err.splitlines())
    actual += out
    golden = GOLDEN / f"{case}.yaml"
    if not golden.exists() and os.environ.get("KARPY_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


def test_seed_002_names_the_invalid_key() -> None:
    code, _, err = _run(["002-provisioner.yaml"], ["--cluster-name", "x"])
    assert code == 1
    assert 'spec.requirements[3].key: Invalid value: " karpenter.sh/capacity-type"' in err


def test_seed_003_flat_yaml_is_refused_with_its_line() -> None:
    code, _, err = _run(["003-awsnodetemplate.yaml"], [])
    assert code == 1
    assert 'line 11: mapping key "karpenter.sh/discovery" already defined' in err


def test_unrelated_documents_pass_through_unchanged() -> None:
    code, out, _ = _run(["001-nginx.yaml", "001-provisioner.yaml"], ["--cluster-name", "c"])
    assert code == 0
    assert out.startswith("---\napiVersion: apps/v1\nkind: Deployment\n")
    assert "kind: NodePool" in out
