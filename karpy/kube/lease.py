"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Only one replica may run controllers, or two would launch capacity for the same pods. This is the
algorithm of client-go's leaderelection package, so karpy and Go controllers agree on what a Lease
means: a follower takes over only after it has seen the same record, unchanged, for a full
leaseDurationSeconds of its own (monotonic) time, which makes clock skew between replicas harmless;
the leader renews every retry period and gives up if it cannot renew within the renew deadline; an
orderly shutdown releases the lease by clearing holderIdentity (leaseDurationSeconds 1), so the next
replica takes over at its next retry instead of waiting out the lease.

A leader that stops running for a while (a paused VM, a stopped process, a long stall) wakes up
still believing it leads, and whatever it was doing would write before its renew loop notices
the lease is gone; the follower may have taken over meanwhile. So a replica that has led fences
its own writes (`fenced`, installed on the client with `KubeClient.fence`): once its last
successful renewal began longer ago than the renew deadline, every write but the lease's own is
refused before it is sent, and the renew loop gives up and the process exits, as Karpenter's.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs

from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, KubeError, NotFoundError
from karpy.runtime.clock import Clock
from karpy.runtime.options import LeaderElectionOptions
from karpy.runtime.telemetry import Metrics

log = logging.getLogger(__name__)

JITTER_FACTOR: Final = 1.2
"""client-go's JitterFactor: acquire attempts wait retry_period x [1, 1.2)."""

# Jitter only spreads out competing replicas; it is not security-relevant.
_RNG = random.Random()  # noqa: S311


class LeadershipLostError(Exception):
    """The leader could not renew its lease within the renew deadline."""


@attrs.frozen
class LeaseRecord:
    """The leader-election fields of a Lease spec."""

    holder: str
    lease_duration: int
    acquire_time: datetime.datetime | None
    renew_time: datetime.datetime | None
    transitions: int

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration,
            "acquireTime": _micro_time(self.acquire_time),
            "renewTime": _micro_time(self.renew_time),
            "leaseTransitions": self.transitions,
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> LeaseRecord:
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


class LeaderElector:
    """Acquires and keeps one Lease for this replica.

    `run()` never returns: it acquires, sets `leading`, then renews until cancelled (shutdown) or
    until renewal fails for longer than the renew deadline (raises `LeadershipLostError`). After
    cancelling it, call `release()` so the next replica takes over at once.
    """

    def __init__(
        self,
        client: KubeClient,
        options: LeaderElectionOptions,
        *,
        clock: Clock,
        metrics: Metrics,
        monotonic: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`clock` stamps the Lease (acquireTime, renewTime); `monotonic` (seconds; the running
        loop's clock by default) times how long a record has been seen unchanged, and `sleep`
        waits between attempts. Both are injectable, so how long the elector waits can be proven
        in its own time, not timed on a machine that may be loaded."""
        if not options.identity:
            msg = "LeaderElector: options.identity must not be empty"
            raise ValueError(msg)
        self._client = client
        self._options = options
        self._clock = clock
        self._metrics = metrics
        self._monotonic = monotonic
        self._sleep = sleep
        self._path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{options.namespace}/leases/{options.name}"
        )
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._led = False
        self._renewed_at = 0.0
        """When (this loop's clock) the last successful acquisition or renewal began."""
        self._taken_from: dict[str, Any] = {}
        """Whose lease the last acquisition took, and how long it had looked unchanged: logged,
        so a takeover shows whether it waited a lease out or took a released one."""
        self.leading = asyncio.Event()
        self._labels = {"name": options.name}
        self._fields = {
            "lease": f"{options.namespace}/{options.name}",
            "identity": options.identity,
        }

    @property
    def identity(self) -> str:
        return self._options.identity

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    def fenced(self, method: str, path: str) -> str | None:
        """Why a write to `path` must not be sent now, or None: for `KubeClient.fence`. A
        replica that never led writes freely (it runs no controllers); one that has led writes
        only while its lease is fresh, and the lease's own writes always go."""
        if not self._led or path in (self._path, self._path.rsplit("/", 1)[0]):
            return None
        age = self._now() - self._renewed_at
        if self.leading.is_set() and age < self._options.renew_deadline:
            return None
        return (
            f"leader lease {self._fields['lease']} last renewed {age:.1f}s ago, beyond the "
            f"{self._options.renew_deadline}s renew deadline: another replica may lead"
        )

    async def run(self) -> None:
        """Acquire, then renew forever. Raises LeadershipLostError when renewal fails too long."""
        self._metrics.leader_election_leader.set(0, self._labels)
        log.info("attempting to acquire leader lease", extra=self._fields)
        while True:
            if await self._try_acquire_or_renew():
                break
            await self._sleep(self._options.retry_period * _RNG.uniform(1.0, JITTER_FACTOR))
        self._led = True
        self.leading.set()
        self._metrics.leader_election_leader.set(1, self._labels)
        self._metrics.leader_election_transitions_total.add(1, self._labels)
        log.info("successfully acquired lease", extra={**self._fields, **self._taken_from})
        try:
            await self._renew_forever()
        finally:
            self.leading.clear()
            self._metrics.leader_election_leader.set(0, self._labels)

    async def _renew_forever(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._options.renew_deadline):
                    while True:
                        if await self._try_acquire_or_renew():
                            break
                        await self._sleep(self._options.retry_period)
            except TimeoutError as error:
                log.error("failed to renew lease", extra=self._fields)
                msg = (
                    f"leader election lost: lease {self._fields['lease']} not renewed within "
                    f"{self._options.renew_deadline}s"
                )
                raise LeadershipLostError(msg) from error
            await self._sleep(self._options.retry_period)

    def _now(self) -> float:
        return (
            self._monotonic() if self._monotonic is not None else asyncio.get_running_loop().time()
        )

    async def release(self) -> bool:
        """Give the lease up if this replica holds it. Returns True when it was released."""
        if self._observed is None or self._observed.holder != self.identity:
            return False
        try:
            lease = await self._client.request("GET", self._path)
            current = LeaseRecord.from_spec(lease.get("spec") or {})
            if current.holder != self.identity:
                return False
            now = self._clock.now()
            released = LeaseRecord(
                holder="",
                lease_duration=1,
                acquire_time=now,
                renew_time=now,
                transitions=current.transitions,
            )
            await self._put(lease, released)
        except KubeError as error:
            log.error("failed to release lease", extra={**self._fields, "error": str(error)})
            return False
        self._observed = released
        self.leading.clear()
        self._metrics.leader_election_leader.set(0, self._labels)
        log.info("released lease", extra=self._fields)
        return True

    async def _try_acquire_or_renew(self) -> bool:
        now = self._clock.now()
        loop_now = self._now()
        duration = max(1, round(self._options.lease_duration))
        try:
            lease = await self._client.request("GET", self._path)
        except NotFoundError:
            return await self._create(now, duration)
        except KubeError as error:
            log.warning("error retrieving lease", extra={**self._fields, "error": str(error)})
            return False
        old = LeaseRecord.from_spec(lease.get("spec") or {})
        if old != self._observed:
            self._observed, self._observed_at = old, loop_now
        held_by_other = old.holder not in {"", self.identity}
        if held_by_other and self._observed_at + old.lease_duration > loop_now:
            return False
        mine = old.holder == self.identity
        unchanged_for = loop_now - self._observed_at
        record = LeaseRecord(
            holder=self.identity,
            lease_duration=duration,
            acquire_time=old.acquire_time if mine else now,
            renew_time=now,
            transitions=old.transitions if mine else old.transitions + 1,
        )
        try:
            await self._put(lease, record)
        except ConflictError:
            return False
        except KubeError as error:
            log.warning("error updating lease", extra={**self._fields, "error": str(error)})
            return False
        self._observed, self._observed_at = record, self._now()
        self._renewed_at = loop_now
        if not mine:
            self._taken_from = {
                "previous_holder": old.holder,
                "unchanged_for_seconds": round(unchanged_for, 3),
            }
        return True

    async def _create(self, now: datetime.datetime, duration: int) -> bool:
        began = self._now()
        record = LeaseRecord(
            holder=self.identity,
            lease_duration=duration,
            acquire_time=now,
            renew_time=now,
            transitions=0,
        )
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self._options.name, "namespace": self._options.namespace},
            "spec": record.to_spec(),
        }
        collection = self._path.rsplit("/", 1)[0]
        try:
            await self._client.request("POST", collection, body=body)
        except KubeError as error:
            # A conflict means another replica created it first; anything else is retried too.
            log.debug("could not create lease", extra={**self._fields, "error": str(error)})
            return False
        self._observed, self._observed_at = record, self._now()
        self._renewed_at = began
        return True

    async def _put(self, lease: Mapping[str, Any], record: LeaseRecord) -> None:
        metadata = lease.get("metadata") or {}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self._options.name,
                "namespace": self._options.namespace,
                "resourceVersion": metadata.get("resourceVersion", ""),
            },
            "spec": record.to_spec(),
        }
        await self._client.request("PUT", self._path, body=body)


def _micro_time(value: datetime.datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
