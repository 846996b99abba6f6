"""Builds kube-apiserver, kube-controller-manager, kube-scheduler, kwok (and etcd when Debian's
is absent) from upstream Go modules, once, into a cache keyed by version.

``k8s.io/kubernetes`` cannot be ``go install``-ed: its go.mod points every staging module at
``v0.0.0`` plus a local path. So we write a tiny module of our own that requires it and pins
each staging module to its real version, then ``go build`` the upstream main packages from it.
kwok gets a module of its own, because its k8s.io requirements differ from the pins above and
a dependency's ``replace`` lines are ignored when it is built as a dependency.

A cold build takes minutes and gigabytes of Go build cache, so: build lazily, show progress,
write each binary atomically (an interrupted build never leaves a broken one) and never rebuild
what is there. A file lock keeps concurrent ``karpy`` processes from building the same thing.

Cluster API's core controller manager (``sigs.k8s.io/cluster-api/core``) is a group of its own,
built like the tools, for the Cluster API provider's tests and demo. Its module replaces
``sigs.k8s.io/cluster-api/api`` with a local path, so our module pins that one itself; the CRDs
and webhook configuration it is installed with are copied from the module beside the binary, so
running it needs no Go.

The tools the tests drive beside the cluster (helm, for the chart; Jaeger all-in-one, to receive
karpy's traces) have a lock each, so ``karpy cluster build`` compiles all three at once, filling
the cores while one waits on module downloads or links: on a fresh 2-core machine the
Kubernetes build is the longest, and Jaeger's and helm's finish inside it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import attrs

from karpy.localcluster.errors import BuildFailedError, GoToolchainError
from karpy.localcluster.versions import (
    CLUSTER_API_VERSION,
    HELM_VERSION,
    JAEGER_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    MINIMUM_GO,
    STAGING_MODULES,
    staging_version,
)

Progress = Callable[[str], None]

#: Seconds between progress lines while a build runs.
PROGRESS_INTERVAL = 15.0

KUBE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def print_progress(message: str) -> None:
    """Default progress sink: one line on stderr, flushed, so CI logs show it live."""
    sys.stderr.write(f"[karpy cluster] {message}\n")
    sys.stderr.flush()


@attrs.frozen
class Binaries:
    """Paths of every executable the local control plane runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path


@attrs.frozen
class Tools:
    """Paths of the programs tests run beside the control plane."""

    helm: Path
    jaeger: Path


@attrs.frozen
class ClusterAPI:
    """Cluster API's core controller manager and what it is installed with."""

    manager: Path
    crds: tuple[Path, ...]
    """Its CustomResourceDefinitions (core/config/crd/bases), one file each."""
    webhooks: Path
    """Its admission webhook configurations (core/config/webhook/manifests.yaml)."""
    version: str = CLUSTER_API_VERSION


#: Cluster API's go.mod asks for this Go.
CLUSTER_API_MINIMUM_GO = (1, 26)


def cache_root() -> Path:
    """Where built binaries live: $KARPY_CACHE_DIR, else $XDG_CACHE_HOME/karpy, else
    ~/.cache/karpy."""
    explicit = os.environ.get("KARPY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "karpy"


def ensure_binaries(
    *, cache_dir: Path | None = None, progress: Progress = print_progress
) -> Binaries:
    """Return the control plane's binaries, building whatever the cache lacks.

    Side effects: may run ``go build`` for minutes, writing into ``cache_dir`` and Go's own
    module and build caches. Raises :class:`GoToolchainError` or :class:`BuildFailedError`.
    """
    root = cache_dir or cache_root()
    kube_bin = root / "bin" / f"kubernetes-v{KUBERNETES_VERSION}"
    kwok_bin = root / "bin" / f"kwok-v{KWOK_VERSION}"
    wanted = [kube_bin / name for name in KUBE_COMPONENTS] + [kwok_bin / "kwok"]
    etcd = _system_etcd()
    if etcd is None:
        wanted.append(kube_bin / "etcd")
    if any(not _is_executable(path) for path in wanted):
        _check_go()
        with _lock(root / "locks" / "build.lock", progress=progress):
            kube_module = _kubernetes_module(root)
            kwok_module = _kwok_module(root)

            def kubernetes() -> None:
                # One `go build` for the three components: one action graph, their links in
                # parallel, instead of three builds one after another.
                _build_many(
                    component="kube-apiserver, kube-controller-manager and kube-scheduler",
                    targets={
                        f"k8s.io/kubernetes/cmd/{name}": kube_bin / name for name in KUBE_COMPONENTS
                    },
                    module=kube_module,
                    ldflags=_kube_ldflags(),
                    progress=progress,
                )
                if etcd is None:
                    progress("no etcd on PATH (Debian: apt-get install etcd-server); building it")
                    _build(
                        component="etcd",
                        package="go.etcd.io/etcd/server/v3",
                        module=kube_module,
                        output=kube_bin / "etcd",
                        ldflags="-s -w",
                        progress=progress,
                    )

            # kwok is a module of its own: it builds beside Kubernetes, filling the cores
            # while the other waits on downloads or a link.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="karpy-kwok") as pool:
                kwok = pool.submit(
                    _build,
                    component="kwok",
                    package="sigs.k8s.io/kwok/cmd/kwok",
                    module=kwok_module,
                    output=kwok_bin / "kwok",
                    ldflags=f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v{KWOK_VERSION}",
                    progress=progress,
                )
                kubernetes()
                kwok.result()
    return Binaries(
        etcd=etcd or kube_bin / "etcd",
        kube_apiserver=kube_bin / "kube-apiserver",
        kube_controller_manager=kube_bin / "kube-controller-manager",
        kube_scheduler=kube_bin / "kube-scheduler",
        kwok=kwok_bin / "kwok",
    )


def ensure_helm(*, cache_dir: Path | None = None, progress: Progress = print_progress) -> Path:
    """Return helm, building it when the cache lacks it (same side effects and errors as
    :func:`ensure_binaries`, under a lock of its own)."""
    root = cache_dir or cache_root()
    helm = _helm(root)
    if not _is_executable(helm):
        _check_go()
        with _lock(root / "locks" / "tools.lock", progress=progress):
            _build(
                component="helm",
                package="helm.sh/helm/v3/cmd/helm",
                module=_tool_module(root, "helm", "helm.sh/helm/v3", HELM_VERSION),
                output=helm,
                ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version=v{HELM_VERSION}",
                progress=progress,
            )
    return helm


def ensure_jaeger(*, cache_dir: Path | None = None, progress: Progress = print_progress) -> Path:
    """Return Jaeger's all-in-one binary (``github.com/jaegertracing/jaeger/cmd/jaeger``: an
    OpenTelemetry Collector with OTLP receivers, in-memory storage and the query API), building
    it when the cache lacks it, under a lock of its own (side effects and errors as
    :func:`ensure_binaries`)."""
    root = cache_dir or cache_root()
    jaeger = _jaeger(root)
    if not _is_executable(jaeger):
        _check_go()
        with _lock(root / "locks" / "jaeger.lock", progress=progress):
            version = "github.com/jaegertracing/jaeger/internal/version"
            _build(
                component="jaeger",
                package="github.com/jaegertracing/jaeger/cmd/jaeger",
                module=_tool_module(
                    root, "jaeger", "github.com/jaegertracing/jaeger", JAEGER_VERSION
                ),
                output=jaeger,
                ldflags=f"-s -w -X {version}.latestVersion=v{JAEGER_VERSION}",
                progress=progress,
            )
    return jaeger


def ensure_clusterapi(
    *, cache_dir: Path | None = None, progress: Progress = print_progress
) -> ClusterAPI:
    """Return Cluster API's core controller manager with its CRDs and webhook configuration,
    building it when the cache lacks it, under a lock of its own (side effects and errors as
    :func:`ensure_binaries`)."""
    root = cache_dir or cache_root()
    home = _clusterapi_home(root)
    manager = home / "manager"
    webhooks = home / "webhooks.yaml"
    if not _clusterapi_built(home):
        _check_go(CLUSTER_API_MINIMUM_GO, what=f"Cluster API {CLUSTER_API_VERSION}")
        with _lock(root / "locks" / "cluster-api.lock", progress=progress):
            module = _clusterapi_module(root)
            _build(
                component="cluster-api",
                package="sigs.k8s.io/cluster-api/core",
                module=module,
                output=manager,
                ldflags=" ".join(
                    [
                        "-s",
                        "-w",
                        f"-X sigs.k8s.io/cluster-api/version.gitVersion=v{CLUSTER_API_VERSION}",
                        "-X sigs.k8s.io/cluster-api/version.gitTreeState=clean",
                    ]
                ),
                progress=progress,
            )
            _copy_clusterapi_config(module, home)
    return ClusterAPI(
        manager=manager, crds=tuple(sorted((home / "crds").glob("*.yaml"))), webhooks=webhooks
    )


def tools_cached(*, cache_dir: Path | None = None) -> bool:
    """Whether helm, Jaeger and Cluster API's manager are all in the cache already (nothing to
    build): the suite hands their tests out early then, and last when they still build."""
    root = cache_dir or cache_root()
    return (
        _is_executable(_helm(root))
        and _is_executable(_jaeger(root))
        and _clusterapi_built(_clusterapi_home(root))
    )


def _helm(root: Path) -> Path:
    return root / "bin" / f"helm-v{HELM_VERSION}" / "helm"


def _jaeger(root: Path) -> Path:
    return root / "bin" / f"jaeger-v{JAEGER_VERSION}" / "jaeger"


def _clusterapi_home(root: Path) -> Path:
    return root / "bin" / f"cluster-api-v{CLUSTER_API_VERSION}"


def _clusterapi_built(home: Path) -> bool:
    return _is_executable(home / "manager") and (home / "webhooks.yaml").is_file()


def ensure_tools(*, cache_dir: Path | None = None, progress: Progress = print_progress) -> Tools:
    """Return helm and Jaeger, building whichever the cache lacks, both at once."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="karpy-tools") as pool:
        jaeger = pool.submit(ensure_jaeger, cache_dir=cache_dir, progress=progress)
        helm = ensure_helm(cache_dir=cache_dir, progress=progress)
        return Tools(helm=helm, jaeger=jaeger.result())


def ensure_all(
    *, cache_dir: Path | None = None, progress: Progress = print_progress
) -> tuple[Binaries, Tools]:
    """Build the control plane, helm and Jaeger at once, each in its own ``go build``: none
    waits for another to finish."""
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="karpy-build") as pool:
        helm = pool.submit(ensure_helm, cache_dir=cache_dir, progress=progress)
        jaeger = pool.submit(ensure_jaeger, cache_dir=cache_dir, progress=progress)
        binaries = ensure_binaries(cache_dir=cache_dir, progress=progress)
        return binaries, Tools(helm=helm.result(), jaeger=jaeger.result())


# --------------------------------------------------------------------------- modules


def _kubernetes_module(root: Path) -> Path:
    staging = staging_version()
    lines = [
        "module karpy.local/kubernetes",
        "",
        "go 1.24.0",
        "",
        f"require k8s.io/kubernetes v{KUBERNETES_VERSION}",
        "",
        *(f"replace k8s.io/{name} => k8s.io/{name} {staging}" for name in STAGING_MODULES),
        "",
    ]
    return _write_module(root / "build" / f"kubernetes-v{KUBERNETES_VERSION}", "\n".join(lines))


def _kwok_module(root: Path) -> Path:
    text = f"module karpy.local/kwok\n\ngo 1.24.0\n\nrequire sigs.k8s.io/kwok v{KWOK_VERSION}\n"
    return _write_module(root / "build" / f"kwok-v{KWOK_VERSION}", text)


def _clusterapi_module(root: Path) -> Path:
    version = f"v{CLUSTER_API_VERSION}"
    text = (
        "module karpy.local/cluster-api\n\ngo 1.26.0\n\n"
        f"require sigs.k8s.io/cluster-api {version}\n\n"
        f"replace sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api {version}\n"
    )
    return _write_module(root / "build" / f"cluster-api-{version}", text)


def _copy_clusterapi_config(module: Path, home: Path) -> None:
    """Copy the CRDs and webhook configuration out of the downloaded module (read-only files in
    Go's module cache) beside the binary, the webhook file last: its presence marks the copy
    whole."""
    found = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api"],
        cwd=module,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    source = Path(found.stdout.strip()) / "core" / "config"
    if found.returncode != 0 or not source.is_dir():
        raise BuildFailedError(
            "cluster-api", log=module / "manager.build.log", tail=found.stderr.strip()
        )
    crds = home / "crds"
    crds.mkdir(parents=True, exist_ok=True)
    for crd in sorted((source / "crd" / "bases").glob("*.yaml")):
        (crds / crd.name).write_bytes(crd.read_bytes())
    partial = home / f".webhooks.yaml.partial-{os.getpid()}"
    partial.write_bytes((source / "webhook" / "manifests.yaml").read_bytes())
    partial.replace(home / "webhooks.yaml")


def _tool_module(root: Path, name: str, module: str, version: str) -> Path:
    text = f"module karpy.local/{name}\n\ngo 1.24.0\n\nrequire {module} v{version}\n"
    return _write_module(root / "build" / f"{name}-v{version}", text)


def _write_module(directory: Path, go_mod: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "go.mod"
    # go.sum and go.mod gain entries during -mod=mod builds; only reset when the pins change.
    marker = directory / "go.mod.in"
    if not marker.exists() or marker.read_text() != go_mod:
        marker.write_text(go_mod)
        path.write_text(go_mod)
        (directory / "go.sum").unlink(missing_ok=True)
    return directory


def _kube_ldflags() -> str:
    version = f"v{KUBERNETES_VERSION}"
    return " ".join(
        [
            "-s",
            "-w",
            f"-X k8s.io/component-base/version.gitVersion={version}",
            "-X k8s.io/component-base/version.gitTreeState=clean",
            f"-X k8s.io/client-go/pkg/version.gitVersion={version}",
        ]
    )


# --------------------------------------------------------------------------- building


def _build(
    *, component: str, package: str, module: Path, output: Path, ldflags: str, progress: Progress
) -> None:
    _build_many(
        component=component,
        targets={package: output},
        module=module,
        ldflags=ldflags,
        progress=progress,
    )


def _build_many(
    *,
    component: str,
    targets: Mapping[str, Path],
    module: Path,
    ldflags: str,
    progress: Progress,
) -> None:
    """``go build`` the main packages of ``targets`` that the cache lacks, in one command, each
    into its output path (written whole or not at all)."""
    missing = {package: output for package, output in targets.items() if not _is_executable(output)}
    if not missing:
        return
    first = next(iter(missing.values()))
    for output in missing.values():
        output.parent.mkdir(parents=True, exist_ok=True)
    log = module / f"{first.name}.build.log"
    partial = first.with_name(f".{first.name}.partial-{os.getpid()}")
    if len(missing) > 1:
        partial.mkdir(parents=True, exist_ok=True)  # `-o DIR/` writes each binary into DIR
    command = [
        "go",
        "build",
        "-v",
        "-trimpath",
        "-ldflags",
        ldflags,
        "-o",
        f"{partial}/" if len(missing) > 1 else str(partial),
        *missing,
    ]
    env = {
        **os.environ,
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "GOWORK": "off",
        "CGO_ENABLED": "0",
    }
    progress(f"building {component} from Go modules (first build takes several minutes)")
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    compiled = downloaded = 0
    last_report = started
    with (
        log.open("w") as sink,
        subprocess.Popen(
            command,
            cwd=module,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as process,
    ):
        assert process.stdout is not None  # noqa: S101 - guaranteed by stdout=PIPE
        for line in process.stdout:
            sink.write(line)
            tail.append(line.rstrip())
            if line.startswith("go: downloading"):
                downloaded += 1
            elif not line.startswith(("go:", "#", " ", "\t")):
                compiled += 1
            now = time.monotonic()
            if now - last_report >= PROGRESS_INTERVAL:
                last_report = now
                progress(
                    f"building {component}: {compiled} packages compiled, {downloaded} modules "
                    f"downloaded, {now - started:.0f}s elapsed"
                )
        code = process.wait()
    if code != 0:
        if partial.is_dir():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.unlink(missing_ok=True)
        raise BuildFailedError(component, log=log, tail="\n".join(tail))
    if len(missing) == 1:
        partial.replace(first)
    else:
        for package, output in missing.items():
            (partial / package.rstrip("/").rsplit("/", 1)[-1]).replace(output)
        partial.rmdir()
    where = ", ".join(str(output) for output in missing.values())
    progress(f"built {component} in {time.monotonic() - started:.0f}s -> {where}")


def _check_go(minimum: tuple[int, int] = MINIMUM_GO, *, what: str = "") -> None:
    what = what or f"Kubernetes {KUBERNETES_VERSION}"
    go = shutil.which("go")
    if go is None:
        raise GoToolchainError(
            "the Go toolchain ('go') is not on PATH; the local control plane builds "
            f"kube-apiserver {KUBERNETES_VERSION} and kwok {KWOK_VERSION} from Go modules and "
            f"needs Go {MINIMUM_GO[0]}.{MINIMUM_GO[1]} or newer"
        )
    found = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, check=False, timeout=60
    ).stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)", found)
    if match is None or (int(match[1]), int(match[2])) < minimum:
        raise GoToolchainError(
            f"Go {minimum[0]}.{minimum[1]} or newer is needed to build {what}; "
            f"{go} reports {found or 'no version'}"
        )


def _system_etcd() -> Path | None:
    found = shutil.which("etcd")
    return Path(found) if found else None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@contextmanager
def _lock(path: Path, *, progress: Progress) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("another karpy process is building the control plane; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
