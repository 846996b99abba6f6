"""Seed 002's walkthrough on the AWS provider: `inflate` at 10 replicas, then deleted.

The whole daemon (`karpy.operator.wiring.build` + the Supervisor, as `karpy run` starts them)
runs with `--provider aws` against moto on 127.0.0.1 and the real local control plane. moto
and the kubelet-join bridge run in a subprocess (`python -m karpy_aws_emulator`, as
`karpy demo --provider aws` starts them): for every instance CreateFleet launches, the bridge
registers the Node its kubelet would (providerID aws:///<zone>/<instance-id>), which kwok then
runs, and it deletes the Node once the instance is terminated. karpy makes the EC2NodeClass
Ready itself (subnets, security groups and the al2023 alias resolved in moto), and `inflate` is
scaled to 10 once it is. Scaling out launches instances of the NodePool's types and zones;
deleting the Deployment empties the nodes, and after consolidateAfter (5 s instead of the
seed's 30 s) Emptiness removes the NodeClaims, termination terminates the instances in moto,
and nothing is left: no live instance, NodeClaim or Node, and, once the NodeClass is deleted,
no launch template. Nothing the daemon said on the way (log lines at debug, spans, Events)
holds the kube or AWS credentials it used.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import NODEPOOL_REQUIREMENTS, Emulator
from karpy.operator.demo_aws import emulator as start_emulator
from karpy_aws.apis import labels as awslabels
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    is_ready,
    no_nodeclaims,
    no_pods,
    nodeclaims,
    nodes_gone,
    running,
    running_daemon,
    scale,
)
from tests.support.awsworld import ec2_nodepool
from tests.support.marks import CHAIN_A
from tests.support.secrets import (
    Witness,
    assert_no_secrets,
    aws_secrets,
    karpy_events,
    kube_secrets,
)
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    pytest.mark.aws,
    CHAIN_A,  # moto, the kubelet bridge and karpy as processes of their own
]

CONSOLIDATE_AFTER = "5s"
"""The seed's ttlSecondsAfterEmpty is 30s; a short wait keeps the suite fast."""
TYPES, ZONES = (values for _, values in NODEPOOL_REQUIREMENTS)
"""The walkthrough's NodePool: these instance types, these zones, spot or on-demand."""
LIVE = ("pending", "running", "stopping", "stopped")


def _ec2(emulator: Emulator) -> Any:
    return botocore.session.get_session().create_client(
        "ec2", region_name=emulator.ready["region"], endpoint_url=emulator.ready["endpoint"]
    )


@pytest.fixture
async def emulator(
    cluster_info: ClusterInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Emulator]:
    """moto and the bridge for a cluster name of its own, started as `karpy demo --provider aws`
    starts them; karpy gets moto's AWS environment."""
    name = f"aws-walk-{secrets.token_hex(3)}"
    log_path = tmp_path / "emulator.log"
    with log_path.open("w") as log:
        async with start_emulator(
            kubeconfig=cluster_info.kubeconfig, cluster_name=name, log=log
        ) as running:
            for key, value in running.environment().items():
                monkeypatch.setenv(key, value)
            yield running
    assert running.exit_code == 0, log_path.read_text()


def _nodeclass(name: str, discovery: str) -> dict[str, Any]:
    terms = [{"tags": {"karpenter.sh/discovery": discovery}}]
    return {
        "apiVersion": f"{awslabels.AWS_GROUP}/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "subnetSelectorTerms": terms,
            "securityGroupSelectorTerms": terms,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "KarpyNodeRole",
        },
    }


def _nodepool(name: str, intent: str) -> dict[str, Any]:
    return ec2_nodepool(
        name,
        nodeclass=name,
        intent=intent,
        requirements={
            wk.LABEL_INSTANCE_TYPE: TYPES,
            wk.LABEL_TOPOLOGY_ZONE: ZONES,
            wk.LABEL_ARCH: ("amd64", "arm64"),
            wk.LABEL_CAPACITY_TYPE: ("spot", "on-demand"),
        },
        disruption={
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": CONSOLIDATE_AFTER,
            "budgets": [{"nodes": "100%"}],
        },
    )


async def test_inflate_runs_on_moto_instances_and_leaves_nothing_behind(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    emulator: Emulator,
    witness: Witness,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Credentials of their own (moto takes any), so that finding one in what karpy said means
    # karpy said it.
    credentials = {
        "AWS_ACCESS_KEY_ID": f"AKIA{secrets.token_hex(8).upper()}",
        "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
        "AWS_SESSION_TOKEN": secrets.token_urlsafe(96),
    }
    for key, value in credentials.items():
        monkeypatch.setenv(key, value)
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    name = f"aws-{secrets.token_hex(3)}"
    intent = f"apps-{secrets.token_hex(3)}"
    await custom.create_cluster_custom_object(
        awslabels.AWS_GROUP, "v1", "ec2nodeclasses", _nodeclass(name, emulator.cluster_name)
    )
    await custom.create_cluster_custom_object(wk.GROUP, "v1", "nodepools", _nodepool(name, intent))
    await create_deployment(
        api_client, namespace, deployment("inflate", node_selector={"intent": intent})
    )
    ec2 = _ec2(emulator)

    async def instances(states: Sequence[str] = LIVE) -> list[dict[str, Any]]:
        return await _instances(ec2, emulator.cluster_name, states)

    async def nodeclass_ready() -> bool:
        found = await custom.get_cluster_custom_object(
            awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
        )
        return is_ready(found)

    async with running_daemon(cluster_info, flags=emulator.flags(), span_exporter=witness.spans):
        # karpy resolves the NodeClass against moto: seeded subnets, group and al2023 AMIs.
        # (Pods that go pending before it is Ready are tried again every 10 s; waiting for it
        # keeps the scenario as the seed tells it.)
        await eventually(nodeclass_ready, within=60)

        await scale(api_client, namespace, "inflate", 10)
        pods = await eventually(running(api_client, namespace, "inflate", 10), within=240)
        ready = await eventually(
            lambda: _all_ready(api_client, name, count=len({p.spec.node_name for p in pods})),
            within=60,
        )
        launched = {i["InstanceId"]: i for i in await instances(("running",))}
        assert len(launched) == len(ready)
        for claim in ready:
            zone, instance_id = claim["status"]["providerID"].removeprefix("aws:///").split("/")
            instance = launched[instance_id]
            assert instance["Placement"]["AvailabilityZone"] == zone
            node = await core.read_node(claim["status"]["nodeName"])
            labels = node.metadata.labels
            # The kubelet's view (the bridge) and karpy's agree with moto.
            assert node.metadata.name == instance["PrivateDnsName"]
            assert node.spec.provider_id == claim["status"]["providerID"]
            assert labels[wk.LABEL_INSTANCE_TYPE] == instance["InstanceType"]
            assert labels[wk.LABEL_INSTANCE_TYPE] in TYPES
            assert labels[wk.LABEL_TOPOLOGY_ZONE] in ZONES
            spot = instance.get("InstanceLifecycle") == "spot"
            assert labels[wk.LABEL_CAPACITY_TYPE] == ("spot" if spot else "on-demand")
            assert labels[wk.LABEL_NODEPOOL] == name
            assert labels["intent"] == intent
            assert labels[wk.LABEL_NODE_INITIALIZED] == "true"
            assert not any(t.key == wk.TAINT_UNREGISTERED_KEY for t in node.spec.taints or [])
        nodes = {c["status"]["nodeName"] for c in ready}
        assert {p.spec.node_name for p in pods} <= nodes

        await client.AppsV1Api(api_client).delete_namespaced_deployment("inflate", namespace)
        await eventually(lambda: no_pods(api_client, namespace, "inflate"), within=60)
        await eventually(lambda: no_nodeclaims(api_client, name), within=120)
        await eventually(lambda: nodes_gone(api_client, nodes), within=60)
        await eventually(lambda: _none(instances), within=60)
        terminated = {i["InstanceId"] for i in await instances(("terminated",))}
        assert set(launched) <= terminated

        # The NodeClass's own clean-up (launch templates, instance profile) runs in karpy.
        assert await _templates(ec2, emulator.cluster_name)
        await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", name)
        await custom.delete_cluster_custom_object(awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name)
        await eventually(lambda: _nodeclass_gone(custom, name), within=60)
        assert not await _templates(ec2, emulator.cluster_name)
    found = {**kube_secrets(cluster_info.kubeconfig), **aws_secrets(credentials)}
    assert_no_secrets(witness, found, await karpy_events(api_client), name)


async def _instances(ec2: Any, cluster: str, states: Sequence[str]) -> list[dict[str, Any]]:
    """The cluster's instances in `states`, found as the provider finds them (by tag)."""
    answer = await asyncio.to_thread(
        ec2.describe_instances,
        Filters=[
            {"Name": "tag-key", "Values": [wk.LABEL_NODEPOOL]},
            {"Name": f"tag:kubernetes.io/cluster/{cluster}", "Values": ["owned"]},
            {"Name": "instance-state-name", "Values": list(states)},
        ],
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


async def _templates(ec2: Any, cluster: str) -> list[dict[str, Any]]:
    answer = await asyncio.to_thread(
        ec2.describe_launch_templates,
        Filters=[{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [cluster]}],
    )
    templates: list[dict[str, Any]] = answer["LaunchTemplates"]
    return templates


async def _all_ready(api: client.ApiClient, pool: str, *, count: int) -> list[dict[str, Any]]:
    found = await nodeclaims(api, pool)
    return found if len(found) >= count and all(is_ready(c) for c in found) else []


async def _none(probe: Any) -> bool:
    return not await probe()


async def _nodeclass_gone(custom: client.CustomObjectsApi, name: str) -> bool:
    listed = await custom.list_cluster_custom_object(awslabels.AWS_GROUP, "v1", "ec2nodeclasses")
    return name not in {n["metadata"]["name"] for n in listed["items"]}
