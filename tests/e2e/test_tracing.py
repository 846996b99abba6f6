"""karpy's traces in a real Jaeger: Jaeger all-in-one (built from Go modules) receives karpy's
spans over OTLP/HTTP on 127.0.0.1, and the test follows one pod through them with Jaeger's
query API, as a user would in its UI.

`inflate` scales to 1: the trace whose provisioning batch names the pod holds the solve, the
"create nodeclaim" span with the decision, and the launch with the provider's Create call (the
NodeClaim's karpy.sh/traceparent annotation names the create span); the NodeClaim's
registration, in a later reconcile's trace, links back to that create span. Scaling to 0 then
disrupts the empty node in a trace of its own. The spans carry the OpenTelemetry resource
attributes (service.name, service.version, k8s.cluster.name, and k8s.namespace.name and
k8s.pod.name from OTEL_RESOURCE_ATTRIBUTES, as the chart sets them).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

import karpy
from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    fresh_nodepool,
    live_pods,
    no_nodeclaims,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.support.jaeger import Jaeger, jaeger, references, tags
from tests.support.marks import CHAIN_A, TOOLS
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), CHAIN_A, *TOOLS]

Span = dict[str, Any]


def named(trace: Mapping[str, Any], operation: str) -> list[Span]:
    return [s for s in trace["spans"] if s["operationName"] == operation]


def mentions(span: Span, key: str, value: str) -> bool:
    """Whether the span's attribute `key` (a string or a list, which Jaeger shows as JSON
    text) holds `value`."""
    found = tags(span).get(key)
    if isinstance(found, str) and found.startswith("["):
        return value in json.loads(found)
    return bool(found == value)


def child_of(span: Span, parent: Span) -> bool:
    return (parent["traceID"], parent["spanID"]) in references(span, "CHILD_OF")


def descends(trace: Mapping[str, Any], span: Span, ancestor: Span) -> bool:
    by_id = {s["spanID"]: s for s in trace["spans"]}
    current: Span | None = span
    while current is not None:
        if child_of(current, ancestor):
            return True
        parents = references(current, "CHILD_OF")
        current = by_id.get(parents[0][1]) if parents else None
    return False


async def find_batch(server: Jaeger, service: str, pod: str) -> tuple[dict[str, Any], Span] | None:
    """The trace whose provisioning batch names `pod` (namespace/name), and that batch span."""
    found = await asyncio.to_thread(server.traces, service, operation="provisioning batch")
    for trace in found:
        for batch in named(trace, "provisioning batch"):
            if mentions(batch, "karpy.pod_names", pod) and named(trace, "launch nodeclaim"):
                return trace, batch
    return None


async def test_a_pods_trace_runs_from_batch_to_registration(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = f"karpy-{namespace}"
    cluster = f"traced-{namespace}"
    # As the chart sets it from the pod's own fields (OTEL_RESOURCE_ATTRIBUTES).
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "k8s.namespace.name=kube-system,k8s.pod.name=karpy-0"
    )
    pool, labels = await fresh_nodepool(api_client, "traced", consolidate_after="1s")
    await create_deployment(api_client, namespace, deployment("inflate", node_selector=labels))

    with jaeger(tmp_path) as server:
        await eventually(lambda: asyncio.to_thread(server.up), within=60, what="Jaeger's API")
        environ = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": server.otlp_endpoint,
            "OTEL_SERVICE_NAME": service,
            "CLUSTER_NAME": cluster,
        }
        async with running_daemon(cluster_info, environ=environ):
            await scale(api_client, namespace, "inflate", 1)
            (pod,) = await eventually(running(api_client, namespace, "inflate", 1), within=90)
            pod_name = f"{namespace}/{pod.metadata.name}"

            async def launched_claims() -> list[dict[str, Any]]:
                # The pod may run on the Node before the launch's providerID is recorded.
                claims = await nodeclaims(api_client, pool)
                return claims if all(c.get("status", {}).get("providerID") for c in claims) else []

            (claim,) = await eventually(launched_claims, within=30, what="the launch recorded")
            claim_name = claim["metadata"]["name"]

            # batch -> solve -> create nodeclaim -> launch -> cloudprovider.Create, one trace.
            trace, batch = await eventually(
                lambda: find_batch(server, service, pod_name),
                within=60,
                what="the batch naming the pod in Jaeger",
            )
            assert mentions(batch, "karpy.pod_uids", pod.metadata.uid)
            (solve,) = named(trace, "solve")
            assert child_of(solve, batch)
            (create,) = [
                s
                for s in named(trace, "create nodeclaim")
                if tags(s).get("karpy.nodeclaim") == claim_name
            ]
            assert descends(trace, create, batch)
            assert mentions(create, "karpy.pod_names", pod_name)
            decision = tags(create)
            assert decision["karpy.nodepool"] == pool
            assert decision["karpy.instance_types.count"] >= 1
            assert decision["karpy.offering.price_per_hour"] > 0
            assert mentions(
                create, "karpy.instance_types", decision["karpy.offering.instance_type"]
            )
            (launch,) = named(trace, "launch nodeclaim")
            assert child_of(launch, create)
            (provider_create,) = named(trace, "cloudprovider.Create")
            assert child_of(provider_create, launch)
            assert tags(provider_create)["karpy.nodeclaim"] == claim_name
            launched = tags(launch)
            assert launched["karpy.instance_type"] in json.loads(decision["karpy.instance_types"])
            assert launched["karpy.provider_id"] == claim["status"]["providerID"]

            # The NodeClaim names the create span, so any process can continue from it.
            traceparent = claim["metadata"]["annotations"][wk.ANNOTATION_TRACEPARENT]
            _, trace_id, span_id, _ = traceparent.split("-")
            assert (trace_id, span_id) == (create["traceID"].zfill(32), create["spanID"])

            # Registration, in the lifecycle reconcile's own trace, links to the create span.
            async def registered() -> list[Span]:
                found = await asyncio.to_thread(
                    server.traces,
                    service,
                    operation="register nodeclaim",
                    tags=json.dumps({"karpy.nodeclaim": claim_name}),
                )
                return [s for t in found for s in named(t, "register nodeclaim")]

            # (A registration whose status write lost a race runs, and is traced, again.)
            registrations = await eventually(
                registered, within=60, what="the registration span in Jaeger"
            )
            for registration in registrations:
                assert (create["traceID"], create["spanID"]) in references(
                    registration, "FOLLOWS_FROM"
                )
                assert registration["traceID"] != create["traceID"]
                assert tags(registration)["karpy.node"] == claim["status"]["nodeName"]

            process = trace["processes"][batch["processID"]]
            assert process["serviceName"] == service
            resource = {t["key"]: t["value"] for t in process["tags"]}
            assert resource["service.version"] == karpy.__version__
            assert resource["k8s.cluster.name"] == cluster
            assert resource["k8s.namespace.name"] == "kube-system"
            assert resource["k8s.pod.name"] == "karpy-0"

            # Scaling in: the empty node goes in a disruption command, a trace of its own.
            await scale(api_client, namespace, "inflate", 0)
            await eventually(lambda: no_nodeclaims(api_client, pool), within=90)

            async def disrupted() -> list[tuple[dict[str, Any], Span]]:
                found = await asyncio.to_thread(
                    server.traces, service, operation="disruption command"
                )
                return [
                    (t, s)
                    for t in found
                    for s in named(t, "disruption command")
                    if mentions(s, "karpy.nodeclaims", claim_name)
                ]

            ((command_trace, command),) = await eventually(
                disrupted, within=60, what="the disruption command in Jaeger"
            )
            assert not references(command, "CHILD_OF")  # the root of its trace
            assert references(command, "FOLLOWS_FROM")  # linked to the pass that chose it
            (finish,) = named(command_trace, "delete disruption candidates")
            assert child_of(finish, command)
            assert tags(command)["karpy.reason"].lower() == "empty", tags(command)
            assert tags(command)["karpy.savings_per_hour"] > 0, tags(command)
    assert not await live_pods(api_client, namespace, "inflate")
