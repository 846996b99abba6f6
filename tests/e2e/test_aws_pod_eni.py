"""Security Groups for Pods end to end: a pod asking for `vpc.amazonaws.com/pod-eni` runs on an
ENI-trunking instance that karpy launched in moto, not on the cheaper type that cannot trunk.

The whole daemon runs with `--provider aws` against moto and the kubelet bridge (as in
test_aws_walkthrough). The NodePool allows t3.medium (cheaper, no ENI trunking) and m5.large
(9 branch ENIs); the pod's request rules t3.medium out, so karpy launches m5.large, whose Node
(registered by the bridge as the VPC resource controller would advertise it) offers the pod ENIs
kube-scheduler binds the pod to. The EC2NodeClass names its instances (`tags: {Name: ...}`, as
seed 003's AWSNodeTemplate does): once the node registered and karpy's tagging loop marked the
NodeClaim, the instance still carries that Name.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from karpy_aws.apis import labels as awslabels
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    is_ready,
    no_nodeclaims,
    nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.e2e.test_aws_walkthrough import _ec2, _instances, _nodeclass, _nodeclass_gone
from tests.e2e.test_aws_walkthrough import emulator as emulator  # the fixture, shared
from tests.support.marks import ONE_AT_A_TIME
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    pytest.mark.aws,
    ONE_AT_A_TIME,
]

POD_ENI = "vpc.amazonaws.com/pod-eni"
TAGGED = "karpenter.k8s.aws/tagged"


def _nodepool(name: str, intent: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": intent}},
                "spec": {
                    "requirements": [
                        {
                            "key": wk.LABEL_INSTANCE_TYPE,
                            "operator": "In",
                            "values": ["t3.medium", "m5.large"],
                        },
                        {"key": wk.LABEL_TOPOLOGY_ZONE, "operator": "In", "values": ["us-west-2a"]},
                        {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    ],
                    "nodeClassRef": {
                        "group": awslabels.AWS_GROUP,
                        "kind": "EC2NodeClass",
                        "name": name,
                    },
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5s"},
        },
    }


async def test_a_pod_eni_pod_runs_on_a_trunking_instance(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str, emulator: Emulator
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    name = f"eni-{secrets.token_hex(3)}"
    intent = f"sgp-{secrets.token_hex(3)}"
    nodeclass = _nodeclass(name, emulator.cluster_name)
    nodeclass["spec"]["tags"] = {"Name": "karpenter-sgp/default", "team": "sgp"}
    await custom.create_cluster_custom_object(
        awslabels.AWS_GROUP, "v1", "ec2nodeclasses", nodeclass
    )
    await custom.create_cluster_custom_object(wk.GROUP, "v1", "nodepools", _nodepool(name, intent))
    body = deployment("sgp", node_selector={"intent": intent}, cpu="100m", memory="128Mi")
    resources = body["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][POD_ENI] = "1"
    resources["limits"] = {POD_ENI: "1"}  # an extended resource cannot be overcommitted
    await create_deployment(api_client, namespace, body)

    async def nodeclass_ready() -> bool:
        found = await custom.get_cluster_custom_object(
            awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
        )
        return is_ready(found)

    async with running_daemon(cluster_info, flags=emulator.flags()):
        await eventually(nodeclass_ready, within=60)
        await scale(api_client, namespace, "sgp", 1)
        (pod,) = await eventually(running(api_client, namespace, "sgp", 1), within=240)
        node = await core.read_node(pod.spec.node_name)
        assert node.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "m5.large"
        assert node.status.allocatable[POD_ENI] == "9"
        launched = await _instances(_ec2(emulator), emulator.cluster_name, ("running",))
        assert {i["InstanceType"] for i in launched} == {"m5.large"}

        async def tagged() -> list[dict[str, Any]]:
            claims = await nodeclaims(api_client, name)
            marked = [
                c for c in claims if c["metadata"].get("annotations", {}).get(TAGGED) == "true"
            ]
            return marked if marked and len(marked) == len(claims) else []

        (claim,) = await eventually(tagged, within=90)
        (instance,) = await _instances(_ec2(emulator), emulator.cluster_name, ("running",))
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        assert tags["Name"] == "karpenter-sgp/default"  # the user's, not the node's name
        assert tags["team"] == "sgp"
        assert tags["karpenter.sh/nodeclaim"] == claim["metadata"]["name"]
        assert tags["eks:eks-cluster-name"] == emulator.cluster_name

        await client.AppsV1Api(api_client).delete_namespaced_deployment("sgp", namespace)
        await eventually(lambda: no_nodeclaims(api_client, name), within=120)
        await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", name)
        await custom.delete_cluster_custom_object(awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name)
        await eventually(lambda: _nodeclass_gone(custom, name), within=60)
