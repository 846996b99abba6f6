"""Per-test hygiene for tests on the real control plane.

Cluster-scoped objects (Nodes, NodePools, NodeClaims, PVs, StorageClasses, extra namespaces...)
outlive a test's namespace, so each test's new ones are found by comparing a listing before and
after the test, stripped of finalizers (nothing may be left waiting for a controller that is no
longer running) and deleted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo
from tests.support.kubehttp import KubeHTTP, KubeHTTPError

# Cluster-scoped kinds the apiserver or controller-manager maintain on their own.
_SKIP = {
    ("", "componentstatuses"),
    ("apiregistration.k8s.io", "apiservices"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
    ("networking.k8s.io", "ipaddresses"),
    ("networking.k8s.io", "servicecidrs"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
}


@pytest.fixture(scope="session")
def _cluster_scoped_paths(kube_http: KubeHTTP) -> list[str]:
    """Collection paths of every listable, deletable cluster-scoped resource (CRDs included)."""
    groups: list[tuple[str, str]] = [("", "/api/v1")]
    for group in kube_http.get("/apis")["groups"]:
        version = group["preferredVersion"]["groupVersion"]
        groups.append((group["name"], f"/apis/{version}"))
    paths: list[str] = []
    for group, base in groups:
        for resource in kube_http.get(base)["resources"]:
            verbs = set(resource.get("verbs", []))
            if (
                resource["namespaced"]
                or "/" in resource["name"]
                or not {"list", "delete"} <= verbs
                or (group, resource["name"]) in _SKIP
            ):
                continue
            paths.append(f"{base}/{resource['name']}")
    return paths


def _names(kube_http: KubeHTTP, paths: list[str]) -> dict[str, set[str]]:
    listing: dict[str, set[str]] = {}
    for path in paths:
        try:
            items = kube_http.get(path)["items"]
        except KubeHTTPError as error:
            if error.status == 404:  # a CRD removed since discovery
                continue
            raise
        listing[path] = {item["metadata"]["name"] for item in items}
    return listing


@pytest.fixture(autouse=True)
def _clean_cluster_scoped(request: pytest.FixtureRequest) -> Iterator[None]:
    if "local_cluster" not in request.fixturenames:
        yield
        return
    kube_http: KubeHTTP = request.getfixturevalue("kube_http")
    paths: list[str] = request.getfixturevalue("_cluster_scoped_paths")
    before = _names(kube_http, _cluster_scoped_paths_now(kube_http, paths))
    yield
    after = _names(kube_http, _cluster_scoped_paths_now(kube_http, paths))
    for path, names in after.items():
        for name in sorted(names - before.get(path, set())):
            if path == "/api/v1/namespaces" and name.startswith("t-"):
                continue  # the namespace fixture deletes its own
            kube_http.force_delete(f"{path}/{name}")


def _cluster_scoped_paths_now(kube_http: KubeHTTP, paths: list[str]) -> list[str]:
    """Custom resources of CRDs a test installed are listed too, so none outlive it."""
    extra: list[str] = []
    for crd in kube_http.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]:
        spec = crd["spec"]
        if spec["scope"] != "Cluster":
            continue
        version = next((v["name"] for v in spec["versions"] if v.get("storage")), None)
        path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"
        if version and path not in paths:
            extra.append(path)
    return [*extra, *paths]


@pytest.fixture
async def kube(cluster_info: ClusterInfo) -> AsyncIterator[KubeClient]:
    """karpy's own client on the test's cluster, closed after the test."""
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        yield kube
    finally:
        await kube.close()
