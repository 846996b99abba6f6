"""The local cluster fails with errors that name their cause, and never half-starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from karpy.localcluster import (
    BuildFailedError,
    GoToolchainError,
    LocalCluster,
    LocalClusterError,
    PortInUseError,
    ensure_binaries,
)
from karpy.localcluster import build as build_module
from karpy.localcluster.cli import main as cluster_cli
from karpy.localcluster.versions import staging_version


def quiet(_: str) -> None:
    """A progress sink for tests."""


def test_missing_go_toolchain_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no go, no etcd
    with pytest.raises(GoToolchainError, match=r"'go'\) is not on PATH"):
        ensure_binaries(cache_dir=tmp_path / "cache", progress=quiet)


def test_too_old_go_toolchain_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_go = tmp_path / "go"
    fake_go.write_text("#!/bin/sh\necho go1.19.2\n")
    fake_go.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GoToolchainError, match=r"reports go1\.19\.2"):
        ensure_binaries(cache_dir=tmp_path / "cache", progress=quiet)


def test_failed_build_raises_with_the_tail_of_its_output(tmp_path: Path) -> None:
    module = tmp_path / "module"
    module.mkdir()
    (module / "go.mod").write_text("module karpy.local/broken\n\ngo 1.24.0\n")
    (module / "main.go").write_text("package main\n\nfunc main() { undefined_call() }\n")
    with pytest.raises(BuildFailedError) as raised:
        build_module._build(
            component="broken",
            package=".",
            module=module,
            output=tmp_path / "bin" / "broken",
            ldflags="-s -w",
            progress=quiet,
        )
    assert "building broken from Go modules failed" in str(raised.value)
    assert "undefined: undefined_call" in str(raised.value)
    assert not (tmp_path / "bin" / "broken").exists()
    assert raised.value.log.exists()


def test_port_clash_is_reported_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = LocalCluster("clash", state_dir=tmp_path / "state", progress=quiet)
        with pytest.raises(PortInUseError, match=f"127.0.0.1:{port} for kube-apiserver"):
            cluster.up(apiserver_port=port)
    assert cluster.info() is None
    assert cluster.status() == []


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("a/b", id="slash"),
        pytest.param("x y", id="space"),
    ],
)
def test_bad_cluster_names_are_refused(name: str) -> None:
    with pytest.raises(LocalClusterError, match="cluster name"):
        LocalCluster(name)


def test_damaged_state_file_is_named(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.json").write_text("{not json")
    with pytest.raises(LocalClusterError, match="cannot read the cluster state file"):
        LocalCluster("damaged", state_dir=state, progress=quiet).info()


def test_cli_reports_errors_as_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KARPY_STATE_DIR", str(tmp_path))
    assert cluster_cli(["--name", "absent", "env"]) == 1
    assert "cluster 'absent' is not up" in capsys.readouterr().err
    assert cluster_cli(["--name", "absent", "status"]) == 1
    assert "not running" in capsys.readouterr().out
    assert cluster_cli(["--name", "absent", "down"]) == 0


def test_staging_version_follows_the_kubernetes_release() -> None:
    assert staging_version("1.33.13") == "v0.33.13"
    with pytest.raises(ValueError, match="unsupported Kubernetes major"):
        staging_version("2.0.0")


FAKE_GO = """#!/bin/sh
# Stands in for 'go': 'go env GOVERSION' answers, and 'go build -o OUT PKG...' writes OUT, or
# one binary per package into OUT when it ends in '/'. The first build of kube-apiserver, helm
# and jaeger each waits until all three have started: were they built one after another, the
# first would wait in vain and fail.
if [ "$1" = env ]; then echo go1.26.0; exit 0; fi
out=""; prev=""; packages=""
for arg in "$@"; do
    if [ -n "$out" ]; then packages="$packages $arg"; fi
    if [ "$prev" = "-o" ]; then out="$arg"; fi
    prev="$arg"
done
name=$(basename "$out")
case "$name" in
    .kube-apiserver.*|.helm.*|.jaeger.*)
        touch "$BARRIER/${name%%.partial-*}"
        tries=0
        while [ "$(ls -A "$BARRIER" | wc -l)" -lt 3 ]; do
            tries=$((tries + 1))
            if [ "$tries" -gt 600 ]; then echo "built alone: the others never started"; exit 1; fi
            sleep 0.1
        done;;
esac
case "$out" in
    */) for package in $packages; do
            printf '#!/bin/sh\\n' > "$out$(basename "$package")"
            chmod +x "$out$(basename "$package")"
        done;;
    *) printf '#!/bin/sh\\n' > "$out"
       chmod +x "$out";;
esac
"""


def test_the_control_plane_helm_and_jaeger_build_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(FAKE_GO)
    (bin_dir / "go").chmod(0o755)
    barrier = tmp_path / "started"
    barrier.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("BARRIER", str(barrier))
    binaries, tools = build_module.ensure_all(cache_dir=tmp_path / "cache", progress=quiet)
    assert sorted(p.name for p in barrier.iterdir()) == [".helm", ".jaeger", ".kube-apiserver"]
    for path in (
        binaries.kube_apiserver,
        binaries.kube_controller_manager,
        binaries.kube_scheduler,
        binaries.kwok,
        tools.helm,
        tools.jaeger,
    ):
        assert path.is_file()
    assert tools.jaeger.parent.name == "jaeger-v1.76.0"
