"""The seeds' v0.x manifests on the AWS provider, against the moto world (as
tests/e2e/test_aws_walkthrough.py runs it), applied with kubectl exactly as written.

Seed 001: the Provisioner's inline provider (instance profile, subnets and security groups by
the `karpenter.sh/discovery: your-cluster-name` tag) becomes an owned EC2NodeClass that karpy
resolves in moto, and nginx x10 runs on m5.large/m5.xlarge instances labelled
karpenter.sh/provisioner-name=default. Seed 004: a Provisioner with no provider at all takes
v0.x's defaults (aws.defaultInstanceProfile from karpenter-global-settings, subnets and groups
tagged kubernetes.io/cluster/<name>); pods tolerating its taint run on m5 nodes in
us-west-2a/b carrying its label, and the empty nodes go after ttlSecondsAfterEmpty (30 s).

The moto world stands for the reader's AWS account: the tests create the instance profiles the
manifests name and tag the subnets as an EKS cluster's are tagged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from karpy.operator.demo_aws import emulator as start_emulator
from karpy_aws.apis import labels as awslabels
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    no_pods,
    running,
    running_daemon,
    scale,
)
from tests.e2e.test_legacy_seeds import SEEDS, kubectl
from tests.support.marks import CHAIN_B
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), pytest.mark.aws, CHAIN_B]


def _client(emulator: Emulator, service: str) -> Any:
    return botocore.session.get_session().create_client(
        service, region_name=emulator.ready["region"], endpoint_url=emulator.ready["endpoint"]
    )


async def _with_emulator(
    cluster_info: ClusterInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> AsyncIterator[Emulator]:
    log_path = tmp_path / "emulator.log"
    with log_path.open("w") as log:
        async with start_emulator(
            kubeconfig=cluster_info.kubeconfig, cluster_name=name, log=log
        ) as running_emulator:
            for key, value in running_emulator.environment().items():
                monkeypatch.setenv(key, value)
            yield running_emulator
    assert running_emulator.exit_code == 0, log_path.read_text()


@pytest.fixture
async def seed001_world(
    cluster_info: ClusterInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Emulator]:
    """moto for seed 001's cluster, `your-cluster-name`, with its instance profile."""
    async for running_emulator in _with_emulator(
        cluster_info, tmp_path, monkeypatch, "your-cluster-name"
    ):
        iam = _client(running_emulator, "iam")
        await asyncio.to_thread(
            iam.create_instance_profile, InstanceProfileName="your-instance-profile"
        )
        yield running_emulator


async def _instances(ec2: Any, cluster: str, states: tuple[str, ...]) -> list[dict[str, Any]]:
    answer = await asyncio.to_thread(
        ec2.describe_instances,
        Filters=[
            {"Name": f"tag:kubernetes.io/cluster/{cluster}", "Values": ["owned"]},
            {"Name": "instance-state-name", "Values": list(states)},
        ],
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


class _NotReady(list[Any]):
    """A falsy probe answer that still shows the NodeClass's conditions when a wait fails."""

    def __bool__(self) -> bool:
        return False


async def _ready_nodeclass(custom: client.CustomObjectsApi, name: str) -> Any:
    try:
        found = await custom.get_cluster_custom_object(
            awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
        )
    except client.ApiException as error:
        return _NotReady() if error.status == 404 else _NotReady([str(error)])
    conditions = found.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return found if ready else _NotReady(conditions)


async def _no_live(ec2: Any, cluster: str) -> bool:
    return not await _instances(ec2, cluster, ("pending", "running", "stopping"))


async def test_seed_001_inline_provider_runs_nginx_on_moto(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    seed001_world: Emulator,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    ec2 = _client(seed001_world, "ec2")
    code, out = await kubectl(cluster_info, "apply", "-f", str(SEEDS / "001-provisioner.yaml"))
    assert code == 0, out
    async with running_daemon(cluster_info, flags=seed001_world.flags()):
        await eventually(lambda: _ready_nodeclass(custom, "default"), within=90)
        nodeclass = await custom.get_cluster_custom_object(
            awslabels.AWS_GROUP, "v1", "ec2nodeclasses", "default"
        )
        owner = nodeclass["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Provisioner", "default")
        assert nodeclass["spec"]["instanceProfile"] == "your-instance-profile"

        code, out = await kubectl(
            cluster_info, "apply", "-n", namespace, "-f", str(SEEDS / "001-nginx.yaml")
        )
        assert code == 0, out
        pods = await eventually(running(api_client, namespace, "nginx", 10), within=300)
        launched = {
            i["PrivateDnsName"]: i for i in await _instances(ec2, "your-cluster-name", ("running",))
        }
        for node_name in {p.spec.node_name for p in pods}:
            node = await core.read_node(node_name)
            labels = node.metadata.labels
            assert labels[wk.LABEL_PROVISIONER_NAME] == "default"
            assert labels[wk.LABEL_INSTANCE_TYPE] in {"m5.large", "m5.xlarge"}
            assert labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"
            assert launched[node_name]["InstanceType"] == labels[wk.LABEL_INSTANCE_TYPE]

        # v0.x without ttlSecondsAfterEmpty never removed empty nodes; deleting the
        # Provisioner removes its NodePool and, with it, every node and instance.
        await client.AppsV1Api(api_client).delete_namespaced_deployment("nginx", namespace)
        await eventually(lambda: no_pods(api_client, namespace, "nginx"), within=60)
        code, out = await kubectl(cluster_info, "delete", "provisioner", "default", "--wait=false")
        assert code == 0, out
        await eventually(lambda: _no_live(ec2, "your-cluster-name"), within=180)


@pytest.fixture
async def seed004_world(
    cluster_info: ClusterInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Emulator]:
    """moto for an EKS-style cluster `demo`: subnets and the node group tagged
    kubernetes.io/cluster/demo, and the instance profile of its global settings."""
    async for running_emulator in _with_emulator(cluster_info, tmp_path, monkeypatch, "demo"):
        ec2, iam = _client(running_emulator, "ec2"), _client(running_emulator, "iam")
        subnets = await asyncio.to_thread(
            ec2.describe_subnets,
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["demo"]}],
        )
        groups = await asyncio.to_thread(
            ec2.describe_security_groups,
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["demo"]}],
        )
        await asyncio.to_thread(
            ec2.create_tags,
            Resources=[s["SubnetId"] for s in subnets["Subnets"]]
            + [g["GroupId"] for g in groups["SecurityGroups"]],
            Tags=[{"Key": "kubernetes.io/cluster/demo", "Value": "owned"}],
        )
        await asyncio.to_thread(
            iam.create_instance_profile, InstanceProfileName="KarpenterNodeInstanceProfile"
        )
        yield running_emulator


async def test_seed_004_provisioner_without_provider_takes_v0_defaults(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    seed004_world: Emulator,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    ec2 = _client(seed004_world, "ec2")
    code, out = await kubectl(cluster_info, "apply", "-f", str(SEEDS / "004-provisioner.yaml"))
    assert code == 0, out
    tolerating = deployment("inflate", node_selector={"billing-team": "my-team"})
    tolerating["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "example.com/special-taint", "operator": "Exists", "effect": "NoSchedule"}
    ]
    await create_deployment(api_client, namespace, tolerating)
    flags = [*seed004_world.flags(), "--default-instance-profile", "KarpenterNodeInstanceProfile"]
    async with running_daemon(cluster_info, flags=flags):
        await eventually(lambda: _ready_nodeclass(custom, "default"), within=90)
        await scale(api_client, namespace, "inflate", 5)
        pods = await eventually(running(api_client, namespace, "inflate", 5), within=300)
        nodes = {p.spec.node_name for p in pods}
        for node_name in nodes:
            node = await core.read_node(node_name)
            labels = node.metadata.labels
            assert labels[wk.LABEL_PROVISIONER_NAME] == "default"
            assert labels["billing-team"] == "my-team"
            assert labels[wk.LABEL_INSTANCE_TYPE] in {"m5.large", "m5.2xlarge"}
            assert labels[wk.LABEL_TOPOLOGY_ZONE] in {"us-west-2a", "us-west-2b"}
            assert any(t.key == "example.com/special-taint" for t in node.spec.taints or [])

        await scale(api_client, namespace, "inflate", 0)
        await eventually(lambda: no_pods(api_client, namespace, "inflate"), within=60)
        # ttlSecondsAfterEmpty: 30 -> consolidateAfter 30s, then the instances are terminated.
        await eventually(lambda: _no_live(ec2, "demo"), within=240)
        code, out = await kubectl(cluster_info, "delete", "provisioner", "default", "--wait=false")
        assert code == 0, out
