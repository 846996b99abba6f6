"""A reconcile driven by a real informer is traced, and its span names the object it reconciled."""

from __future__ import annotations

import asyncio

from kubernetes_asyncio import client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.resources import ObjectRef
from karpy.localcluster import ClusterInfo
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import WatchingOptions
from karpy.runtime.reconciler import Result, Runner, WorkQueue
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from tests.cluster.runtime.support import CONFIG_MAPS, create_config_map
from tests.support.waiting import eventually


async def test_reconcile_span_carries_the_object_identity(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    spans = InMemorySpanExporter()
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=spans)
    kube = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    state = ClusterState(metrics=telemetry.metrics)
    informer = Informer(
        kube,
        state.register(CONFIG_MAPS),
        state=state,
        settings=WatchingOptions(),
        metrics=telemetry.metrics,
        namespace=namespace,
    )
    reconciled: list[str] = []

    async def reconcile(ref: ObjectRef) -> Result:
        config_map = await kube.get(CONFIG_MAPS, ref.name, namespace=ref.namespace)
        reconciled.append(config_map.name)
        return Result()

    queue: WorkQueue[ObjectRef] = WorkQueue("configmap.test", telemetry=telemetry)
    runner = Runner(
        "configmap.test",
        reconcile,
        queue=queue,
        telemetry=telemetry,
        backoff=Backoff(base=0.1, cap=1.0),
        workers=2,
        describe=ObjectRef.describe,
        done_on=(NotFoundError,),
    )
    informer.subscribe(lambda event: queue.add(event.item.ref))
    try:
        async with asyncio.TaskGroup() as group:
            watching = group.create_task(informer.run())
            group.create_task(runner.run())
            await create_config_map(api_client, namespace, "traced")
            created = await client.CoreV1Api(api_client).read_namespaced_config_map(
                "traced", namespace
            )
            await eventually(lambda: _async("traced" in reconciled), within=30)
            await client.CoreV1Api(api_client).delete_namespaced_config_map("traced", namespace)
            await eventually(lambda: _async(len(traced(spans)) >= 2), within=30)
            watching.cancel()
            runner.stop()
        finished = traced(spans)
        first = finished[0]
        attributes = dict(first.attributes or {})
        assert first.name == "reconcile configmap.test"
        assert attributes["karpy.controller"] == "configmap.test"
        assert attributes["k8s.object.kind"] == "ConfigMap"
        assert attributes["k8s.object.name"] == "traced"
        assert attributes["k8s.namespace.name"] == namespace
        assert attributes["k8s.object.uid"] == created.metadata.uid
        assert attributes["karpy.result"] == "success"
        assert first.status.status_code is not StatusCode.ERROR
        # After the delete, the reconcile meets NotFound: done, not an error, same identity.
        last = dict(finished[-1].attributes or {})
        assert last["k8s.object.uid"] == attributes["k8s.object.uid"]
        assert last["karpy.result"] == "done"
    finally:
        await kube.close()
        telemetry.shutdown()


def traced(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    # The namespace also holds kube-root-ca.crt, published by the controller-manager.
    return [
        span
        for span in spans.get_finished_spans()
        if (span.attributes or {}).get("k8s.object.name") == "traced"
    ]


async def _async(value: bool) -> bool:
    return value
