"""karpy on AWS under pressure: throttled, its cheapest pools out of capacity, its first look at
the instance types failing, and its interruption queue full of junk.

The whole daemon runs with `--provider aws` against the emulator (moto and the kubelet bridge in
a process of their own, as in the walkthrough), and the emulator's pressure layer
(`karpy_aws_emulator.pressure`) stands between them, for karpy's calls only (karpy signs with an
access key of its own; the bridge is spared):

* DescribeInstanceTypes fails (InternalError) for the first `START_FAILING` seconds;
* half of all calls are answered RequestLimitExceeded for `THROTTLED` seconds (the benchmark,
  `benchmarks/faults.py --scenario pressure`, holds it a minute);
* m5.large has no capacity anywhere, m5.xlarge no spot capacity: the cheapest pools.

Then the interruption queue receives `MESSAGES` messages, half of them malformed or repeated.

It proves: every pod runs, on the offerings that had capacity; karpy's request rate stayed
bounded while it was refused (botocore's backoff and karpy's own, no hot loop: the pressure
layer records every call); every message was deleted, the malformed ones counted as `unknown`;
karpy never stopped (a daemon failure fails the test from `running_daemon`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import uuid
from collections.abc import Sequence
from typing import Any

import aiohttp
import botocore.session
import pytest
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from karpy_aws.apis import labels as awslabels
from karpy_aws_emulator.pressure import PATH, requests_per_second
from tests.e2e.daemon import (
    create_deployment,
    deployment,
    no_nodeclaims,
    running,
    running_daemon,
    scale,
)
from tests.e2e.test_aws_walkthrough import emulator  # noqa: F401 - the fixture
from tests.support import metrics
from tests.support.marks import ONE_AT_A_TIME
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds"), pytest.mark.aws, ONE_AT_A_TIME]

log = logging.getLogger(__name__)

START_FAILING = 10.0
"""Seconds DescribeInstanceTypes fails for karpy from the start."""
THROTTLED = 30.0
"""Seconds half of karpy's calls are throttled."""
PODS = 8
MESSAGES = 100
"""Interruption messages sent: a quarter malformed, a quarter repeats of the other half."""
TYPES = ("m5.large", "m5.xlarge", "m5.2xlarge")
ZONES = ("us-west-2a", "us-west-2b")
NO_CAPACITY = ({"instanceType": "m5.large"}, {"instanceType": "m5.xlarge", "capacityType": "spot"})
MAX_MEAN_RATE = 20.0
"""Calls per second karpy may average while it is throttled: what a scale-out of a few nodes
needs is a handful; a retry loop without backoff makes hundreds (moto answers in
milliseconds)."""


def plan(caller: str) -> dict[str, Any]:
    return {
        "seed": 7,
        "rules": [
            {
                "caller": caller,
                "service": "ec2",
                "operation": "DescribeInstanceTypes",
                "code": "InternalError",
                "status": 500,
                "end": START_FAILING,
            },
            {
                "caller": caller,
                "code": "RequestLimitExceeded",
                "status": 503,
                "fraction": 0.5,
                "end": THROTTLED,
            },
        ],
        "ice": list(NO_CAPACITY),
    }


async def pressure(endpoint: str, method: str, body: Any = None) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=30)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.request(method, endpoint + PATH, json=body) as answer,
    ):
        answer.raise_for_status()
        found: dict[str, Any] = await answer.json()
        return found


def messages(region: str, count: int) -> list[str]:
    """`count` interruption messages: half well-formed spot warnings (for instances nobody
    runs), a quarter repeats of those, a quarter malformed (not JSON, JSON of no known event,
    a known event with its fields broken)."""
    good = [_spot_warning(f"i-{uuid.uuid4().hex[:17]}", region) for _ in range(count // 2)]
    repeats = good[: count // 4]
    broken = [
        "not json at all",
        json.dumps(["a", "list"]),
        json.dumps({"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning"}),
        json.dumps({"version": "0", "source": "aws.ec2", "detail": {"instance-id": 7}}),
        "{" * 200,
    ]
    junk = [broken[i % len(broken)] for i in range(count - len(good) - len(repeats))]
    return [*good, *repeats, *junk]


def _spot_warning(instance_id: str, region: str) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2026-11-27T00:00:00Z",
            "region": region,
            "resources": [f"arn:aws:ec2:{region}:123456789012:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


def _client(moto: Emulator, service: str) -> Any:
    return botocore.session.get_session().create_client(
        service, region_name=moto.ready["region"], endpoint_url=moto.ready["endpoint"]
    )


def _nodepool(name: str, intent: str) -> dict[str, Any]:
    def among(key: str, values: Sequence[str]) -> dict[str, Any]:
        return {"key": key, "operator": "In", "values": list(values)}

    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": intent}},
                "spec": {
                    "requirements": [
                        among(wk.LABEL_INSTANCE_TYPE, TYPES),
                        among(wk.LABEL_TOPOLOGY_ZONE, ZONES),
                        among(wk.LABEL_CAPACITY_TYPE, ("spot", "on-demand")),
                    ],
                    "nodeClassRef": {
                        "group": awslabels.AWS_GROUP,
                        "kind": "EC2NodeClass",
                        "name": name,
                    },
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        },
    }


async def test_karpy_places_every_pod_and_drains_its_queue_under_pressure(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    emulator: Emulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caller = f"AKIAKARPY{secrets.token_hex(6).upper()}"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", caller)
    endpoint = emulator.ready["endpoint"]
    custom = client.CustomObjectsApi(api_client)
    name = f"press-{secrets.token_hex(3)}"
    intent = f"apps-{secrets.token_hex(3)}"
    sqs, ec2 = _client(emulator, "sqs"), _client(emulator, "ec2")
    queue = f"karpy-{name}"
    url = (await asyncio.to_thread(sqs.create_queue, QueueName=queue))["QueueUrl"]
    nodeclass = emulator.nodeclass(name)
    await custom.create_cluster_custom_object(
        awslabels.AWS_GROUP, "v1", "ec2nodeclasses", nodeclass
    )
    await custom.create_cluster_custom_object(wk.GROUP, "v1", "nodepools", _nodepool(name, intent))
    await create_deployment(
        api_client, namespace, deployment("inflate", node_selector={"intent": intent})
    )
    await pressure(endpoint, "PUT", plan(caller))
    flags = [*emulator.flags(), "--provider-setting", f"interruption-queue={queue}"]
    try:
        async with running_daemon(cluster_info, flags=flags) as components:
            await scale(api_client, namespace, "inflate", PODS)
            pods = await eventually(running(api_client, namespace, "inflate", PODS), within=300)
            records = (await pressure(endpoint, "GET"))["records"]

            # Every pod runs, and on an offering that had capacity.
            described = await asyncio.to_thread(
                ec2.describe_instances,
                Filters=[{"Name": "tag:karpenter.sh/nodepool", "Values": [name]}],
            )
            instances = [i for r in described["Reservations"] for i in r["Instances"]]
            assert instances
            for instance in instances:
                spot = instance.get("InstanceLifecycle") == "spot"
                assert instance["InstanceType"] != "m5.large", instance["InstanceId"]
                assert not (instance["InstanceType"] == "m5.xlarge" and spot)
            assert {p.spec.node_name for p in pods} <= {i["PrivateDnsName"] for i in instances}

            # The pressure was felt, and answered with backoff.
            mine = [r for r in records if r["caller"] == caller]
            injected = [r for r in mine if r["injected"]]
            assert any(r["injected"] == "InternalError" for r in injected)
            assert any(r["injected"] == "RequestLimitExceeded" for r in injected)
            assert any(r["operation"] == "CreateFleet" and not r["injected"] for r in mine)
            during = [r for r in mine if r["at"] < THROTTLED]
            rates = list(requests_per_second(during))
            mean = len(during) / THROTTLED
            log.info(
                "karpy's calls while throttled: %d in %.0f s, %.1f/s mean, %d/s at most; "
                "%d answered with an error",
                len(during),
                THROTTLED,
                mean,
                max(rates),
                len(injected),
            )
            assert mean <= MAX_MEAN_RATE, (mean, rates)

            # The queue: every message deleted, the malformed ones counted as unknown.
            sent = messages(emulator.ready["region"], MESSAGES)
            for start in range(0, len(sent), 10):
                batch = sent[start : start + 10]
                await asyncio.to_thread(
                    sqs.send_message_batch,
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(batch)],
                )
            telemetry = components.telemetry

            async def all_deleted() -> bool:
                deleted = "karpenter_interruption_deleted_messages_total"
                return metrics.total(telemetry, deleted) >= MESSAGES

            await eventually(all_deleted, within=120)
            received = "karpenter_interruption_received_messages_total"
            junk = MESSAGES - MESSAGES // 2 - MESSAGES // 4
            assert metrics.total(telemetry, received) == MESSAGES
            assert metrics.total(telemetry, received, message_type="unknown") == junk
            left = await asyncio.to_thread(
                sqs.receive_message, QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=0
            )
            assert left.get("Messages", []) == []

            # Leave the cluster as found: karpy terminates what it launched.
            await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", name)
            await eventually(lambda: no_nodeclaims(api_client, name), within=120)
            await custom.delete_cluster_custom_object(
                awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
            )
    finally:
        await pressure(endpoint, "DELETE")
