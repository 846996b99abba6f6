"""Crash and outage trials: karpy as its own process on a local cluster, killed or cut off mid
scale-out, and what it left behind.

A trial installs a NodePool (small instance types, so a scale-out needs many NodeClaims) and a
pause Deployment, starts `karpy run` as a child process, scales the Deployment up and then
injects one fault: SIGKILL of the daemon (restarted at once), or kube-apiserver stopped for a
while (karpy keeps running). It then samples the cluster until every pod runs and reports:

* NodeClaims alive when all pods run, and every NodeClaim name seen during the trial;
* NodeClaims deleted before every pod ran (a scale-out deletes none: each is a node disrupted
  while pods were still on their way to it);
* instances (kwok: managed Nodes; AWS: the cluster's live EC2 instances) and, when all pods
  run, how many no NodeClaim owns (duplicates) and how many a NodeClaim launched but has not
  recorded yet (unrecorded: a kill between launch and status write leaves that, and the
  restarted process records the same instance); and how many no NodeClaim holds by providerID
  after garbage collection had its chance (leaks);
* pods not Running at the end, and seconds from the fault (the restart, or the apiserver's
  return) to all Running.

The same code serves fixed-moment trials and the sweep
(`benchmarks/faults.py`, many seeded random moments, before/after tables). `karpy_src` runs
another checkout of karpy (a source tree put first on PYTHONPATH), for "before" figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from karpy.apis.v1 import labels as wk
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError, NotFoundError
from karpy.kube.install import apply, scale
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.localcluster import LocalCluster, PortInUseError
from karpy_aws.apis import labels as awslabels
from karpy_kwok.apis import labels as kwoklabels
from tests.support.probes import wait_ready
from tests.support.processes import stop as stop_process
from tests.support.waiting import eventually

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
NODECLAIM_UID_ANNOTATION = "karpenter.kwok.sh/nodeclaim-uid"
"""The UID of the NodeClaim a kwok Node was launched for (absent on trees before it)."""
SAMPLE_INTERVAL = 0.5
RUNNING_LIMIT = 240.0
"""Seconds a trial waits for every pod to run before it reports what it has."""
GC_WAIT = 75.0
"""Seconds given to garbage collection before leaks are counted (AWS collects an unowned
instance 30 s after launch, on a 10 s period at first)."""


@attrs.frozen(kw_only=True)
class Setup:
    """Where and how trials run."""

    kubeconfig: Path
    namespace: str
    name: str
    """The NodePool's, NodeClass's and Deployment's name."""
    provider: str = "kwok"
    flags: Sequence[str] = ()
    """Further `karpy run` flags (the aws provider's settings)."""
    environment: Mapping[str, str] = attrs.field(factory=dict)
    nodeclass: Mapping[str, Any] | None = None
    """The NodeClass manifest; None: a KWOKNodeClass called `name`."""
    pods: int = 50
    cpu: str = "1"
    memory: str = "1Gi"
    karpy_src: Path | None = None
    log_dir: Path = attrs.field(factory=lambda: Path(tempfile.gettempdir()))
    instances: Callable[[], Any] | None = None
    """For the AWS path: an async callable returning the live instances, each as (providerID,
    the NodeClaim its `karpenter.sh/nodeclaim` tag names, or None)."""

    def nodeclass_manifest(self) -> dict[str, Any]:
        if self.nodeclass is not None:
            return {**self.nodeclass, "metadata": {"name": self.name}}
        return {
            "apiVersion": f"{kwoklabels.KWOK_GROUP}/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": self.name},
        }

    def nodepool_manifest(self, consolidate_after: str) -> dict[str, Any]:
        nodeclass = self.nodeclass_manifest()
        group = nodeclass["apiVersion"].split("/")[0]
        cpu_label = (
            kwoklabels.LABEL_KWOK_INSTANCE_CPU
            if self.provider == "kwok"
            else awslabels.LABEL_AWS_INSTANCE_CPU
        )
        return {
            "apiVersion": f"{wk.GROUP}/v1",
            "kind": "NodePool",
            "metadata": {"name": self.name},
            "spec": {
                "template": {
                    "metadata": {"labels": {"fault-trial": self.name}},
                    "spec": {
                        "requirements": [
                            {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                            {"key": cpu_label, "operator": "Lt", "values": ["5"]},
                            {
                                "key": wk.LABEL_CAPACITY_TYPE,
                                "operator": "In",
                                "values": [wk.CAPACITY_TYPE_ON_DEMAND],
                            },
                        ],
                        "nodeClassRef": {
                            "group": group,
                            "kind": nodeclass["kind"],
                            "name": self.name,
                        },
                    },
                },
                "disruption": {
                    "consolidationPolicy": "WhenEmpty",
                    "consolidateAfter": consolidate_after,
                },
            },
        }

    def deployment_manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": self.name}},
                "template": {
                    "metadata": {"labels": {"app": self.name}},
                    "spec": {
                        "nodeSelector": {"fault-trial": self.name},
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "pause",
                                "image": PAUSE_IMAGE,
                                "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}},
                            }
                        ],
                    },
                },
            },
        }


@attrs.frozen(kw_only=True)
class Trial:
    """What one trial left behind (see the module docstring)."""

    label: str
    nodeclaims: int
    nodeclaims_seen: int
    deleted_before_running: int
    instances: int
    duplicates: int
    leaks: int
    unrecorded: int = 0
    pending: int
    to_running: float | None
    duplicate_log_lines: int = 0


class Karpy:
    """`karpy run` as a child process, logging to a file."""

    def __init__(self, setup: Setup, *, leader_election: str | None, log: Path) -> None:
        self._setup = setup
        self._election = leader_election
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []
        """One log per process started, in order."""
        self.restarts = 0
        """Times the process exited on its own and was started again."""

    def start(self) -> None:
        setup = self._setup
        election = (
            ["--disable-leader-election"]
            if self._election is None
            else ["--leader-election-namespace", self._election]
        )
        env = {**os.environ, **setup.environment, "LOG_LEVEL": "info"}
        if setup.karpy_src is not None:
            src = setup.karpy_src
            paths = [src, src / "providers" / "aws", src / "providers" / "kwok"]
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
        flags = list(setup.flags) if setup.provider != "kwok" else ["--provider", "kwok"]
        log = self._log.with_name(f"{self._log.stem}-{len(self.logs) + 1}{self._log.suffix}")
        self.logs.append(log)
        with log.open("w") as sink:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "karpy",
                    "run",
                    "--kubeconfig",
                    str(setup.kubeconfig),
                    *election,
                    "--bind-address",
                    "127.0.0.1",
                    "--metrics-port",
                    "0",
                    "--health-probe-port",
                    "0",
                    *flags,
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(setup.karpy_src or Path.cwd()),
            )

    async def wait_ready(self) -> None:
        """Wait until the process last started answers /readyz: its informers have listed, so
        what the trial does next is seen by a process that is watching."""
        await wait_ready(self.logs[-1])

    def keep_running(self) -> None:
        """Start the process again if it exited, as its Deployment would (karpy exits when it
        loses its leader lease, as Karpenter does)."""
        if self._process is not None and self._process.poll() is not None:
            self._process = None
            self.restarts += 1
            self.start()

    def kill(self) -> None:
        """SIGKILL: nothing of the process runs after this."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=30)
            self._process = None

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process, grace=60)
            self._process = None


LIFECYCLE_MESSAGES = (
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
    "disrupting node(s)",
)


def duplicate_log_lines(log: Path, messages: Sequence[str] = LIFECYCLE_MESSAGES) -> int:
    """Lines beyond the first for one (message, nodeclaim) pair in one process's JSON log."""
    import orjson

    counts: dict[tuple[str, str], int] = {}
    for line in log.read_bytes().splitlines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict) or record.get("message") not in messages:
            continue
        key = (str(record.get("message")), str(record.get("nodeclaim", "")))
        counts[key] = counts.get(key, 0) + 1
    return sum(n - 1 for n in counts.values() if n > 1)


class Sampler:
    """Polls NodeClaims, Nodes and the Deployment's pods, remembering every NodeClaim seen."""

    def __init__(self, client: KubeClient, setup: Setup) -> None:
        self._client = client
        self._setup = setup
        self.seen: set[str] = set()
        self.deleted_early: set[str] = set()

    async def claims(self) -> list[Any]:
        listed = await self._client.list(NODECLAIMS)
        return [
            i.obj
            for i in listed.items
            if i.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == self._setup.name
        ]

    async def running(self) -> tuple[int, int]:
        listed = await self._client.list(PODS, namespace=self._setup.namespace)
        mine = [p.obj for p in listed.items if p.obj.metadata.labels.get("app") == self._setup.name]
        running = sum(1 for p in mine if p.status is not None and p.status.phase == "Running")
        return running, len(mine)

    async def sample(self) -> tuple[int, int]:
        """(pods running, pods); records NodeClaims seen and any deleted while pods wait."""
        claims = await self.claims()
        running, total = await self.running()
        names = {c.metadata.name or "" for c in claims}
        waiting = running < self._setup.pods
        if waiting:
            gone = self.seen - names
            self.deleted_early |= gone
            self.deleted_early |= {
                c.metadata.name or "" for c in claims if c.metadata.deletion_timestamp is not None
            }
        self.seen |= names
        return running, total

    async def instances(self) -> tuple[int, int, int]:
        """(live instances, instances no NodeClaim owns, instances whose NodeClaim launched
        them but has not recorded their providerID yet).

        An instance is owned when a NodeClaim holds its providerID. One that none holds is an
        unrecorded launch when it names a NodeClaim that has no providerID yet (a kwok Node is
        named after its NodeClaim and carries its UID; an EC2 instance is tagged with its
        NodeClaim's name at launch), at most one per NodeClaim: a process killed between
        launching and writing the status leaves that, and the next one records the same
        instance. Anything else is a duplicate.
        """
        claims = await self.claims()
        owned = {c.status.provider_id for c in claims if c.status.provider_id}
        unrecorded_claims = {
            c.metadata.name: c.metadata.uid for c in claims if not c.status.provider_id
        }
        found: list[tuple[str, str | None]]
        if self._setup.instances is not None:
            found = [
                (provider_id, claim if claim in unrecorded_claims else None)
                for provider_id, claim in await self._setup.instances()
            ]
        else:
            listed = await self._client.list(NODES)
            found = []
            for item in listed.items:
                node = item.obj
                if node.metadata.labels.get(wk.LABEL_NODEPOOL) != self._setup.name:
                    continue
                name = node.metadata.name or ""
                uid = node.metadata.annotations.get(NODECLAIM_UID_ANNOTATION)
                claimed = name in unrecorded_claims and uid in (None, unrecorded_claims[name])
                found.append((node.spec.provider_id or "", name if claimed else None))
        duplicates = unrecorded = 0
        for provider_id, claim in found:
            if provider_id in owned:
                continue
            if claim is not None and claim in unrecorded_claims:
                del unrecorded_claims[claim]
                unrecorded += 1
            else:
                duplicates += 1
        return len(found), duplicates, unrecorded


async def _sleep_sampling(sampler: Sampler, karpy: Karpy, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        karpy.keep_running()
        # The apiserver may be away: the fault under test.
        with contextlib.suppress(KubeError, OSError, TimeoutError):
            await sampler.sample()
        await asyncio.sleep(min(SAMPLE_INTERVAL, max(0.0, end - loop.time())))


async def prepare(client: KubeClient, setup: Setup, *, consolidate_after: str) -> None:
    """The NodeClass, the NodePool and the (empty) Deployment."""
    async with asyncio.timeout(60):
        await apply(client, setup.nodeclass_manifest())
        await apply(client, setup.nodepool_manifest(consolidate_after))
        await apply(client, setup.deployment_manifest())


async def reset(client: KubeClient, setup: Setup, karpy: Karpy) -> None:
    """Scale to 0 and remove every NodeClaim (karpy, still running, finalizes them); then stop
    karpy and wait for the instances to go."""
    await scale(client, setup.deployment_manifest(), 0)
    sampler = Sampler(client, setup)
    async with asyncio.timeout(180):
        while claims := await sampler.claims():
            karpy.keep_running()
            for claim in claims:
                if claim.metadata.deletion_timestamp is None:
                    with contextlib.suppress(NotFoundError):
                        await client.delete(NODECLAIMS, claim.metadata.name or "")
            await asyncio.sleep(1.0)

    async def no_instances() -> bool:
        return not (await sampler.instances())[0]

    async def no_pods() -> bool:
        return not (await sampler.running())[1]

    await eventually(no_instances, within=180, interval=1.0, what="no instances left")
    await eventually(no_pods, within=120, interval=0.5, what="no pods left")
    karpy.stop()


async def _until_running(
    sampler: Sampler, setup: Setup, karpy: Karpy, since: float
) -> tuple[float | None, int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RUNNING_LIMIT
    running = 0
    while loop.time() < deadline:
        karpy.keep_running()
        try:
            running, _ = await sampler.sample()
        except (KubeError, OSError, TimeoutError):
            running = 0
        if running >= setup.pods:
            return time.monotonic() - since, 0
        await asyncio.sleep(SAMPLE_INTERVAL)
    return None, setup.pods - running


async def _finish(
    client: KubeClient,
    setup: Setup,
    sampler: Sampler,
    *,
    label: str,
    to_running: float | None,
    pending: int,
    logs: Sequence[Path],
) -> Trial:
    claims = await sampler.claims()
    instances, duplicates, unrecorded = await sampler.instances()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GC_WAIT
    leaks = duplicates + unrecorded
    while leaks and loop.time() < deadline:
        await asyncio.sleep(2.0)
        _, extra, waiting = await sampler.instances()
        leaks = extra + waiting
    return Trial(
        label=label,
        nodeclaims=sum(1 for c in claims if c.metadata.deletion_timestamp is None),
        nodeclaims_seen=len(sampler.seen),
        deleted_before_running=len(sampler.deleted_early),
        instances=instances,
        duplicates=duplicates,
        unrecorded=unrecorded,
        leaks=leaks,
        pending=pending,
        to_running=to_running,
        duplicate_log_lines=sum(duplicate_log_lines(log) for log in logs),
    )


async def crash_trial(
    client: KubeClient,
    setup: Setup,
    *,
    kill_after: float | None,
    label: str,
    leader_election: str | None = None,
) -> Trial:
    """Scale out; SIGKILL karpy `kill_after` seconds later (None: no crash) and restart it."""
    log = setup.log_dir / f"karpy-{label.replace(' ', '-')}.log"
    karpy = Karpy(setup, leader_election=leader_election, log=log)
    await prepare(client, setup, consolidate_after="Never")
    karpy.start()
    try:
        await karpy.wait_ready()
        sampler = Sampler(client, setup)
        await scale(client, setup.deployment_manifest(), setup.pods)
        since = time.monotonic()
        if kill_after is not None:
            await _sleep_sampling(sampler, karpy, kill_after)
            karpy.kill()
            karpy.start()
            since = time.monotonic()
        to_running, pending = await _until_running(sampler, setup, karpy, since)
        trial = await _finish(
            client,
            setup,
            sampler,
            label=label,
            to_running=to_running,
            pending=pending,
            logs=karpy.logs,
        )
    finally:
        await reset(client, setup, karpy)
    return trial


async def restart_apiserver(cluster: LocalCluster, *, within: float = 120.0) -> None:
    """Start `cluster`'s stopped kube-apiserver again on its old port.

    LocalCluster checks the port with a bind that lacks SO_REUSEADDR, so connections the killed
    apiserver left in TIME_WAIT make it refuse for up to a minute: retried until the check
    passes. It runs on the calling (main) thread on purpose: a component of a cluster that is
    not detached dies with the thread that spawned it (PR_SET_PDEATHSIG is per thread), so an
    apiserver started from a worker thread would die when that thread does.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            cluster.start_component("kube-apiserver")
        except PortInUseError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(1.0)
        else:
            return


async def outage_trial(
    client: KubeClient,
    setup: Setup,
    cluster: LocalCluster,
    *,
    stop_after: float,
    outage: float,
    label: str,
    leader_election: str | None = None,
) -> Trial:
    """Scale out (consolidateAfter 0s, so any node called empty goes at once); stop `cluster`'s
    apiserver `stop_after` seconds later for `outage` seconds; karpy keeps running."""
    log = setup.log_dir / f"karpy-{label.replace(' ', '-')}.log"
    karpy = Karpy(setup, leader_election=leader_election, log=log)
    await prepare(client, setup, consolidate_after="0s")
    karpy.start()
    try:
        await karpy.wait_ready()
        sampler = Sampler(client, setup)
        await scale(client, setup.deployment_manifest(), setup.pods)
        await _sleep_sampling(sampler, karpy, stop_after)
        cluster.stop_component("kube-apiserver")
        await asyncio.sleep(outage)
        karpy.keep_running()
        await restart_apiserver(cluster)
        since = time.monotonic()
        to_running, pending = await _until_running(sampler, setup, karpy, since)
        trial = await _finish(
            client,
            setup,
            sampler,
            label=label,
            to_running=to_running,
            pending=pending,
            logs=karpy.logs,
        )
    finally:
        await reset(client, setup, karpy)
    return trial


HEADER = (
    "trial",
    "nodeclaims",
    "seen",
    "deleted early",
    "instances",
    "duplicates",
    "unrecorded",
    "leaks",
    "pending",
    "to Running (s)",
    "dup. log lines",
)


def table(trials: Sequence[Trial]) -> str:
    """A Markdown table of `trials`."""
    rows = [HEADER, tuple("---" for _ in HEADER)]
    for t in trials:
        rows.append(
            (
                t.label,
                str(t.nodeclaims),
                str(t.nodeclaims_seen),
                str(t.deleted_before_running),
                str(t.instances),
                str(t.duplicates),
                str(t.unrecorded),
                str(t.leaks),
                str(t.pending),
                "-" if t.to_running is None else f"{t.to_running:.1f}",
                str(t.duplicate_log_lines),
            )
        )
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)
