"""The chart in deploy/charts/karpy, rendered by a real helm (built from Go modules and cached,
karpy.localcluster.build.ensure_helm) — the same templates and values.schema.json a user installs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from karpy.localcluster import KUBERNETES_VERSION, ensure_helm

CHART = Path(__file__).resolve().parents[2] / "deploy" / "charts" / "karpy"

#: The least a user must give: a cluster name (the aws provider reads its region from instance
#: metadata when none is set, as Karpenter does).
REQUIRED: Mapping[str, str] = {"settings.clusterName": "demo"}


@attrs.frozen
class HelmResult:
    code: int
    stdout: str
    stderr: str


def helm_binary() -> Path:
    return ensure_helm()


def helm(*args: str, timeout: float = 120) -> HelmResult:
    """Run helm with `args`; never raises for a non-zero exit (tests read the error)."""
    done = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    return HelmResult(done.returncode, done.stdout, done.stderr)


def set_flags(values: Mapping[str, object]) -> list[str]:
    """`--set` flags for dotted keys (strings go through --set-string, so "1s" stays a string)."""
    flags: list[str] = []
    for key, value in values.items():
        if isinstance(value, str):
            escaped = value.replace(",", "\\,")  # helm splits --set values on commas
            flags += ["--set-string", f"{key}={escaped}"]
        else:
            flags += ["--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return flags


def template(
    values: Mapping[str, object] = REQUIRED,
    *,
    release: str = "karpy",
    namespace: str = "karpy",
    extra: Sequence[str] = (),
) -> HelmResult:
    return helm(
        "template",
        release,
        str(CHART),
        "--namespace",
        namespace,
        # The local cluster's version (helm template alone assumes an old default).
        "--kube-version",
        KUBERNETES_VERSION,
        *set_flags(values),
        *extra,
    )


def render(
    values: Mapping[str, object] = REQUIRED, *, release: str = "karpy", namespace: str = "karpy"
) -> list[dict[str, Any]]:
    """The chart's manifests for `values`; fails the test with helm's message if it refuses."""
    result = template(values, release=release, namespace=namespace)
    assert result.code == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def only(documents: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in documents if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return dict(found[0])
