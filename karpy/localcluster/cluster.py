"""LocalCluster: bring a real control plane up on 127.0.0.1, report on it, take it down.

Everything a cluster owns lives in one state directory (``$KARPY_STATE_DIR/<name>``, by default
``~/.local/state/karpy/<name>``): the state file with pids and ports, credentials, kubeconfigs
and component logs. etcd's data lives on tmpfs when /dev/shm is writable. ``up`` is idempotent,
``down`` stops every process ``up`` started and removes all of it, and a failed ``up`` undoes its
own partial work before raising, so nothing is left half-started.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs
import cattrs

from karpy.localcluster import audit, process
from karpy.localcluster.build import Binaries, Progress, ensure_binaries, print_progress
from karpy.localcluster.credentials import (
    mint_identities,
    write_kubeconfig,
    write_service_account_keys,
    write_token_file,
)
from karpy.localcluster.errors import ComponentFailedError, LocalClusterError, PortInUseError
from karpy.localcluster.kwokstages import write_kwok_config
from karpy.localcluster.versions import KUBERNETES_VERSION, KWOK_VERSION

#: Start order; ``down`` stops in reverse.
COMPONENTS: Final = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)

#: kwok manages only Nodes carrying this annotation, which karpy's kwok provider sets.
KWOK_NODE_SELECTOR: Final = "kwok.x-k8s.io/node=fake"

_STATE_VERSION: Final = 1

KWOK_NODE_LEASE_SECONDS: Final = 40
"""kwok holds a Lease in kube-node-lease for every Node it manages, renewed a quarter of this
apart, as a kubelet does. Without a lease kwok only heartbeats the Node's status, about every two
minutes and sometimes first ~53 s after the Node appears: past kube-controller-manager's
node-monitor grace period (50 s), so every simulated node went NotReady now and then
(NodeNotReady events, its pods not Ready), which a real node never does."""


@attrs.frozen
class Component:
    """One control-plane process as the state file records it."""

    name: str
    command: tuple[str, ...]
    port: int
    health_url: str
    log: str
    pid: int = 0
    start_ticks: int = 0

    @property
    def handle(self) -> process.Handle:
        return process.Handle(pid=self.pid, start_ticks=self.start_ticks)


@attrs.frozen
class ClusterInfo:
    """How to reach a running local cluster."""

    name: str
    server: str
    kubeconfig: Path
    karpy_kubeconfig: Path
    token: str
    karpy_token: str
    ca_file: Path
    state_dir: Path
    kubernetes_version: str = KUBERNETES_VERSION
    kwok_version: str = KWOK_VERSION

    @property
    def audit_log(self) -> Path:
        """The apiserver's audit log of karpy's requests (`karpy.localcluster.audit`)."""
        return self.state_dir / "logs" / "audit.log"


@attrs.frozen
class ComponentStatus:
    """What ``karpy cluster status`` reports per component."""

    name: str
    running: bool
    pid: int
    port: int
    rss_bytes: int | None
    log: Path


@attrs.frozen
class _State:
    version: int
    name: str
    detached: bool
    etcd_data: str
    info: ClusterInfo
    components: tuple[Component, ...]


_converter = cattrs.Converter()
_converter.register_unstructure_hook(Path, str)
_converter.register_structure_hook(Path, lambda value, _: Path(value))


def state_root() -> Path:
    """$KARPY_STATE_DIR, else $XDG_STATE_HOME/karpy, else ~/.local/state/karpy."""
    explicit = os.environ.get("KARPY_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "karpy"


class LocalCluster:
    """A named local control plane. Cheap to construct; every method reads the state file."""

    def __init__(
        self,
        name: str = "karpy",
        *,
        state_dir: Path | None = None,
        cache_dir: Path | None = None,
        progress: Progress = print_progress,
        detach: bool = True,
        apiserver_flags: Sequence[str] = (),
    ) -> None:
        """`apiserver_flags`: more kube-apiserver flags, for trials that need the apiserver
        configured otherwise (`--watch-cache=false`, so that compacting etcd expires a watch's
        resourceVersion)."""
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise LocalClusterError(
                f"cluster name {name!r} is invalid: use letters, digits, '-' and '_'"
            )
        self.name = name
        self.state_dir = state_dir or state_root() / name
        self._cache_dir = cache_dir
        self._progress = progress
        self._detach = detach
        self._apiserver_flags = tuple(apiserver_flags)

    # ------------------------------------------------------------------ public API

    def up(self, *, apiserver_port: int = 0, timeout: float = 120.0) -> ClusterInfo:
        """Start the control plane, or return the running one. Builds binaries on first use.

        ``apiserver_port=0`` picks a free port. Raises :class:`PortInUseError` when a chosen
        port is taken and :class:`ComponentFailedError` when a component does not come up; in
        both cases everything this call started has been stopped again.
        """
        state = self._load()
        if state is not None:
            if self._healthy(state):
                self._progress(f"cluster {self.name!r} is already running at {state.info.server}")
                return state.info
            self._progress(f"cluster {self.name!r} was left half-running; restarting it")
            self._teardown(state)
        if apiserver_port and not process.port_is_free(apiserver_port):
            raise PortInUseError("kube-apiserver", apiserver_port)
        binaries = ensure_binaries(cache_dir=self._cache_dir, progress=self._progress)
        started = time.monotonic()
        state = self._prepare(binaries, apiserver_port=apiserver_port)
        self._save(state)
        try:
            for name in COMPONENTS:
                state = self._start(state, name, timeout=timeout)
                self._save(state)
            self._wait_default_service_account(state, timeout=timeout)
        except BaseException:
            self._teardown(state)
            raise
        self._progress(
            f"cluster {self.name!r} is up at {state.info.server} in "
            f"{time.monotonic() - started:.1f}s; kubeconfig: {state.info.kubeconfig}"
        )
        return state.info

    def down(self) -> bool:
        """Stop every process of this cluster and remove its state. False if none was there."""
        state = self._load()
        if state is None:
            if self.state_dir.exists():
                shutil.rmtree(self.state_dir, ignore_errors=True)
            return False
        self._teardown(state)
        self._progress(f"cluster {self.name!r} is down")
        return True

    def info(self) -> ClusterInfo | None:
        """Connection details of the recorded cluster, or None when there is none."""
        state = self._load()
        return state.info if state is not None else None

    def status(self) -> list[ComponentStatus]:
        """Per-component liveness, port and memory. Empty when the cluster is not up."""
        state = self._load()
        if state is None:
            return []
        return [
            ComponentStatus(
                name=c.name,
                running=process.is_alive(c.handle),
                pid=c.pid,
                port=c.port,
                rss_bytes=process.rss_bytes(c.handle),
                log=Path(c.log),
            )
            for c in state.components
        ]

    def stop_component(self, name: str) -> None:
        """Stop one component (tests use it to take the apiserver away from clients)."""
        state = self._require()
        component = self._component(state, name)
        process.stop(component.handle)

    def start_component(self, name: str, *, timeout: float = 120.0) -> None:
        """Start a stopped component again with its recorded command line and port.

        With ``detach=False`` call this from the main thread (see ``process.spawn``).
        """
        state = self._require()
        component = self._component(state, name)
        if process.is_alive(component.handle):
            return
        self._save(self._start(state, name, timeout=timeout))

    # ------------------------------------------------------------------ preparation

    def _prepare(self, binaries: Binaries, *, apiserver_port: int) -> _State:
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir)
        self.state_dir.mkdir(parents=True, mode=0o700)
        shm = Path("/dev/shm")  # noqa: S108 - tmpfs for etcd data; mkdtemp gives a private dir
        data_parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.state_dir
        etcd_data = Path(tempfile.mkdtemp(prefix=f"karpy-{self.name}-etcd-", dir=data_parent))
        certs = self.state_dir / "certs"
        certs.mkdir()
        logs = self.state_dir / "logs"
        logs.mkdir()
        admin, karpy = mint_identities()
        write_token_file(self.state_dir / "tokens.csv", (admin, karpy))
        sa_key, sa_pub = write_service_account_keys(self.state_dir)

        etcd_client, etcd_peer = process.free_port(), process.free_port()
        api = apiserver_port or process.free_port()
        cm, scheduler, kwok = process.free_port(), process.free_port(), process.free_port()
        server = f"https://127.0.0.1:{api}"
        ca_file = certs / "apiserver.crt"
        kubeconfig = self.state_dir / "admin.kubeconfig"
        karpy_kubeconfig = self.state_dir / "karpy.kubeconfig"
        for path, who in ((kubeconfig, admin), (karpy_kubeconfig, karpy)):
            write_kubeconfig(path, cluster=self.name, server=server, ca_file=ca_file, identity=who)
        info = ClusterInfo(
            name=self.name,
            server=server,
            kubeconfig=kubeconfig,
            karpy_kubeconfig=karpy_kubeconfig,
            token=admin.token,
            karpy_token=karpy.token,
            ca_file=ca_file,
            state_dir=self.state_dir,
        )
        etcd_url = f"http://127.0.0.1:{etcd_client}"
        peer_url = f"http://127.0.0.1:{etcd_peer}"
        serving = ("--bind-address=127.0.0.1", f"--cert-dir={certs}")
        delegated = (
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            # Token authentication only: there is no client CA for them to look up.
            "--authentication-skip-lookup=true",
            "--leader-elect=false",
        )

        def component(name: str, port: int, health: str, command: Sequence[str]) -> Component:
            return Component(
                name=name,
                command=tuple(command),
                port=port,
                health_url=health,
                log=str(logs / f"{name}.log"),
            )

        components = (
            component(
                "etcd",
                etcd_client,
                f"{etcd_url}/health",
                [
                    str(binaries.etcd),
                    "--name=local",
                    f"--data-dir={etcd_data}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=local={peer_url}",
                    "--log-level=warn",
                ],
            ),
            component(
                "kube-apiserver",
                api,
                f"{server}/readyz",
                [
                    str(binaries.kube_apiserver),
                    f"--etcd-servers={etcd_url}",
                    f"--cert-dir={certs}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={api}",
                    f"--service-account-issuer={server}/",
                    f"--service-account-key-file={sa_pub}",
                    f"--service-account-signing-key-file={sa_key}",
                    "--authorization-mode=RBAC",
                    f"--token-auth-file={self.state_dir / 'tokens.csv'}",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=true",
                    "--endpoint-reconciler-type=none",
                    "--profiling=false",
                    f"--audit-policy-file={audit.write_policy(self.state_dir / 'audit.yaml')}",
                    f"--audit-log-path={info.audit_log}",
                    "--audit-log-format=json",
                    "--audit-log-mode=blocking",
                    *self._apiserver_flags,
                ],
            ),
            component(
                "kube-controller-manager",
                cm,
                f"https://127.0.0.1:{cm}/healthz",
                [
                    str(binaries.kube_controller_manager),
                    *delegated,
                    *serving,
                    f"--secure-port={cm}",
                    f"--service-account-private-key-file={sa_key}",
                    f"--root-ca-file={ca_file}",
                    "--use-service-account-credentials=false",
                    f"--cluster-name={self.name}",
                    "--profiling=false",
                ],
            ),
            component(
                "kube-scheduler",
                scheduler,
                f"https://127.0.0.1:{scheduler}/healthz",
                [
                    str(binaries.kube_scheduler),
                    *delegated,
                    *serving,
                    f"--secure-port={scheduler}",
                    "--profiling=false",
                ],
            ),
            component(
                "kwok",
                kwok,
                f"http://127.0.0.1:{kwok}/healthz",
                [
                    str(binaries.kwok),
                    f"--kubeconfig={kubeconfig}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
                    f"--server-address=127.0.0.1:{kwok}",
                    "--cidr=10.244.0.1/16",
                    "--node-ip=10.244.0.1",
                    f"--node-lease-duration-seconds={KWOK_NODE_LEASE_SECONDS}",
                    f"--config={write_kwok_config(self.state_dir / 'kwok.yaml')}",
                ],
            ),
        )
        return _State(
            version=_STATE_VERSION,
            name=self.name,
            detached=self._detach,
            etcd_data=str(etcd_data),
            info=info,
            components=components,
        )

    # ------------------------------------------------------------------ running

    def _start(self, state: _State, name: str, *, timeout: float) -> _State:
        component = self._component(state, name)
        if not process.port_is_free(component.port):
            raise PortInUseError(name, component.port)
        began = time.monotonic()
        handle = process.spawn(
            component.command, log=Path(component.log), cwd=self.state_dir, detach=self._detach
        )
        component = attrs.evolve(component, pid=handle.pid, start_ticks=handle.start_ticks)
        state = _replace(state, component)
        ready = process.wait_until(
            lambda: self._component_healthy(state, component),
            timeout=timeout,
            failed=lambda: not process.is_alive(handle),
        )
        if not ready:
            log = Path(component.log)
            text = process.tail(log)
            alive = process.is_alive(handle)
            process.stop(handle)
            if "address already in use" in text:
                raise PortInUseError(name, component.port)
            reason = (
                f"did not become healthy within {timeout:.0f}s"
                if alive
                else "exited during start-up"
            )
            raise ComponentFailedError(name, reason, log=log, tail=text)
        self._progress(f"started {name} (pid {handle.pid}) in {time.monotonic() - began:.1f}s")
        return state

    def _component_healthy(self, state: _State, component: Component) -> bool:
        if component.name == "kube-apiserver":
            if not state.info.ca_file.exists():
                return False
            try:
                context = self._ca_context(state)
            except ssl.SSLError:
                # kube-apiserver is still writing the certificate it made (seen under load:
                # the file existed and held no certificate yet).
                return False
            return process.http_ok(component.health_url, token=state.info.token, context=context)
        if component.health_url.startswith("https://"):
            return process.http_ok(component.health_url, context=process.loopback_probe_context())
        return process.http_ok(component.health_url)

    def _ca_context(self, state: _State) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(state.info.ca_file))

    def _wait_default_service_account(self, state: _State, *, timeout: float) -> None:
        """The controller manager's service-account controller has run: pods can be created."""
        url = f"{state.info.server}/api/v1/namespaces/default/serviceaccounts/default"
        context = self._ca_context(state)
        ok = process.wait_until(
            lambda: process.http_ok(url, token=state.info.token, context=context),
            timeout=timeout,
            failed=lambda: not self._healthy(state),
            interval=0.2,
        )
        if not ok:
            log = Path(self._component(state, "kube-controller-manager").log)
            raise ComponentFailedError(
                "kube-controller-manager",
                "did not create the default service account",
                log=log,
                tail=process.tail(log),
            )

    def _healthy(self, state: _State) -> bool:
        return all(
            process.is_alive(c.handle) and self._component_healthy(state, c)
            for c in state.components
        )

    def _teardown(self, state: _State) -> None:
        for component in reversed(state.components):
            if component.pid:
                process.stop(component.handle)
        shutil.rmtree(state.etcd_data, ignore_errors=True)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    # ------------------------------------------------------------------ state file

    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    def _load(self) -> _State | None:
        path = self._state_file()
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise LocalClusterError(
                f"cannot read the cluster state file {path}: {error}"
            ) from error
        if raw.get("version") != _STATE_VERSION:
            raise LocalClusterError(
                f"the cluster state file {path} has an unknown format; remove {self.state_dir}"
            )
        try:
            return _converter.structure(raw, _State)
        except (cattrs.BaseValidationError, KeyError, TypeError) as error:
            raise LocalClusterError(f"the cluster state file {path} is damaged: {error}") from error

    def _save(self, state: _State) -> None:
        path = self._state_file()
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(_converter.unstructure(state), indent=2))
        partial.replace(path)

    def _require(self) -> _State:
        state = self._load()
        if state is None:
            raise LocalClusterError(f"cluster {self.name!r} is not up; run 'karpy cluster up'")
        return state

    @staticmethod
    def _component(state: _State, name: str) -> Component:
        for component in state.components:
            if component.name == name:
                return component
        raise LocalClusterError(
            f"unknown component {name!r}; components are: {', '.join(COMPONENTS)}"
        )


def _replace(state: _State, component: Component) -> _State:
    return attrs.evolve(
        state,
        components=tuple(component if c.name == component.name else c for c in state.components),
    )
