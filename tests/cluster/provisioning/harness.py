"""A provisioner wired by hand on the real local cluster, for the provisioning tests.

The tests drive `Provisioner.reconcile_once()` themselves (or `run()` behind the batcher), so
they assemble what `karpy run`'s wiring would: informers for Nodes, Pods, NodeClaims and
NodePools feeding ClusterState, a FakeCloudProvider, an event Recorder and in-memory spans.
Each test gets its own NodePool with a unique label and taint, so pods of other tests can never
land on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.provisioner import Provisioner
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.manager import Loop, Manager
from karpy.runtime.channels import Trigger
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import BatchingOptions, ReconcileOptions, WatchingOptions
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.pods import is_provisionable
from karpy.state.view import ClusterView
from karpy.testing.fake_cloudprovider import TEST_NODE_CLASS, FakeCloudProvider
from tests.support.waiting import eventually

INTENT = "karpy.test/intent"
TEST_TAINT = "karpy.test/provisioning"


@attrs.define
class Harness:
    kube: KubeClient
    state: ClusterState
    provider: FakeCloudProvider
    provisioner: Provisioner
    batcher: Batcher
    spans: InMemorySpanExporter
    pool: NodePool
    intent: str
    telemetry: Telemetry
    loop: Loop
    """The provisioner as the operator runs it (fed by its watches; a test starts it)."""

    async def create_pod(
        self, namespace: str, name: str, *, cpu: str = "1", intent: str | None = None
    ) -> str:
        """A pending pod for this test's NodePool (or for `intent`); returns its UID."""
        body = pod_body(name, cpu=cpu, intent=intent or self.intent)
        pod = await self.kube.create_raw(PODS, body, namespace=namespace)
        return pod.metadata.uid or ""

    async def wait_provisionable(self, *uids: str) -> None:
        """Until cluster state holds every pod in `uids` as provisionable (kube-scheduler has
        marked it Unschedulable)."""

        async def ready() -> bool:
            pods = {p.metadata.uid: p for p in self.state.store(PODS).objects()}
            return all(uid in pods and is_provisionable(pods[uid]) for uid in uids)

        await eventually(ready, within=60)

    async def nodeclaims(self) -> list[NodeClaim]:
        """This test's NodeClaims, read from the apiserver."""
        listed = await self.kube.list(NODECLAIMS)
        name = self.pool.metadata.name
        return [i.obj for i in listed.items if i.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == name]

    async def karpy_events(self, namespace: str) -> list[Mapping[str, Any]]:
        """Events karpy recorded in `namespace`."""
        listing = await self.kube.request("GET", f"/api/v1/namespaces/{namespace}/events")
        return [e for e in listing.get("items", []) if e.get("reportingComponent") == "karpy"]

    async def wait_seen(self, name: str, *, launched: bool = False) -> None:
        async def seen() -> bool:
            claim = self.state.store(NODECLAIMS).get(name)
            return claim is not None and (not launched or bool(claim.status.allocatable))

        await eventually(seen, within=30)


def pod_body(name: str, *, cpu: str, intent: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {INTENT: intent},
            "tolerations": [{"key": TEST_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "inflate",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": "1536Mi"}},
                }
            ],
        },
    }


def make_nodepool(name: str, intent: str) -> NodePool:
    ref = NodeClassReference(group=TEST_NODE_CLASS.group, kind=TEST_NODE_CLASS.kind, name="default")
    template = NodeClaimTemplate(
        metadata=NodeClaimTemplateMetadata(labels={INTENT: intent}),
        spec=NodeClaimTemplateSpec(
            requirements=(
                NodeSelectorRequirementWithMinValues(
                    key=wk.LABEL_OS, operator=RequirementOperator.IN, values=(wk.OS_LINUX,)
                ),
            ),
            node_class_ref=ref,
            taints=(Taint(key=TEST_TAINT, effect=TaintEffect.NO_SCHEDULE),),
            expire_after="24h",
        ),
    )
    return NodePool(metadata=ObjectMeta(name=name), spec=NodePoolSpec(template=template))


@contextlib.asynccontextmanager
async def provisioning(
    kubeconfig: Path, *, batching: BatchingOptions | None = None
) -> AsyncIterator[Harness]:
    """Informers running, cluster state synced, a NodePool created; yields the harness."""
    spans = InMemorySpanExporter()
    telemetry = Telemetry.setup(service_name="karpy-test", span_exporter=spans)
    kube = await KubeClient.connect(kubeconfig, request_timeout=10.0)
    try:
        state = ClusterState(metrics=telemetry.metrics)
        informers: dict[str, Informer[Any]] = {
            kind.kind: Informer(
                kube,
                state.register(kind),
                state=state,
                settings=WatchingOptions(),
                metrics=telemetry.metrics,
            )
            for kind in (NODES, PODS, NODECLAIMS, NODEPOOLS)
        }
        batcher = Batcher(
            batching or BatchingOptions(idle_duration=0.2, max_duration=2.0),
            signal=Trigger("provisioning"),
        )
        provider = FakeCloudProvider()
        provisioner = Provisioner(
            kube,
            ClusterView(state),
            cloudprovider=provider,
            batcher=batcher,
            recorder=Recorder(kube, SystemClock()),
            telemetry=telemetry,
            node_nominations=state.nominations,
        )
        (loop,) = Manager(
            telemetry=telemetry, backoff=ReconcileOptions().backoff, synced=state.wait_synced
        ).loops((provisioner.spec(),), informers)
        intent = f"apps-{secrets.token_hex(3)}"
        pool = await kube.create(NODEPOOLS, make_nodepool(f"pool-{secrets.token_hex(3)}", intent))
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(i.run(), name=f"informer-{k}") for k, i in informers.items()]
            async with asyncio.timeout(30):
                await state.wait_synced()
            await eventually(
                lambda: _has(state, pool.metadata.name or ""), within=30, interval=0.05
            )
            try:
                yield Harness(
                    kube,
                    state,
                    provider,
                    provisioner,
                    batcher,
                    spans,
                    pool,
                    intent,
                    telemetry,
                    loop,
                )
            finally:
                for task in tasks:
                    task.cancel()
    finally:
        await kube.close()
        telemetry.shutdown()


async def _has(state: ClusterState, name: str) -> bool:
    return state.store(NODEPOOLS).get(name) is not None
