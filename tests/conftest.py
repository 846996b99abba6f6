"""Session-wide test plumbing: Hypothesis profiles and the real local control plane.

Tests that talk to Kubernetes do so against a real kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (karpy.localcluster), started once per session on 127.0.0.1 (once per
worker when pytest-xdist runs the suite on several). Each test gets its own namespace;
cluster-scoped objects a test creates are removed after it (tests/cluster/conftest.py).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, settings

from karpy.localcluster import ClusterInfo, LocalCluster, PortInUseError
from karpy.localcluster.build import tools_cached
from karpy.runtime.telemetry import Telemetry
from tests.support.clusterapi import clusterapi  # noqa: F401 - the session's Cluster API
from tests.support.kubehttp import KubeHTTP, KubeHTTPError
from tests.support.marks import CHAINS

ROOT = Path(__file__).resolve().parent.parent

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile(
    "fast", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(
    "fast" if os.environ.get("CI") == "true" or os.environ.get("FAST") == "1" else "default"
)

_CLUSTER_DIRS = ("cluster", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests under tests/cluster and tests/e2e need the control plane: mark them so.

    The order is the order xdist hands work out (scripts/check runs it without reordering):
    the two chains of heavy tests first, since each is one worker's longest stretch. Tests
    marked ``tools`` (helm, Jaeger, Cluster API) come next when those are cached — the Cluster
    API tests are one xdist group, the third worker's long first stretch — and last when they
    still build beside the suite, so the build has the whole suite to finish in and no worker
    sits waiting for it (tests/support/marks.py). A chained test that needs a tool runs last
    in its chain.
    """
    for item in items:
        parts = Path(str(item.path)).relative_to(ROOT / "tests").parts
        if parts and parts[0] in _CLUSTER_DIRS:
            item.add_marker(pytest.mark.cluster)
    building = not tools_cached()

    def order(item: pytest.Item) -> tuple[int, bool]:
        group = item.get_closest_marker("xdist_group")
        chained = group is not None and bool(CHAINS.intersection(group.args))
        tools = item.get_closest_marker("tools") is not None
        if chained:
            return (0, tools)
        if tools:
            return (3, False) if building else (1, False)
        return (2, False)

    items.sort(key=order)


@pytest.fixture(autouse=True)
async def _no_leaked_tasks(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Fail a coroutine test that leaves asyncio tasks running: every task must have an owner."""
    yield
    if not inspect.iscoroutinefunction(getattr(request.function, "__wrapped__", request.function)):
        return
    current = asyncio.current_task()
    for _ in range(3):  # let tasks that are already finishing finish
        leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if not leftover:
            return
        await asyncio.sleep(0)
    for task in leftover:
        task.cancel()
    await asyncio.gather(*leftover, return_exceptions=True)
    pytest.fail(f"test left {len(leftover)} task(s) running: {[t.get_name() for t in leftover]}")


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    """Telemetry for one test: metrics readable through ``prometheus_text()``, nothing exported."""
    made = Telemetry.setup(service_name="karpy-test")
    yield made
    made.shutdown()


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The session's control plane (one per xdist worker: the name is the worker's pid, the
    state under the worker's own temp dir). Started on first use, so a worker that runs only
    unit tests starts none. Its processes die with the test session."""
    cluster = LocalCluster(
        f"pytest-{os.getpid()}",
        state_dir=tmp_path_factory.mktemp("cluster") / "state",
        detach=False,
    )
    _up(cluster)
    try:
        yield cluster
    finally:
        cluster.down()


def _up(cluster: LocalCluster, *, attempts: int = 3) -> None:
    """Start the cluster, picking new ports when one was taken before its component bound it.

    LocalCluster picks every free port first and starts the components one by one, so another
    cluster starting at the same moment (the other xdist worker's, or another checkout's) can
    take a port in between; ``up`` then stops what it started and raises PortInUseError.
    """
    for attempt in range(1, attempts + 1):
        try:
            cluster.up()
        except PortInUseError:
            if attempt == attempts:
                raise
        else:
            return


@pytest.fixture(scope="session")
def cluster_info(local_cluster: LocalCluster) -> ClusterInfo:
    info = local_cluster.info()
    assert info is not None
    return info


@pytest.fixture(scope="session")
def kube_http(cluster_info: ClusterInfo) -> KubeHTTP:
    """Synchronous admin access for fixtures; tests should prefer ``api_client``."""
    return KubeHTTP(cluster_info)


@pytest.fixture(scope="session")
def karpy_crds(kube_http: KubeHTTP) -> list[str]:
    """Install every CRD in deploy/crds once per session and wait until each is Established."""
    names: list[str] = []
    for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not document:
                continue
            name = document["metadata"]["name"]
            kube_http.apply(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", document
            )
            names.append(name)
    for name in names:
        _wait(
            lambda name=name: _established(kube_http, name),
            what=f"CRD {name} to be Established",
        )
    return names


def _established(kube_http: KubeHTTP, name: str) -> bool:
    crd = kube_http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (crd.get("status") or {}).get("conditions") or []  # null right after creation
    )


def _wait(check: object, *, what: str, timeout: float = 30.0) -> None:
    import time

    assert callable(check)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


@pytest.fixture
async def api_client(cluster_info: ClusterInfo) -> AsyncIterator[object]:
    """A kubernetes_asyncio ApiClient with admin rights on the session's cluster."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster_info.kubeconfig), client_configuration=configuration
    )
    api = client.ApiClient(configuration)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
async def namespace(request: pytest.FixtureRequest, kube_http: KubeHTTP) -> AsyncIterator[str]:
    """A fresh namespace for one test, with its default ServiceAccount ready; deleted after."""
    slug = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{secrets.token_hex(3)}"
    kube_http.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    for _ in range(600):
        if kube_http.exists(path):
            break
        await asyncio.sleep(0.05)
    else:
        raise TimeoutError(f"namespace {name}: the default ServiceAccount never appeared")
    try:
        yield name
    finally:
        try:
            kube_http.delete(f"/api/v1/namespaces/{name}")
        except KubeHTTPError as error:  # pragma: no cover - surfaced, not hidden
            raise RuntimeError(f"could not delete test namespace {name}: {error}") from error
