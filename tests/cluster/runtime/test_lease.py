"""LeaderElector in-process against a real Lease, with short timings to keep the tests quick.

These pin client-go's semantics: a silent holder is taken over only after a full lease duration
of unchanged observations; a leader that cannot renew within the renew deadline gives up; a
released lease is taken at the next attempt.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, FencedError
from karpy.kube.lease import JITTER_FACTOR, LeaderElector, LeadershipLostError, LeaseRecord
from karpy.localcluster import ClusterInfo
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import LeaderElectionOptions
from karpy.runtime.ratelimit import TokenBucket
from karpy.runtime.telemetry import Telemetry
from tests.support.marks import CHAIN_B
from tests.support.waiting import eventually

LEASE_DURATION = 3.0
RETRY_PERIOD = 0.5

pytestmark = CHAIN_B  # several electors on short retry periods


def options(namespace: str, name: str, identity: str) -> LeaderElectionOptions:
    return LeaderElectionOptions(
        name=name,
        namespace=namespace,
        identity=identity,
        lease_duration=LEASE_DURATION,
        renew_deadline=2.0,
        retry_period=RETRY_PERIOD,
    )


def lease_path(namespace: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"


async def read_record(kube: KubeClient, namespace: str, name: str) -> LeaseRecord:
    lease = await kube.request("GET", lease_path(namespace, name))
    return LeaseRecord.from_spec(lease["spec"])


async def write_record(
    kube: KubeClient, namespace: str, name: str, record: LeaseRecord, *, create: bool
) -> None:
    body: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": record.to_spec(),
    }
    if create:
        path = lease_path(namespace, name).rsplit("/", 1)[0]
        await kube.request("POST", path, body=body)
        return
    # The elector renews concurrently; retry the optimistic write until it lands.
    for _ in range(20):
        current = await kube.request("GET", lease_path(namespace, name))
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            await kube.request("PUT", lease_path(namespace, name), body=body)
        except ConflictError:
            continue
        return
    raise AssertionError(f"could not overwrite lease {name}: conflicts kept winning")


class ElectorTime:
    """An elector's own monotonic clock, which moves only by the elector's sleeps (each waits
    for real only when `real`, so that other writers of the Lease interleave as they would).

    The time a request takes does not count: a wait measured on it is the sum of the retry
    periods the elector chose to sleep, which is what the algorithm decides, however loaded the
    machine is.
    """

    def __init__(self, *, real: bool) -> None:
        self.now = 0.0
        self._real = real

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds if self._real else 0)
        self.now += seconds


def elector(
    kube: KubeClient,
    telemetry: Telemetry,
    namespace: str,
    name: str,
    identity: str,
    time: ElectorTime,
) -> LeaderElector:
    return LeaderElector(
        kube,
        options(namespace, name, identity),
        clock=SystemClock(),
        metrics=telemetry.metrics,
        monotonic=time.time,
        sleep=time.sleep,
    )


def held_by(holder: str, *, duration: int, transitions: int = 0) -> LeaseRecord:
    now = SystemClock().now()
    return LeaseRecord(
        holder=holder,
        lease_duration=duration,
        acquire_time=now,
        renew_time=now,
        transitions=transitions,
    )


async def test_a_silent_holder_is_taken_over_after_a_full_lease_duration(
    kube: KubeClient, telemetry: Telemetry, namespace: str
) -> None:
    name = f"lease-{secrets.token_hex(3)}"
    await write_record(
        kube, namespace, name, held_by("ghost", duration=int(LEASE_DURATION)), create=True
    )
    # The ghost never renews: the elector's sleeps need not wait for anyone.
    time = ElectorTime(real=False)
    candidate = elector(kube, telemetry, namespace, name, "a", time)
    async with asyncio.TaskGroup() as group:
        running = group.create_task(candidate.run())
        async with asyncio.timeout(30):
            await candidate.leading.wait()
        running.cancel()
    # It first saw the record at 0, and takes over at its first attempt a full lease duration
    # later, each attempt a jittered retry period after the last.
    assert LEASE_DURATION <= time.now < LEASE_DURATION + JITTER_FACTOR * RETRY_PERIOD
    record = await read_record(kube, namespace, name)
    assert (record.holder, record.transitions) == ("a", 1)


async def test_leadership_is_lost_when_the_lease_cannot_be_renewed(
    kube: KubeClient, telemetry: Telemetry, namespace: str
) -> None:
    name = f"lease-{secrets.token_hex(3)}"
    elector = LeaderElector(
        kube, options(namespace, name, "a"), clock=SystemClock(), metrics=telemetry.metrics
    )

    async def steal_once_leading() -> None:
        await elector.leading.wait()
        # Another holder with a long lease: every renewal now fails until the renew deadline.
        await write_record(
            kube, namespace, name, held_by("thief", duration=60, transitions=5), create=False
        )

    async def lead_then_lose() -> None:
        async with asyncio.timeout(15), asyncio.TaskGroup() as group:
            group.create_task(elector.run())
            group.create_task(steal_once_leading())

    with pytest.raises(ExceptionGroup) as caught:
        await lead_then_lose()
    assert caught.value.subgroup(LeadershipLostError) is not None
    assert not elector.is_leader
    assert 'leader_election_master_status{name="' + name + '"} 0' in telemetry.prometheus_text()
    assert (await read_record(kube, namespace, name)).holder == "thief"


async def test_a_released_lease_is_taken_at_the_next_attempt(
    kube: KubeClient, telemetry: Telemetry, namespace: str
) -> None:
    name = f"lease-{secrets.token_hex(3)}"
    first = elector(kube, telemetry, namespace, name, "a", ElectorTime(real=True))
    time = ElectorTime(real=True)
    second = elector(kube, telemetry, namespace, name, "b", time)
    async with asyncio.TaskGroup() as group:
        leading = group.create_task(first.run())
        async with asyncio.timeout(10):
            await first.leading.wait()
        following = group.create_task(second.run())

        async def tried_thrice() -> bool:
            return time.now >= 3 * RETRY_PERIOD

        await eventually(tried_thrice, within=30, interval=0.05)
        assert (first.is_leader, second.is_leader) == (True, False)
        leading.cancel()
        await asyncio.wait([leading])
        assert await first.release()
        released = await read_record(kube, namespace, name)
        assert (released.holder, released.lease_duration) == ("", 1)
        handed_at = time.now
        async with asyncio.timeout(10):
            await second.leading.wait()
        handover = time.now - handed_at
        following.cancel()
    # Released, so not waited out: taken at the attempt after the release, whose sleep (the one
    # under way, or the next when an attempt raced the release) is one jittered retry period.
    assert handover <= JITTER_FACTOR * RETRY_PERIOD
    record = await read_record(kube, namespace, name)
    assert (record.holder, record.transitions) == ("b", 1)
    assert not await first.release()  # no longer the holder: nothing to release


async def test_a_leader_whose_lease_may_have_lapsed_writes_nothing(
    cluster_info: ClusterInfo, kube: KubeClient, telemetry: Telemetry, namespace: str
) -> None:
    """A leader that was stopped for a while (SIGSTOP, a paused VM) wakes up still leading in
    its own eyes; past the renew deadline since its last renewal began, its writes are refused
    before they are sent (the lease's own still go, so it can renew or release)."""
    name = f"lease-{secrets.token_hex(3)}"
    fenced = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    time = ElectorTime(real=True)
    leader = elector(fenced, telemetry, namespace, name, "a", time)
    fenced.fence(leader.fenced)
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"

    def configmap(suffix: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-{suffix}"}}

    try:
        # Before it has led, a replica writes freely (it runs no controllers).
        await fenced.request("POST", configmaps, body=configmap("follower"))
        async with asyncio.TaskGroup() as group:
            running = group.create_task(leader.run())
            async with asyncio.timeout(30):
                await leader.leading.wait()
            await fenced.request("POST", configmaps, body=configmap("leading"))
            # Its clock jumps past the renew deadline, as after a stop: it still believes it
            # leads, but writes nothing (the check comes before the request is sent).
            time.now += 2.0
            assert leader.is_leader
            with pytest.raises(FencedError):
                await fenced.request("POST", configmaps, body=configmap("stale"))
            assert leader.fenced("PUT", lease_path(namespace, name)) is None
            running.cancel()
        # Once it no longer leads, it writes nothing either.
        with pytest.raises(FencedError):
            await fenced.request("POST", configmaps, body=configmap("lost"))
    finally:
        await fenced.close()
    names = {item["metadata"]["name"] for item in (await kube.request("GET", configmaps))["items"]}
    assert {f"{name}-follower", f"{name}-leading"} <= names
    assert not {f"{name}-stale", f"{name}-lost"} & names


async def test_a_write_that_waited_for_the_rate_limiter_through_a_stop_is_fenced(
    cluster_info: ClusterInfo, kube: KubeClient, telemetry: Telemetry, namespace: str
) -> None:
    """The fence judges a write when it goes out, after the client's rate limiter: one that
    was queued there when the process stopped must not be sent once it wakes past the renew
    deadline (the failover test caught one such status patch)."""
    name = f"lease-{secrets.token_hex(3)}"
    bucket_time = ElectorTime(real=False)
    holding = False
    queued = asyncio.Event()
    release = asyncio.Event()

    async def held_sleep(seconds: float) -> None:
        if holding:  # the stop: whatever waits in the bucket waits until the test says
            queued.set()
            await release.wait()
        bucket_time.now += seconds

    limiter = TokenBucket(rate=1.0, burst=1, now=bucket_time.time, sleep=held_sleep)
    fenced = await KubeClient.connect(
        cluster_info.kubeconfig, request_timeout=10.0, limiter=limiter
    )
    time = ElectorTime(real=True)
    leader = elector(fenced, telemetry, namespace, name, "a", time)
    fenced.fence(leader.fenced)
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-queued"}}
    try:
        async with asyncio.TaskGroup() as group:
            running = group.create_task(leader.run())
            async with asyncio.timeout(30):
                await leader.leading.wait()
                # The bucket has no token to spare (it refills only as its clock moves), so
                # this write queues there.
                holding = True
                write = asyncio.create_task(fenced.request("POST", configmaps, body=body))
                await queued.wait()
            time.now += 2.0  # the stop: past the renew deadline while the write waited
            release.set()
            with pytest.raises(FencedError):
                await write
            running.cancel()
    finally:
        await fenced.close()
    names = {i["metadata"]["name"] for i in (await kube.request("GET", configmaps))["items"]}
    assert f"{name}-queued" not in names
