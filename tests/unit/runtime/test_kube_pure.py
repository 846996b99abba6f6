"""The pure parts of karpy.kube: error translation, resource paths, object identity, lease records.

Everything that talks to an apiserver is tested against the real local control plane under
tests/cluster/runtime; these cover the translations that need no server.
"""

from __future__ import annotations

import datetime
from typing import Any

import orjson
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.kube.errors import (
    ConflictError,
    GoneError,
    KubeError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    WatchError,
    from_status,
    from_status_object,
    translate,
)
from karpy.kube.install import object_path
from karpy.kube.lease import LeaseRecord
from karpy.kube.resources import DecodeError, ResourceKind, decode_item, ref_of


def status_body(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "code": code, "reason": reason, "message": message})


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        pytest.param(404, NotFoundError, id="404"),
        pytest.param(409, ConflictError, id="409"),
        pytest.param(410, GoneError, id="410"),
        pytest.param(429, TooManyRequestsError, id="429"),
        pytest.param(503, ServerError, id="503"),
        pytest.param(403, KubeError, id="403"),
    ],
)
def test_status_codes_map_to_error_kinds(code: int, cls: type[KubeError]) -> None:
    error = from_status(code, status_body(code, "Reason", "what went wrong"))
    assert type(error) is cls
    assert error.reason == "Reason"
    assert "what went wrong" in str(error)


def test_too_many_requests_carries_retry_after() -> None:
    error = from_status(429, b"{}", headers={"Retry-After": "7"})
    assert isinstance(error, TooManyRequestsError)
    assert error.retry_after == 7.0
    no_header = from_status(429, b"")
    assert isinstance(no_header, TooManyRequestsError)
    assert no_header.retry_after is None


def test_translate_chains_cleanly_from_api_exception() -> None:
    sdk_error = ApiException(status=409, reason="Conflict")
    sdk_error.body = status_body(409, "Conflict", "the object has been modified")

    def call() -> None:
        try:
            raise sdk_error
        except ApiException as error:
            raise translate(error) from error

    with pytest.raises(ConflictError) as caught:
        call()
    assert caught.value.__cause__ is sdk_error


def test_watch_error_event_status() -> None:
    gone = from_status_object({"code": 410, "reason": "Expired", "message": "too old"})
    other = from_status_object({"code": 500, "reason": "InternalError", "message": "x"})
    assert isinstance(gone, GoneError)
    assert isinstance(other, WatchError)


def test_non_json_body_is_kept_as_message() -> None:
    assert "gateway down" in str(from_status(502, b"gateway down"))


PODS = ResourceKind[dict[str, Any]](kind="Pod", plural="pods", version="v1", decode=dict)
LEASES = ResourceKind[dict[str, Any]](
    kind="Lease", plural="leases", version="v1", group="coordination.k8s.io", decode=dict
)
NODES = ResourceKind[dict[str, Any]](
    kind="Node", plural="nodes", version="v1", namespaced=False, decode=dict
)


def test_resource_paths() -> None:
    assert PODS.collection_path() == "/api/v1/pods"
    assert PODS.collection_path("ns") == "/api/v1/namespaces/ns/pods"
    assert PODS.object_path("p", "ns") == "/api/v1/namespaces/ns/pods/p"
    assert LEASES.collection_path("ns") == "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
    assert NODES.object_path("n1", "ignored") == "/api/v1/nodes/n1"
    with pytest.raises(ValueError, match="namespace is required"):
        PODS.object_path("p")


def test_ref_and_description() -> None:
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "9"}}
    ref = ref_of(PODS, raw)
    assert ref.key == ("ns", "p")
    description = ref.describe()
    assert description.log_fields == {"pod": "ns/p"}
    assert description.span_attributes["k8s.object.uid"] == "u-1"
    assert description.span_attributes["k8s.namespace.name"] == "ns"
    with pytest.raises(ValueError, match=r"Pod object has no metadata\.name"):
        ref_of(PODS, {"metadata": {}})


def test_decode_error_names_the_object() -> None:
    def refuse(raw: Any) -> dict[str, Any]:
        raise ValueError("spec.containers is required")

    kind = ResourceKind[dict[str, Any]](kind="Pod", plural="pods", version="v1", decode=refuse)
    with pytest.raises(DecodeError, match=r"cannot decode Pod ns/p: spec\.containers"):
        decode_item(kind, {"metadata": {"name": "p", "namespace": "ns"}})


def test_lease_record_round_trips_micro_time() -> None:
    now = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)
    record = LeaseRecord(
        holder="a", lease_duration=15, acquire_time=now, renew_time=now, transitions=3
    )
    spec = record.to_spec()
    assert spec["renewTime"] == "2026-01-02T03:04:05.678901Z"
    assert LeaseRecord.from_spec(spec) == record
    assert LeaseRecord.from_spec({}).holder == ""


@pytest.mark.parametrize(
    ("api_version", "kind", "namespace", "path"),
    [
        ("apps/v1", "Deployment", "default", "/apis/apps/v1/namespaces/default/deployments/x"),
        ("v1", "Namespace", None, "/api/v1/namespaces/x"),
        # A NodeClass kind no table names: Kubernetes' plural of a kind ending in "s".
        (
            "karpenter.cluster.x-k8s.io/v1alpha1",
            "ClusterAPINodeClass",
            None,
            "/apis/karpenter.cluster.x-k8s.io/v1alpha1/clusterapinodeclasses/x",
        ),
        (
            "cluster.x-k8s.io/v1beta2",
            "MachineDeployment",
            "fleet",
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/fleet/machinedeployments/x",
        ),
    ],
)
def test_a_manifest_is_applied_at_its_rest_path(
    api_version: str, kind: str, namespace: str | None, path: str
) -> None:
    metadata = {"name": "x", **({"namespace": namespace} if namespace else {})}
    assert object_path({"apiVersion": api_version, "kind": kind, "metadata": metadata}) == path
