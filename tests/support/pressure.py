"""One AWS-under-pressure trial, for the suite's short run and the benchmark's long one.

The whole daemon runs in this process with `--provider aws` against the emulator (moto and the
kubelet bridge in a process of their own), and the emulator's pressure layer
(`karpy_aws_emulator.pressure`) presses karpy's calls only (karpy signs with an access key of
its own; the bridge is spared): DescribeInstanceTypes fails for the first `start_failing`
seconds, half of all calls are answered RequestLimitExceeded for `throttled` seconds, and the
cheapest pools (m5.large anywhere, m5.xlarge as spot) have no capacity. `pods` pods are
scaled out meanwhile; once they run, the interruption queue receives `messages` messages, half
of them malformed or repeated. The trial returns what it saw (`Figures`); the caller judges.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Sequence
from typing import Any

import aiohttp
import attrs
import botocore.session
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
from tests.support import metrics
from tests.support.awsworld import ec2_nodepool
from tests.support.waiting import eventually

TYPES = ("m5.large", "m5.xlarge", "m5.2xlarge")
ZONES = ("us-west-2a", "us-west-2b")
NO_CAPACITY = (
    {"instanceType": "m5.large"},
    {"instanceType": "m5.xlarge", "capacityType": "spot"},
)
"""The cheapest pools of `TYPES` (karpy's estimated prices), without capacity."""
DELETED = "karpenter_interruption_deleted_messages_total"
RECEIVED = "karpenter_interruption_received_messages_total"


@attrs.frozen(kw_only=True)
class Figures:
    instances: tuple[tuple[str, bool], ...]
    """(instance type, spot) of every instance karpy launched for the pool."""
    pods_on_instances: bool
    """Every pod runs on a node of one of those instances."""
    to_running: float
    """Seconds from the scale-up to every pod Running."""
    calls: int
    """karpy's calls in the throttled window."""
    injected: dict[str, int]
    """Errors the layer answered karpy with, by code, over the whole trial."""
    launches: int
    """CreateFleet calls moto answered."""
    mean_rate: float
    """karpy's calls per second over the throttled window."""
    peak_rate: int
    """karpy's calls in its busiest second of that window."""
    received: float
    received_unknown: float
    deleted: float
    left: int
    """Messages still on the queue at the end."""
    to_drain: float
    """Seconds from the last message sent to every message deleted."""
    first_types: float | None
    """Seconds into the plan of karpy's first DescribeInstanceTypes that moto answered."""
    first_launch: float | None
    """Seconds into the plan of karpy's first CreateFleet that moto answered."""
    scaled_at: float
    """Seconds into the plan of the scale-up."""
    timeline: tuple[tuple[int, int], ...]
    """karpy's calls and the errors injected into them, per 10 s of the plan."""


def plan(caller: str, *, start_failing: float, throttled: float) -> dict[str, Any]:
    """The pressure on `caller` (the module docstring)."""
    return {
        "seed": 7,
        "rules": [
            {
                "caller": caller,
                "service": "ec2",
                "operation": "DescribeInstanceTypes",
                "code": "InternalError",
                "status": 500,
                "end": start_failing,
            },
            {
                "caller": caller,
                "code": "RequestLimitExceeded",
                "status": 503,
                "fraction": 0.5,
                "end": throttled,
            },
        ],
        "ice": list(NO_CAPACITY),
    }


async def press(endpoint: str, method: str, body: Any = None) -> dict[str, Any]:
    """Set (PUT), read (GET) or clear (DELETE) the emulator's pressure plan."""
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
    runs), a quarter repeats of those, a quarter malformed (not JSON, JSON of no known event, a
    known event with its fields broken)."""
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


def malformed(count: int) -> int:
    """How many of `messages(..., count)` are malformed."""
    return count - count // 2 - count // 4


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
    """The trial's own client, signed with a key of its own so the plan never presses it."""
    return botocore.session.get_session().create_client(
        service,
        region_name=moto.ready["region"],
        endpoint_url=moto.ready["endpoint"],
        aws_access_key_id="AKIATRIAL",
        aws_secret_access_key="trial",  # moto takes any
    )


def nodepool(name: str, intent: str) -> dict[str, Any]:
    return ec2_nodepool(
        name,
        nodeclass=name,
        intent=intent,
        requirements={
            wk.LABEL_INSTANCE_TYPE: TYPES,
            wk.LABEL_TOPOLOGY_ZONE: ZONES,
            wk.LABEL_CAPACITY_TYPE: ("spot", "on-demand"),
        },
        disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
    )


async def _drain(emulator: Emulator) -> None:
    """Read the bridge's reports, so its pipe never fills."""
    async for _ in emulator.events():
        pass


async def pressure_trial(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    emulator: Emulator,
    *,
    start_failing: float,
    throttled: float,
    pods: int,
    sent: int,
    caller: str,
) -> Figures:
    """Run the trial (the module docstring); karpy must sign its calls with `caller` (its
    AWS_ACCESS_KEY_ID). Everything karpy launched is terminated again before it returns."""
    endpoint = emulator.ready["endpoint"]
    custom = client.CustomObjectsApi(api_client)
    name = f"press-{secrets.token_hex(3)}"
    intent = f"apps-{secrets.token_hex(3)}"
    sqs, ec2 = _client(emulator, "sqs"), _client(emulator, "ec2")
    queue = f"karpy-{name}"
    url = (await asyncio.to_thread(sqs.create_queue, QueueName=queue))["QueueUrl"]
    await custom.create_cluster_custom_object(
        awslabels.AWS_GROUP, "v1", "ec2nodeclasses", emulator.nodeclass(name)
    )
    await custom.create_cluster_custom_object(wk.GROUP, "v1", "nodepools", nodepool(name, intent))
    await create_deployment(
        api_client, namespace, deployment("inflate", node_selector={"intent": intent})
    )
    await press(endpoint, "PUT", plan(caller, start_failing=start_failing, throttled=throttled))
    pressed = time.monotonic()
    flags = [*emulator.flags(), "--provider-setting", f"interruption-queue={queue}"]
    try:
        async with (
            running_daemon(cluster_info, flags=flags) as components,
            asyncio.TaskGroup() as group,
        ):
            drain = group.create_task(_drain(emulator))
            started = time.monotonic()
            scaled_at = started - pressed
            await scale(api_client, namespace, "inflate", pods)
            placed = await eventually(running(api_client, namespace, "inflate", pods), within=300)
            to_running = time.monotonic() - started
            described = await asyncio.to_thread(
                ec2.describe_instances,
                Filters=[{"Name": "tag:karpenter.sh/nodepool", "Values": [name]}],
            )
            instances = [i for r in described["Reservations"] for i in r["Instances"]]

            batch = messages(emulator.ready["region"], sent)
            for start in range(0, len(batch), 10):
                entries = [
                    {"Id": str(i), "MessageBody": body}
                    for i, body in enumerate(batch[start : start + 10])
                ]
                await asyncio.to_thread(sqs.send_message_batch, QueueUrl=url, Entries=entries)
            sent_at = time.monotonic()
            telemetry = components.telemetry

            async def all_deleted() -> bool:
                return metrics.total(telemetry, DELETED) >= sent

            # A scrape renders every series: every 2 s is plenty, and spares a loaded machine.
            await eventually(all_deleted, within=120 + sent, interval=2.0)
            to_drain = time.monotonic() - sent_at
            left = await asyncio.to_thread(
                sqs.receive_message, QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=0
            )
            records = (await press(endpoint, "GET"))["records"]
            counted = {
                "received": metrics.total(telemetry, RECEIVED),
                "received_unknown": metrics.total(telemetry, RECEIVED, message_type="unknown"),
                "deleted": metrics.total(telemetry, DELETED),
            }

            # Leave the cluster as found: karpy terminates what it launched.
            await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", name)
            await eventually(lambda: no_nodeclaims(api_client, name), within=120)
            await custom.delete_cluster_custom_object(
                awslabels.AWS_GROUP, "v1", "ec2nodeclasses", name
            )
            drain.cancel()
    finally:
        await press(endpoint, "DELETE")
    mine = [r for r in records if r["caller"] == caller]
    injected: dict[str, int] = {}
    for record in mine:
        if record["injected"]:
            injected[record["injected"]] = injected.get(record["injected"], 0) + 1
    during = [r for r in mine if r["at"] < throttled]
    return Figures(
        instances=tuple(
            (i["InstanceType"], i.get("InstanceLifecycle") == "spot") for i in instances
        ),
        pods_on_instances={p.spec.node_name for p in placed}
        <= {i["PrivateDnsName"] for i in instances},
        to_running=round(to_running, 1),
        calls=len(during),
        injected=injected,
        launches=sum(1 for r in mine if r["operation"] == "CreateFleet" and not r["injected"]),
        mean_rate=round(len(during) / throttled, 2),
        peak_rate=max(requests_per_second(during), default=0),
        **counted,
        first_types=_first(mine, "DescribeInstanceTypes"),
        first_launch=_first(mine, "CreateFleet"),
        scaled_at=round(scaled_at, 1),
        timeline=_timeline(mine),
        left=len(left.get("Messages", [])),
        to_drain=round(to_drain, 1),
    )


def _first(records: Sequence[dict[str, Any]], operation: str) -> float | None:
    answered = [r["at"] for r in records if r["operation"] == operation and not r["injected"]]
    return round(min(answered), 1) if answered else None


def _timeline(records: Sequence[dict[str, Any]]) -> tuple[tuple[int, int], ...]:
    if not records:
        return ()
    buckets = [[0, 0] for _ in range(int(max(r["at"] for r in records) // 10) + 1)]
    for record in records:
        bucket = buckets[int(record["at"] // 10)]
        bucket[0] += 1
        bucket[1] += bool(record["injected"])
    return tuple((calls, injected) for calls, injected in buckets)
