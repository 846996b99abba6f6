"""The Prometheus walk on the AWS path: what the kwok walk (test_observability.py) cannot show.

karpy runs with `--provider aws` against moto (the emulator of test_aws_walkthrough.py) and an
SQS interruption queue. Its EC2NodeClass is made while karpy runs, so its conditions appear as
transitions; one node is launched for `inflate`, and a spot interruption warning for that
node's instance is put on the queue, so karpy handles the message and replaces the node. A real
Prometheus scrapes karpy throughout: every dashboard query and every metric of docs/metrics.md
that the kwok walk leaves to the AWS path (interruption, EC2NodeClass) has a series, and so
has the interrupted NodeClaim's disrupted count, with its capacity type. At the end the
NodeClass's subnets are selected away, so its Ready condition changes and how long it held is
timed, and it is deleted, so its termination is timed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from karpy.runtime.clock import SystemClock
from karpy.runtime.reference import served_metrics
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
from tests.e2e.test_aws_walkthrough import _nodeclass, _nodepool, emulator  # noqa: F401
from tests.e2e.test_observability import (
    NOT_WALKED,
    dashboard_queries,
    query,
    scraped,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.marks import CHAIN_B
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), pytest.mark.aws, CHAIN_B]

AWS_PATH = tuple(
    name
    for name in NOT_WALKED
    if name.startswith(("karpenter_interruption_", "operator_ec2nodeclass_"))
    # A series only while the NodeClass terminates, for under a scrape here.
    and name != "operator_ec2nodeclass_termination_current_time_seconds"
)
"""The metrics the kwok walk leaves to this one."""


def _sqs(moto: Emulator) -> Any:
    return botocore.session.get_session().create_client(
        "sqs", region_name=moto.ready["region"], endpoint_url=moto.ready["endpoint"]
    )


def _spot_warning(instance_id: str, region: str) -> str:
    """EventBridge's spot interruption warning for `instance_id`, as it lands on the queue."""
    now = SystemClock().now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": now,
            "region": region,
            "resources": [f"arn:aws:ec2:{region}:123456789012:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


async def test_prometheus_sees_an_interruption_and_the_ec2nodeclass(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    emulator: Emulator,  # noqa: F811
    kube_http: KubeHTTP,
    tmp_path: Path,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    name = f"obs-{secrets.token_hex(3)}"
    intent = f"apps-{secrets.token_hex(3)}"
    sqs = _sqs(emulator)
    queue = f"karpy-{name}"
    url = (await asyncio.to_thread(sqs.create_queue, QueueName=queue))["QueueUrl"]
    dashboard = [
        q for q in dashboard_queries(not_walked=()) if q not in dashboard_queries(NOT_WALKED)
    ]
    histograms = {n for n, kind, _ in served_metrics() if kind == "histogram"}
    queries = [
        *(q for q in dashboard if any(m in q for m in AWS_PATH)),
        *(f"{m}_count" if m in histograms else m for m in AWS_PATH),
    ]
    answered: set[str] = set()

    async def unanswered(base: str) -> list[str]:
        answered.update([q for q in queries if q not in answered and await query(base, q)])
        return [q for q in queries if q not in answered]

    flags = [*emulator.flags(), "--provider-setting", f"interruption-queue={queue}"]
    async with (
        running_daemon(cluster_info, flags=flags) as components,
        scraped(components, tmp_path) as base,
    ):
        # Made while karpy runs: each of its conditions appearing is a transition.
        await custom.create_cluster_custom_object(
            awslabels.AWS_GROUP, "v1", "ec2nodeclasses", _nodeclass(name, emulator.cluster_name)
        )

        async def nodeclass_ready() -> bool:
            found = await custom.get_cluster_custom_object(
                awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
            )
            return is_ready(found)

        await eventually(nodeclass_ready, within=60, what="the EC2NodeClass Ready")
        await custom.create_cluster_custom_object(
            wk.GROUP, "v1", "nodepools", _nodepool(name, intent)
        )
        await create_deployment(
            api_client, namespace, deployment("inflate", node_selector={"intent": intent})
        )
        await scale(api_client, namespace, "inflate", 1)
        (pod,) = await eventually(running(api_client, namespace, "inflate", 1), within=240)
        (claim,) = await nodeclaims(api_client, name)
        provider_id = claim["status"]["providerID"]
        instance_id = provider_id.rsplit("/", 1)[-1]
        capacity_type = claim["metadata"]["labels"][wk.LABEL_CAPACITY_TYPE]

        await asyncio.to_thread(
            sqs.send_message,
            QueueUrl=url,
            MessageBody=_spot_warning(instance_id, emulator.ready["region"]),
        )

        async def replaced() -> bool:
            claims = await nodeclaims(api_client, name)
            return bool(claims) and all(
                c.get("status", {}).get("providerID") not in (None, provider_id) for c in claims
            )

        await eventually(replaced, within=180, what="the interrupted node replaced")
        (moved,) = await eventually(running(api_client, namespace, "inflate", 1), within=180)
        assert moved.spec.node_name != pod.spec.node_name

        async def disrupted() -> list[dict[str, Any]]:
            return await query(
                base,
                "karpenter_nodeclaims_disrupted_total"
                f'{{nodepool="{name}",reason="spot_interrupted",capacity_type="{capacity_type}"}}',
            )

        await eventually(disrupted, within=30, what="the interruption's disruption scraped")

        # The NodeClass goes last: its finalizer holds it until its AWS resources are gone.
        await client.AppsV1Api(api_client).delete_namespaced_deployment("inflate", namespace)
        await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", name)
        await eventually(lambda: no_nodeclaims(api_client, name), within=120)
        # Its subnets selected away, the NodeClass is no longer Ready: how long Ready held is
        # timed.
        kube_http.merge_patch(
            f"/apis/{awslabels.AWS_GROUP}/v1/ec2nodeclasses/{name}",
            {"spec": {"subnetSelectorTerms": [{"tags": {"karpy.test/none": "none"}}]}},
        )

        async def nodeclass_not_ready() -> bool:
            return not await nodeclass_ready()

        await eventually(nodeclass_not_ready, within=60, what="the EC2NodeClass not Ready")
        await custom.delete_cluster_custom_object(awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name)

        async def all_answered() -> bool:
            return not await unanswered(base)

        try:
            await eventually(all_answered, within=60, what="every AWS-path query answered")
        except AssertionError as error:
            raise AssertionError(f"queries with no series: {await unanswered(base)}") from error
    assert answered == set(queries)
    assert len(queries) >= 8
