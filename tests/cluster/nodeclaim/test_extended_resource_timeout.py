"""The extended-resource initialization timeout on the real local cluster: a pod asks for
example.com/gpu, the provisioner launches a GPU type, its Node joins (kwok makes it Ready) but
never reports example.com/gpu, as when the device plugin never starts. Past the NodePool's
timeout the NodeClaim is deleted with a ResourceNotRegistered event naming the resource, and
the next provisioning pass launches a replacement for the pod. The lifecycle runs under a
FakeClock, so the two-minute timeout passes at once."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec, NodeStatus
from karpy.apis.meta import ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.controllers.nodeclaim.lifecycle import LifecycleController
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.resources import Resources
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.localcluster import ClusterInfo
from karpy.runtime.clock import FakeClock
from karpy.state.view import ClusterView
from tests.cluster.nodeclaim.conftest import reconcile_until
from tests.cluster.provisioning.harness import pod_body, provisioning
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

GPU = "example.com/gpu"


def _gpu_type() -> InstanceType:
    return InstanceType.make(
        "fake-gpu-4x",
        Resources.of({"cpu": 4, "memory": "16Gi", "pods": 110, GPU: 1}),
        (Offering("test-zone-1", wk.CAPACITY_TYPE_ON_DEMAND, 1.5),),
        overhead=Resources.of({"cpu": "100m", "memory": "10Mi"}),
        labels={wk.LABEL_ARCH: wk.ARCH_AMD64, wk.LABEL_OS: wk.OS_LINUX},
    )


def _gpu_pod(name: str, intent: str) -> dict[str, Any]:
    body = pod_body(name, cpu="1", intent=intent)
    resources = body["spec"]["containers"][0]["resources"]
    resources["requests"][GPU] = "1"
    resources["limits"] = {GPU: "1"}
    return body


def _condition(claim: NodeClaim, kind: ConditionType) -> tuple[ConditionStatus, str] | None:
    found = next((c for c in claim.status.conditions if c.type == kind), None)
    return None if found is None else (found.status, found.reason)


async def test_a_node_whose_gpu_never_appears_is_replaced_after_its_timeout(
    cluster_info: ClusterInfo, namespace: str, kube_http: KubeHTTP
) -> None:
    async with provisioning(cluster_info.kubeconfig) as h:
        kube = h.kube
        h.provider.instance_types = (_gpu_type(),)
        pool = h.pool.metadata.name or ""
        await kube.merge_patch(
            NODEPOOLS,
            pool,
            {
                "metadata": {
                    "annotations": {wk.ANNOTATION_EXTENDED_RESOURCE_INITIALIZATION_TIMEOUT: "2m"}
                }
            },
        )

        async def annotated() -> bool:
            seen = h.state.store(NODEPOOLS).get(pool)
            return seen is not None and bool(seen.metadata.annotations)

        await eventually(annotated, within=30)
        pod = await kube.create_raw(PODS, _gpu_pod("trainer", h.intent), namespace=namespace)
        await h.wait_provisionable(pod.metadata.uid or "")
        await h.provisioner.reconcile_once()
        (claim,) = await h.nodeclaims()
        name = claim.metadata.name or ""
        assert claim.spec.resources.requests[GPU] == "1"
        assert claim.metadata.creation_timestamp is not None
        clock = FakeClock(claim.metadata.creation_timestamp)
        lifecycle = LifecycleController(
            kube, ClusterView(h.state), h.provider, clock=clock, recorder=Recorder(kube, clock)
        )

        async def launched() -> bool:
            got = await kube.get(NODECLAIMS, name)
            return _condition(got, ConditionType.LAUNCHED) == (ConditionStatus.TRUE, "Launched")

        await reconcile_until(lifecycle.reconcile, name, launched)
        claim = await kube.get(NODECLAIMS, name)
        assert claim.status.capacity[GPU] == "1"  # what the instance type promised
        # The instance joins and kwok makes it Ready, but no device plugin ever reports a GPU.
        await kube.create(
            NODES,
            Node(
                metadata=ObjectMeta(
                    name=f"{name}-node",
                    annotations={wk.ANNOTATION_KWOK_NODE: wk.KWOK_NODE_VALUE},
                ),
                spec=NodeSpec(
                    provider_id=claim.status.provider_id,
                    taints=(Taint(key=wk.TAINT_UNREGISTERED_KEY, effect=TaintEffect.NO_EXECUTE),),
                ),
                status=NodeStatus(
                    capacity={
                        "cpu": Quantity("4"),
                        "memory": Quantity("16Gi"),
                        "pods": Quantity("110"),
                    },
                    allocatable={
                        "cpu": Quantity("4"),
                        "memory": Quantity("16Gi"),
                        "pods": Quantity("110"),
                    },
                ),
            ),
        )

        async def waiting_for_gpu() -> bool:
            got = await kube.get(NODECLAIMS, name)
            return _condition(got, ConditionType.INITIALIZED) == (
                ConditionStatus.UNKNOWN,
                "ResourceNotRegistered",
            )

        await reconcile_until(lifecycle.reconcile, name, waiting_for_gpu, within=60)
        # Short of the timeout it keeps waiting, and says when to look again.
        result = await lifecycle.reconcile(name)
        assert result.requeue_after is not None
        assert 0 < result.requeue_after <= 120
        assert (await kube.get(NODECLAIMS, name)).metadata.deletion_timestamp is None

        clock.step(datetime.timedelta(minutes=2))

        async def deleted() -> bool:
            got = await kube.get(NODECLAIMS, name)
            return got.metadata.deletion_timestamp is not None

        await reconcile_until(lifecycle.reconcile, name, deleted)
        reasons = kube_http.events_about(claim.metadata.uid or "")
        assert ("Warning", "ResourceNotRegistered") in reasons
        messages = [
            e["message"]
            for e in kube_http.get("/api/v1/namespaces/default/events")["items"]
            if e["involvedObject"].get("uid") == claim.metadata.uid
            and e["reason"] == "ResourceNotRegistered"
        ]
        assert messages == [
            "Resource 'example.com/gpu' requested but not registered within 120s,"
            " replacing the node"
        ]

        # The pod is still pending; the next pass launches a replacement for it.
        async def replaced() -> bool:
            await h.provisioner.reconcile_once()
            return any(c.metadata.name != name for c in await h.nodeclaims())

        await eventually(replaced, within=30, interval=0.5)
        (replacement,) = [c for c in await h.nodeclaims() if c.metadata.name != name]
        assert replacement.spec.resources.requests[GPU] == "1"

        # A pending pod left behind would count as unschedulable in later tests' provisioners.
        await kube.delete(PODS, "trainer", namespace=namespace, grace_period_seconds=0)

        async def no_pod() -> bool:
            return h.state.store(PODS).get("trainer", namespace=namespace) is None

        await eventually(no_pod, within=30)
