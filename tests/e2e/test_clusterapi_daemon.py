"""``karpy run --provider clusterapi`` as its own process, against Cluster API's real controllers: a
SIGKILL mid-create leaves no extra Machine, and consolidation then moves the pod to the cheaper
MachineDeployment.

The fleet is the usual two MachineDeployments (tests/support/clusterapi.py), with small (the
cheaper, $0.096/h) at max size 0, so the one ``inflate`` pod (1.5 vCPU) can only go to large
($0.20/h). Both are paused (Cluster API's ``cluster.x-k8s.io/paused``), so the replica karpy adds
makes no Machine yet: once large carries karpy's scale-up record, karpy's create has grown it and
is waiting for its Machine, and the process is SIGKILLed there. Unpaused and restarted, karpy
claims the one Machine that replica made: one NodeClaim, one Machine, large at one replica.

Then small's max size goes to 1: the cheaper MachineDeployment has room, and
WhenEmptyOrUnderutilized consolidation replaces the large node with a small one. The pod runs on a
Machine of small, and large shrinks back to zero by exactly karpy's Machine.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy_clusterapi.apis import labels as capilabels
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    is_ready,
    nodeclaims,
    running,
    scale,
)
from tests.support import clusterapi as capi
from tests.support.faults import Karpy, Setup
from tests.support.marks import TOOLS
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.usefixtures("karpy_crds", "clusterapi"),
    *TOOLS,
    pytest.mark.xdist_group("clusterapi"),
]

PAUSED = "cluster.x-k8s.io/paused"


async def test_a_sigkill_mid_create_leaves_no_extra_machine_then_consolidation_moves_to_small(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    clusterapi: capi.ClusterAPIEnv,
    tmp_path: Path,
) -> None:
    kube = clusterapi.kube
    fleet = f"capk-{secrets.token_hex(3)}"
    intent = f"apps-{secrets.token_hex(3)}"
    custom = client.CustomObjectsApi(api_client)

    def md_path(md: str) -> str:
        return f"{capi.CAPI}/namespaces/{fleet}/machinedeployments/{md}"

    def annotate(md: str, annotations: dict[str, str | None]) -> None:
        kube.merge_patch(md_path(md), {"metadata": {"annotations": annotations}})

    def replicas(md: str) -> int:
        return int(kube.get(md_path(md))["spec"]["replicas"])

    def records(md: str) -> list[str]:
        found = kube.get(md_path(md))["metadata"].get("annotations") or {}
        return [k for k in found if k.startswith(capilabels.ANNOTATION_SCALE_UP_PREFIX)]

    async def ready_claims() -> list[dict[str, Any]]:
        found = await nodeclaims(api_client, fleet)
        return found if found and all(is_ready(c) for c in found) else []

    capi.fleet(kube, fleet, small_max_size=0)
    annotate("small", {PAUSED: "true"})
    annotate("large", {PAUSED: "true"})
    capi.nodeclass(kube, fleet)
    await custom.create_cluster_custom_object(
        wk.GROUP,
        "v1",
        "nodepools",
        capi.nodepool(fleet, intent, policy="WhenEmptyOrUnderutilized", consolidate_after="1s"),
    )
    await create_deployment(
        api_client,
        namespace,
        deployment("inflate", node_selector={"intent": intent}, cpu="1.5", memory="1.5Gi"),
    )
    setup = Setup(
        kubeconfig=cluster_info.kubeconfig,
        namespace=namespace,
        name=fleet,
        provider="clusterapi",
        flags=("--provider", "clusterapi", "--provider-setting", f"namespace={fleet}"),
    )
    karpy = Karpy(setup, leader_election=None, log=tmp_path / "karpy.log")
    karpy.start()
    try:
        await karpy.wait_ready()
        await scale(api_client, namespace, "inflate", 1)

        async def grown() -> list[str]:
            return records("large")

        await eventually(grown, within=120, what="karpy to grow large for the pod")
        karpy.kill()
        # Mid-create: large has one more replica, and no Machine exists to claim yet.
        assert replicas("large") == 1
        assert capi.machines(kube, fleet) == []

        annotate("small", {PAUSED: None})
        annotate("large", {PAUSED: None})
        karpy.start()
        await eventually(running(api_client, namespace, "inflate", 1), within=180)
        (claim,) = await eventually(ready_claims, within=60, what="the NodeClaim Ready")
        assert claim["metadata"]["labels"][wk.LABEL_INSTANCE_TYPE] == "large"
        (machine,) = capi.machines(kube, fleet)
        assert (
            machine["metadata"]["labels"][capilabels.LABEL_CLAIMED_BY]
            == (claim["metadata"]["name"])
        )
        assert machine["spec"]["providerID"] == claim["status"]["providerID"]
        assert replicas("large") == 1
        assert records("large") == []

        # The cheaper MachineDeployment gets room: consolidation replaces large with small.
        annotate("small", {capilabels.ANNOTATION_MAX_SIZE: "1"})

        async def on_small() -> list[dict[str, Any]]:
            machines = capi.machines(kube, fleet)
            claims = await ready_claims()
            types = [c["metadata"]["labels"][wk.LABEL_INSTANCE_TYPE] for c in claims]
            deployments = [
                m["metadata"]["labels"][capilabels.LABEL_DEPLOYMENT_NAME] for m in machines
            ]
            return claims if types == ["small"] and deployments == ["small"] else []

        (moved,) = await eventually(on_small, within=240, what="the pod's node replaced by small")
        await eventually(running(api_client, namespace, "inflate", 1), within=120)
        (machine,) = capi.machines(kube, fleet)
        assert machine["spec"]["providerID"] == moved["status"]["providerID"]
        assert replicas("small") == 1
        assert replicas("large") == 0
    finally:
        karpy.stop()
        await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", fleet)
        capi.remove_fleet(kube, fleet)
