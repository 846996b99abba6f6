"""karpy-clusterapi installs beside karpy as an outside team's provider would: karpy unchanged.

A fresh virtualenv gets karpy as the suite's environment has it (installed by scripts/bootstrap,
with its dependencies: linked, not rebuilt) and nothing of the Cluster API provider. Asked which
providers it has, it knows aws and kwok, and ``clusterapi`` is unknown; once
``pip install providers/clusterapi`` has built and installed ``karpy-clusterapi`` into it, the
provider is listed, ``karpy run --provider clusterapi --help`` runs, and so does the management
setup ``karpy demo --provider clusterapi`` starts (``python -m karpy_clusterapi_testbed``). pip's
build backend (setuptools) comes from its index.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.marks import TOOLS

pytestmark = [*TOOLS, pytest.mark.xdist_group("clusterapi")]

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "clusterapi"
"""What names the Cluster API provider's files in an environment (its distribution, its module,
their editable hooks): left out of the fresh environment, which must get it by installing."""


def _run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=cwd,
        env=environment,
    )


def _share_environment(site: Path, into: Path) -> None:
    """Give the environment at `site` every package of the suite's but the provider: links in
    `into` (named by a path file), and the suite's path files (karpy's editable hook)."""
    into.mkdir()
    paths = [str(into)]
    for source in (Path(p) for p in sys.path if p.endswith("site-packages")):
        for entry in source.iterdir():
            if PROVIDER in entry.name.lower():
                continue
            if entry.suffix == ".pth":
                paths.extend(
                    line for line in entry.read_text().splitlines() if PROVIDER not in line.lower()
                )
            elif not (into / entry.name).exists():
                (into / entry.name).symlink_to(entry)
    (site / "shared.pth").write_text("\n".join(paths) + "\n")


def test_the_provider_installs_beside_an_unchanged_karpy(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    _share_environment(Path(purelib.stdout.strip()), tmp_path / "shared")
    pip = (python, "-m", "pip", "--disable-pip-version-check", "-q")
    listing = "from karpy.cloudprovider.registry import available_providers as a; print(*a())"
    before = _run(python, "-c", listing, cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    assert before.stdout.split() == ["aws", "kwok"]
    load = "from karpy.cloudprovider.registry import load_factory; load_factory('clusterapi')"
    unknown = _run(python, "-c", load, cwd=tmp_path)
    assert unknown.returncode != 0
    assert "UnknownProviderError" in unknown.stderr
    assert "clusterapi" in unknown.stderr

    installed = _run(*pip, "install", "--no-deps", ROOT / "providers" / "clusterapi")
    assert installed.returncode == 0, installed.stderr[-3000:]
    after = _run(python, "-c", listing, cwd=tmp_path)
    assert after.stdout.split() == ["aws", "clusterapi", "kwok"]
    helped = _run(python, "-m", "karpy", "run", "--provider", "clusterapi", "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "--provider-setting" in helped.stdout
    where = _run(python, "-c", "import karpy_clusterapi; print(karpy_clusterapi.__file__)")
    assert where.stdout.startswith(str(venv)), where.stdout
    # The management setup `karpy demo --provider clusterapi` starts ships with it.
    setup = _run(python, "-m", "karpy_clusterapi_testbed", "--help", cwd=tmp_path)
    assert setup.returncode == 0, setup.stderr
    assert "--kubeconfig" in setup.stdout
