"""Crash and outage trials during disruption: karpy killed (or cut off from the apiserver) in
the middle of a drift roll, a multi-node consolidation, an expiration or a termination, and
what it left behind.

A trial installs a NodePool of one small instance type (c5.large, and c5.2xlarge where
consolidation may use it) and a pause Deployment whose pods (1200m each) take a node apiece,
under a PodDisruptionBudget of `maxUnavailable: 1`; it starts `karpy run`, waits for one node
per pod, then starts the disruption:

* `drift`: the NodePool's template gets a new label, so every node drifts and is replaced one
  command at a time (replacement first);
* `consolidation`: the NodePool may now use c5.2xlarge (four c5.large's price, room for six
  pods) and consolidateAfter drops from Never to 0s: multi-node consolidation replaces several
  nodes with one larger node;
* `expiration`: the NodePool's expireAfter (set before the nodes launched) runs out; the
  NodeClaims are deleted at once (no replacement first, as Karpenter's expiration) and drained
  under a terminationGracePeriod; one more node runs a `karpenter.sh/do-not-disrupt` pod (the
  "keeper"), which only the grace period's end removes;
* `termination`: half the NodeClaims are deleted by hand; their nodes drain through the PDB
  while the provisioner launches capacity for the evicted pods.

The fault comes `moment` seconds after the disruption started: a SIGKILL of karpy (restarted
at once), kube-apiserver stopped for a while (karpy keeps running), or every connection karpy
holds to the apiserver cut through a proxy (tests/support/watchcut.py): etcd compacted, so
every informer's next re-watch is answered 410 Gone and relists (`expire`), every connection
reset (`drop`), or silenced as behind a middlebox's idle timeout (`stall`). The cluster is sampled
every half second until the scenario has settled (the scenario's own end, every pod Ready, no
NodeClaim being deleted, no command recorded, no `karpenter.sh/disrupted` taint), and the trial
reports:

* `early`: NodeClaims seen deleting while a replacement their command created was not yet
  Initialized (Ready and initialized: the queue's condition for deleting them);
* `pdb`: the fewest Ready pods at any sample, against the budget's minimum;
* `stale`: when the trial gave up waiting, nodes tainted disrupted and NodeClaims carrying a
  command or replacement annotation that nothing is acting on;
* `duplicates`/`leaks`: instances no NodeClaim owns (kwok: the pool's Nodes; AWS: moto's
  pending or running instances of the cluster), when the scenario settled and after garbage
  collection had its chance;
* `nodes`: live NodeClaims at the end, against the crash-free run's.

The NodeClass is the `Setup`'s: a KWOKNodeClass, or on the AWS path the emulator's
EC2NodeClass (moto, with the kubelet bridge registering a Node for every instance moto runs;
`tests/support/awsworld.py`). The same code serves the suite's fixed-moment trials
(`tests/e2e/test_disruption_faults.py`, `tests/e2e/test_aws_disruption_faults.py`) and the
sweep (`benchmarks/faults.py
[--provider aws] --scenario drift|consolidation|expiration|termination`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import aiohttp
import attrs

from karpy.apis.kube.node import Node
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError, NotFoundError, UnreachableError
from karpy.kube.install import apply, scale
from karpy.kube.kinds import NODECLAIMS, NODES, PODDISRUPTIONBUDGETS, PODS
from karpy.localcluster import LocalCluster
from karpy.state.conditions import claim_is_true
from tests.support import watchcut
from tests.support.faults import Karpy, Sampler, Setup, restart_apiserver
from tests.support.probes import probe_ports
from tests.support.waiting import eventually

T = TypeVar("T")
log = logging.getLogger(__name__)

SCENARIOS: Final = ("drift", "consolidation", "expiration", "termination")
SAMPLE_INTERVAL: Final = 0.5
STEADY_LIMIT: Final = 300.0
"""Seconds the fleet gets to come up before the disruption (ten EC2 instances through moto on
an overloaded machine take minutes)."""
SETTLE_LIMIT: Final = 420.0
"""Seconds a trial waits for the scenario to settle before it reports what is left."""
STABLE_FOR: Final = 35.0
"""Seconds consolidation must change nothing to count as finished (a 15 s validation delay
and a 10 s polling period, with room)."""
GC_WAIT: Final = 75.0
EXPIRE_AFTER: Final = "50s"
GRACE: Final = "30s"
SMALL: Final = "c5.large"
LARGE: Final = "c5.2xlarge"
COMMAND_ANNOTATIONS: Final = (wk.ANNOTATION_DISRUPTION_COMMAND, wk.ANNOTATION_REPLACEMENT_FOR)


@attrs.frozen(kw_only=True)
class Scenario:
    """One disruption and its size."""

    kind: str
    nodes: int
    """Pods, and so nodes, before the disruption."""

    @property
    def min_available(self) -> int:
        return self.nodes - 1


@attrs.frozen(kw_only=True)
class DisruptionTrial:
    """What one trial left behind (see the module docstring)."""

    label: str
    fault_at: float | None
    settled: bool
    nodes: int
    seen: int
    early: int
    min_ready: int
    min_available: int
    stale_taints: int
    stale_annotations: int
    duplicates: int
    leaks: int
    to_settle: float | None
    restarts: int = 0
    held: float = 0.0
    blocker: str = ""
    """Why the trial had not settled when it gave up waiting."""
    relists: int = 0
    """Watch cuts: full lists karpy made after its first ones (each a relist, after a 410 or a
    broken stream), from its metrics."""
    watch_errors: int = 0
    """Watch cuts: broken watch streams and lists, from karpy's metrics."""
    keeper_out: float | None = None
    """Expiration: seconds from the first expiry until the do-not-disrupt pod went (the grace
    period is GRACE)."""
    """Seconds the longest granted eviction waited for its pod's deletion (see
    `Cluster.held_evictions`)."""

    @property
    def pdb_broken(self) -> bool:
        return self.min_ready < self.min_available


def _taint_on(node: Node) -> bool:
    return any(t.key == wk.TAINT_DISRUPTED_KEY for t in node.spec.taints)


def _annotated(claim: NodeClaim) -> bool:
    return any(k in claim.metadata.annotations for k in COMMAND_ANNOTATIONS)


class Cluster:
    """The trial's objects as the apiserver shows them, and what a trial installs."""

    def __init__(self, client: KubeClient, setup: Setup, scenario: Scenario) -> None:
        self.client = client
        self.setup = setup
        self.scenario = scenario

    @property
    def name(self) -> str:
        return self.setup.name

    # ------------------------------------------------------------------ manifests

    def nodeclass_ref(self) -> dict[str, str]:
        nodeclass = self.setup.nodeclass_manifest()
        group = nodeclass["apiVersion"].split("/")[0]
        return {"group": group, "kind": nodeclass["kind"], "name": self.name}

    def nodepool(self, *, revision: int = 0, expire_after: str = EXPIRE_AFTER) -> dict[str, Any]:
        kind = self.scenario.kind
        types = [SMALL, LARGE] if kind == "consolidation" and revision else [SMALL]
        spec: dict[str, Any] = {
            "requirements": [
                {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": types},
                {
                    "key": wk.LABEL_CAPACITY_TYPE,
                    "operator": "In",
                    "values": [wk.CAPACITY_TYPE_ON_DEMAND],
                },
            ],
            "nodeClassRef": self.nodeclass_ref(),
        }
        budgets: list[dict[str, Any]] = [{"nodes": "100%"}]
        if kind == "expiration":
            spec["expireAfter"] = expire_after
            spec["terminationGracePeriod"] = GRACE
            # The pool's expireAfter moves to Never once the first nodes run (their own stays
            # EXPIRE_AFTER), so replacements do not expire in turn; that drifts the first
            # nodes, which expiration, not drift, must remove.
            budgets.insert(0, {"nodes": "0", "reasons": ["Drifted"]})
        consolidate = "0s" if kind == "consolidation" and revision else "Never"
        return {
            "apiVersion": f"{wk.GROUP}/v1",
            "kind": "NodePool",
            "metadata": {"name": self.name},
            "spec": {
                "template": {
                    "metadata": {
                        "labels": {
                            "fault-trial": self.name,
                            "revision": str(revision if kind == "drift" else 0),
                        }
                    },
                    "spec": spec,
                },
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": consolidate,
                    "budgets": budgets,
                },
            },
        }

    @property
    def keeper(self) -> str:
        return f"{self.name}-keeper"

    def deployment(self, *, keeper: bool = False) -> dict[str, Any]:
        """The pause Deployment; `keeper`: the expiration scenario's one pod that may not be
        disrupted (it holds its node until the terminationGracePeriod runs out)."""
        app = self.keeper if keeper else self.name
        annotations = {wk.ANNOTATION_DO_NOT_DISRUPT: "true"} if keeper else {}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": app, "namespace": self.setup.namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}, "annotations": annotations},
                    "spec": {
                        "nodeSelector": {"fault-trial": self.name},
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "pause",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "1200m", "memory": "256Mi"}},
                            }
                        ],
                    },
                },
            },
        }

    def pdb(self) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": self.name, "namespace": self.setup.namespace},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": self.name}}},
        }

    # ------------------------------------------------------------------ reads

    async def claims(self) -> list[NodeClaim]:
        listed = await self.client.list(NODECLAIMS)
        return [
            i.obj for i in listed.items if i.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == self.name
        ]

    async def nodes(self) -> list[Node]:
        listed = await self.client.list(NODES)
        return [
            i.obj for i in listed.items if i.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == self.name
        ]

    @property
    def keepers(self) -> int:
        """Nodes held by a do-not-disrupt pod (expiration's keeper), beside one per pod."""
        return 1 if self.scenario.kind == "expiration" else 0

    async def ready_pods(self, *, keeper: bool = False) -> tuple[int, int]:
        """(pods Ready and not being deleted, pods): of the Deployment, or of the keeper."""
        app = self.keeper if keeper else self.name
        listed = await self.client.list(PODS, namespace=self.setup.namespace)
        mine = [p.obj for p in listed.items if p.obj.metadata.labels.get("app") == app]
        ready = sum(
            1
            for p in mine
            if p.metadata.deletion_timestamp is None
            and p.status is not None
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)
        )
        return ready, len(mine)

    async def unready(self) -> str:
        """The Deployment's first pod that is not Ready, with its Ready condition's reason and
        its node's Ready condition ("" when every pod is Ready): what held a drain that never
        finished."""
        listed = await self.client.list(PODS, namespace=self.setup.namespace)
        nodes = {n.metadata.name: n for n in await self.nodes()}
        for item in listed.items:
            pod = item.obj
            if pod.metadata.labels.get("app") != self.name or pod.metadata.deletion_timestamp:
                continue
            ready = next((c for c in pod.status.conditions if c.type == "Ready"), None)
            if ready is not None and ready.status == "True":
                continue
            node = nodes.get(pod.spec.node_name or "")
            node_ready = (
                next((c for c in node.status.conditions if c.type == "Ready"), None)
                if node is not None
                else None
            )
            return (
                f"pod {pod.metadata.name} on {pod.spec.node_name or 'no node'}: "
                f"Ready={ready.status if ready else '-'} ({ready.reason if ready else '-'}), "
                f"node Ready={node_ready.status if node_ready else '-'}"
                f" ({node_ready.reason if node_ready else '-'})"
            )
        return ""

    async def instances(self) -> int:
        """Instances no NodeClaim owns (kwok: the pool's Nodes; AWS: moto's live instances of
        the cluster), as `tests/support/faults.py` counts them: a launch a NodeClaim has not
        recorded yet is its own, not a duplicate."""
        _, duplicates, _ = await Sampler(self.client, self.setup).instances()
        return duplicates

    # ------------------------------------------------------------------ steps

    async def install(self) -> None:
        async with asyncio.timeout(60):
            await apply(self.client, self.setup.nodeclass_manifest())
            await apply(self.client, self.nodepool())
            await apply(self.client, self.deployment())
            await apply(self.client, self.pdb())
            if self.keepers:
                await apply(self.client, self.deployment(keeper=True))

    async def steady(self) -> bool:
        """One Ready pod per node, every NodeClaim initialized, nothing marked."""
        ready, total = await self.ready_pods()
        kept, _ = await self.ready_pods(keeper=True)
        claims = await self.claims()
        nodes = await self.nodes()
        return (
            ready == total == self.scenario.nodes
            and kept == self.keepers
            and len(claims) == self.scenario.nodes + self.keepers
            and all(claim_is_true(c, ConditionType.INITIALIZED) for c in claims)
            and len(nodes) == len(claims)
            and not any(_annotated(c) for c in claims)
        )

    async def keeper_pods(self) -> frozenset[str]:
        """UIDs of the do-not-disrupt pods not being deleted."""
        listed = await self.client.list(PODS, namespace=self.setup.namespace)
        return frozenset(
            p.obj.metadata.uid or ""
            for p in listed.items
            if p.obj.metadata.labels.get("app") == self.keeper
            and p.obj.metadata.deletion_timestamp is None
        )

    async def expiring(self) -> bool:
        return any(c.metadata.deletion_timestamp is not None for c in await self.claims())

    async def held_evictions(self) -> frozenset[str]:
        """Pods the PDB counts as disrupted (an eviction was granted) that are not being
        deleted: an eviction whose pod deletion never happened holds the budget for two
        minutes (kube-controller-manager's DeletionTimeout)."""
        pdb = await self.client.get(PODDISRUPTIONBUDGETS, self.name, namespace=self.setup.namespace)
        listed = await self.client.list(PODS, namespace=self.setup.namespace)
        alive = {
            p.obj.metadata.name for p in listed.items if p.obj.metadata.deletion_timestamp is None
        }
        return frozenset(n for n in pdb.status.disrupted_pods if n in alive)

    async def start(self, revision: int) -> frozenset[str]:
        """Start the disruption; returns the NodeClaims it is to remove (empty when which
        ones is up to karpy)."""
        kind = self.scenario.kind
        claims = await self.claims()
        if kind in ("drift", "consolidation"):
            await apply(self.client, self.nodepool(revision=revision))
            return (
                frozenset(c.metadata.name or "" for c in claims) if kind == "drift" else frozenset()
            )
        if kind == "expiration":
            return frozenset(c.metadata.name or "" for c in claims)
        doomed = sorted(c.metadata.name or "" for c in claims)[: len(claims) // 2]
        for name in doomed:
            with contextlib.suppress(NotFoundError):
                await self.client.delete(NODECLAIMS, name)
        return frozenset(doomed)

    async def reset(self, karpy: Karpy) -> None:
        """Scale to 0, delete every NodeClaim (karpy finalizes them), wait for the Nodes to go,
        stop karpy. A read that times out (the apiserver slow under load, or still coming back
        from an outage) is tried again: a trial's figures are taken before its reset, and a
        failed reset would lose them."""
        async with asyncio.timeout(300):
            await _retrying(lambda: scale(self.client, self.deployment(), 0))
            if self.keepers:
                await _retrying(lambda: scale(self.client, self.deployment(keeper=True), 0))
            while claims := await _retrying(self.claims):
                karpy.keep_running()
                for claim in claims:
                    if claim.metadata.deletion_timestamp is None:
                        with contextlib.suppress(NotFoundError, *TRANSIENT):
                            await self.client.delete(NODECLAIMS, claim.metadata.name or "")
                await asyncio.sleep(1.0)

        sampler = Sampler(self.client, self.setup)

        async def none_left() -> bool:
            karpy.keep_running()
            return not await _retrying(self.nodes) and not (await _retrying(sampler.instances))[0]

        # On AWS the next trial counts the cluster's instances: none of these may be left.
        await eventually(none_left, within=180, interval=1.0, what="no nodes or instances left")
        karpy.stop()
        with contextlib.suppress(NotFoundError):
            await _retrying(
                lambda: self.client.delete(
                    PODDISRUPTIONBUDGETS, self.name, namespace=self.setup.namespace
                )
            )


TRANSIENT: Final = (UnreachableError, OSError, TimeoutError, aiohttp.ClientError)
"""What a read under load or right after an outage may raise and a retry may not."""


async def _retrying(call: Callable[[], Awaitable[T]], *, attempts: int = 10) -> T:
    """`call()`, tried again (a second apart) while it fails for a transient reason."""
    for attempt in range(attempts):
        try:
            return await call()
        except TRANSIENT:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


class Watcher:
    """Samples the invariants while a disruption runs."""

    def __init__(self, cluster: Cluster, doomed: frozenset[str], original: frozenset[str]) -> None:
        self._original = original
        self._cluster = cluster
        self._doomed = doomed
        self.seen: set[str] = set()
        self.early: set[str] = set()
        self.min_ready = cluster.scenario.nodes
        self._checked: set[str] = set()
        self._last_change = time.monotonic()
        self._last: frozenset[str] = frozenset()
        self.settled = False
        self.blocker = "not sampled"
        """Why the scenario has not settled, at the last sample ("" once it has)."""
        self._held_since: dict[str, float] = {}
        self.longest_hold = 0.0
        self._began = time.monotonic()
        self.keeper_out: float | None = None
        self._keepers: frozenset[str] | None = None
        """Seconds from the start until the do-not-disrupt pod was first seen not Ready (its
        node's terminationGracePeriod ran out)."""
        """Seconds the longest granted eviction waited for its pod's deletion."""

    def restart_wait(self) -> None:
        """The fault is over: the quiet that makes consolidation count as done starts now."""
        self._last_change = time.monotonic()

    async def sample(self) -> None:
        cluster = self._cluster
        claims = await cluster.claims()
        ready, _ = await cluster.ready_pods()
        nodes = await cluster.nodes()
        self.min_ready = min(self.min_ready, ready)
        names = frozenset(c.metadata.name or "" for c in claims)
        self.seen |= names
        replacements: dict[str, list[NodeClaim]] = {}
        for claim in claims:
            made_for = claim.metadata.annotations.get(wk.ANNOTATION_REPLACEMENT_FOR)
            if made_for:
                replacements.setdefault(made_for, []).append(claim)
        for claim in claims:
            name = claim.metadata.name or ""
            if claim.metadata.deletion_timestamp is None or name in self._checked:
                continue
            self._checked.add(name)
            command = claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_COMMAND)
            wanted = claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_REPLACEMENTS, "0")
            if command is None or not wanted.isdigit() or int(wanted) == 0:
                continue
            ready_replacements = [
                r
                for r in replacements.get(command, [])
                if claim_is_true(r, ConditionType.INITIALIZED)
            ]
            if len(ready_replacements) < int(wanted):
                self.early.add(name)
        state = frozenset(
            f"{c.metadata.name}:{c.metadata.deletion_timestamp is not None}:{_annotated(c)}"
            for c in claims
        )
        if state != self._last:
            self._last = state
            self._last_change = time.monotonic()
        held = await cluster.held_evictions()
        now = time.monotonic()
        self._held_since = {n: self._held_since.get(n, now) for n in held}
        for since in self._held_since.values():
            self.longest_hold = max(self.longest_hold, now - since)
        kept, _ = await cluster.ready_pods(keeper=True)
        keepers = await cluster.keeper_pods()
        if self._keepers is None:
            self._keepers = keepers
        elif self.keeper_out is None and not self._keepers <= keepers:
            # The do-not-disrupt pod seen first is gone or being deleted (its replacement may
            # already run: the provisioner makes room for pods on deleting nodes ahead).
            self.keeper_out = now - self._began
        self.settled = kept == cluster.keepers and await self._settled(claims, nodes, ready)
        if ready < cluster.scenario.nodes and self.blocker.endswith("pods Ready"):
            self.blocker = f"{self.blocker}; {await cluster.unready()}"

    async def _settled(
        self, claims: Sequence[NodeClaim], nodes: Sequence[Node], ready: int
    ) -> bool:
        self.blocker = self._blocker(claims, nodes, ready)
        return not self.blocker

    def _blocker(self, claims: Sequence[NodeClaim], nodes: Sequence[Node], ready: int) -> str:
        """Why the scenario has not settled ("" when it has)."""
        scenario = self._cluster.scenario
        names = {c.metadata.name or "" for c in claims}
        checks = (
            (ready < scenario.nodes, f"{ready} of {scenario.nodes} pods Ready"),
            (
                any(c.metadata.deletion_timestamp is not None for c in claims),
                "a NodeClaim is being deleted",
            ),
            (any(_annotated(c) for c in claims), "a NodeClaim carries a command annotation"),
            (any(_taint_on(n) for n in nodes), "a Node is tainted disrupted"),
            (
                not all(claim_is_true(c, ConditionType.INITIALIZED) for c in claims),
                "a NodeClaim is not Initialized",
            ),
            (len(nodes) != len(claims), f"{len(nodes)} Nodes for {len(claims)} NodeClaims"),
            (bool(self._doomed & names), "a NodeClaim to remove is still there"),
        )
        for failed, why in checks:
            if failed:
                return why
        if scenario.kind == "consolidation":
            # Done once it consolidated something and then nothing changed for a while (the
            # fault's end restarts the wait: a restarting process changes nothing for a time).
            if self._original <= names:
                return "nothing consolidated yet"
            if time.monotonic() - self._last_change < STABLE_FOR:
                return "changed in the last 35 s"
        return ""

    async def stale(self) -> tuple[int, int]:
        """Disrupted taints and command annotations nothing is acting on: on a node (or
        NodeClaim) that is not being deleted and whose command is not in flight."""
        claims = await self._cluster.claims()
        nodes = await self._cluster.nodes()
        deleting = {c.status.node_name for c in claims if c.metadata.deletion_timestamp}
        taints = sum(
            1
            for n in nodes
            if _taint_on(n)
            and n.metadata.deletion_timestamp is None
            and n.metadata.name not in deleting
        )
        annotations = sum(
            1 for c in claims if _annotated(c) and c.metadata.deletion_timestamp is None
        )
        return taints, annotations


async def _kill_at(karpy: Karpy, seconds: float) -> None:
    await asyncio.sleep(seconds)
    karpy.kill()
    karpy.start()


async def _outage_at(cluster: LocalCluster, seconds: float, outage: float) -> None:
    await asyncio.sleep(seconds)
    cluster.stop_component("kube-apiserver")
    await asyncio.sleep(outage)
    await restart_apiserver(cluster)


async def _watch_counts(karpy: Karpy) -> tuple[int, int]:
    """(full lists, broken streams or lists) the running process has counted (its
    `karpy_watch_lists_total` and `karpy_watch_errors_total`)."""
    ports = probe_ports(karpy.logs[-1])
    if ports is None:
        return 0, 0
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://127.0.0.1:{ports[1]}/metrics") as response,
    ):
        text = await response.text()
    totals = {"karpy_watch_lists_total": 0.0, "karpy_watch_errors_total": 0.0}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            totals[name] += float(line.rsplit(" ", 1)[1])
    return int(totals["karpy_watch_lists_total"]), int(totals["karpy_watch_errors_total"])


async def _relisted(
    karpy: Karpy, cut: watchcut.WatchCut, faulted: bool, first: int
) -> tuple[int, int]:
    """karpy's list and broken-stream counts once a cut that relists (`expire`, `drop`) has
    shown in them: the scenario may settle before every stream met its 410 (they end every
    `watch_timeout`). Counted as they are after that long, whatever they show."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cut.watch_timeout + 15.0
    while True:
        lists, errors = await _retrying(lambda: _watch_counts(karpy))
        if not faulted or cut.mode == "stall" or lists > first or loop.time() > deadline:
            return lists, errors
        await asyncio.sleep(1.0)


async def _sample_until_settled(
    watcher: Watcher, karpy: Karpy, fault: asyncio.Task[None] | None, *, limit: float
) -> None:
    """Sample until the scenario settled after the fault, or `limit` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    waiting = fault is not None
    while loop.time() < deadline:
        if waiting and fault is not None and fault.done():
            waiting = False
            watcher.restart_wait()
        if fault is None or fault.done():
            karpy.keep_running()
        with contextlib.suppress(KubeError, OSError, TimeoutError):
            await watcher.sample()
        if watcher.settled and (fault is None or fault.done()):
            return
        await asyncio.sleep(SAMPLE_INTERVAL)


async def disruption_trial(
    client: KubeClient,
    setup: Setup,
    scenario: Scenario,
    *,
    label: str,
    kill_at: float | None = None,
    outage_at: float | None = None,
    outage: float = 20.0,
    control_plane: LocalCluster | None = None,
    cut_at: float | None = None,
    cut: watchcut.WatchCut | None = None,
    settle_limit: float = SETTLE_LIMIT,
) -> DisruptionTrial:
    """One trial: install, reach one node per pod, disrupt, inject the fault (a SIGKILL at
    `kill_at`, `control_plane`'s apiserver stopped at `outage_at` for `outage` seconds, or
    karpy's connections cut at `cut_at` as `cut` says; none: fault-free), sample until
    settled, tear down. With `cut`, karpy reaches the apiserver through its proxy all along,
    fault-free or not."""
    cluster = Cluster(client, setup, scenario)
    log = setup.log_dir / f"karpy-{scenario.kind}-{label.replace(' ', '-')}.log"
    through = (
        attrs.evolve(
            setup,
            kubeconfig=cut.kubeconfig,
            environment={**setup.environment, **cut.environment},
        )
        if cut is not None
        else setup
    )
    karpy = Karpy(through, leader_election=None, log=log)
    await cluster.install()
    karpy.start()
    try:
        await karpy.wait_ready()
        await scale(client, cluster.deployment(), scenario.nodes)
        if cluster.keepers:
            await scale(client, cluster.deployment(keeper=True), cluster.keepers)
        await eventually(cluster.steady, within=STEADY_LIMIT, interval=1.0, what="one node per pod")
        if scenario.kind == "expiration":
            await apply(client, cluster.nodepool(expire_after="Never"))
        if scenario.kind == "expiration":
            # The NodeClaims expire EXPIRE_AFTER after their creation: the disruption starts
            # when the first of them is deleted.
            await eventually(cluster.expiring, within=180, interval=0.2, what="an expiry")
        original = frozenset(c.metadata.name or "" for c in await cluster.claims())
        first_lists, _ = await _watch_counts(karpy) if cut is not None else (0, 0)
        doomed = await cluster.start(revision=1)
        began = time.monotonic()
        fault: asyncio.Task[None] | None = None
        if kill_at is not None:
            fault = asyncio.create_task(_kill_at(karpy, kill_at))
        elif outage_at is not None and control_plane is not None:
            fault = asyncio.create_task(_outage_at(control_plane, outage_at, outage))
        elif cut_at is not None and cut is not None:
            fault = asyncio.create_task(watchcut.cut_at(cut, cut_at))
        watcher = Watcher(cluster, doomed, original)
        try:
            await _sample_until_settled(watcher, karpy, fault, limit=settle_limit)
        finally:
            if fault is not None and not fault.done():
                fault.cancel()
                await asyncio.wait([fault])
        if fault is not None:
            await fault
        loop = asyncio.get_running_loop()
        to_settle = time.monotonic() - began if watcher.settled else None
        lists, watch_errors = 0, 0
        if cut is not None:
            lists, watch_errors = await _relisted(karpy, cut, cut_at is not None, first_lists)
        taints, annotations = await _retrying(watcher.stale)
        duplicates = leaks = await _retrying(cluster.instances)
        gc_deadline = loop.time() + GC_WAIT
        while leaks and loop.time() < gc_deadline:
            await asyncio.sleep(2.0)
            leaks = await _retrying(cluster.instances)
        live = [c for c in await _retrying(cluster.claims) if c.metadata.deletion_timestamp is None]
        trial = DisruptionTrial(
            label=label,
            fault_at=next((t for t in (kill_at, outage_at, cut_at) if t is not None), None),
            settled=watcher.settled,
            nodes=len(live),
            seen=len(watcher.seen),
            early=len(watcher.early),
            min_ready=watcher.min_ready,
            min_available=scenario.min_available,
            stale_taints=taints,
            stale_annotations=annotations,
            duplicates=duplicates,
            leaks=leaks,
            to_settle=to_settle,
            restarts=karpy.restarts,
            held=watcher.longest_hold,
            keeper_out=watcher.keeper_out,
            blocker=watcher.blocker,
            relists=max(0, lists - first_lists),
            watch_errors=watch_errors,
        )
    finally:
        await cluster.reset(karpy)
    return trial


HEADER: Final = (
    "trial",
    "settled",
    "to settle (s)",
    "nodes",
    "seen",
    "deleted early",
    "fewest Ready (min)",
    "stale taints",
    "stale annotations",
    "duplicates",
    "leaks",
    "eviction held (s)",
    "do-not-disrupt pod out at (s)",
    "relists / broken streams",
)


def table(trials: Sequence[DisruptionTrial]) -> str:
    """A Markdown table of `trials`."""
    rows = [HEADER, tuple("---" for _ in HEADER)]
    for t in trials:
        rows.append(
            (
                t.label,
                "yes" if t.settled else "**no**",
                "-" if t.to_settle is None else f"{t.to_settle:.1f}",
                str(t.nodes),
                str(t.seen),
                str(t.early),
                f"{t.min_ready} ({t.min_available})",
                str(t.stale_taints),
                str(t.stale_annotations),
                str(t.duplicates),
                str(t.leaks),
                f"{t.held:.0f}",
                "-" if t.keeper_out is None else f"{t.keeper_out:.1f}",
                f"{t.relists} / {t.watch_errors}",
            )
        )
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def problems(trial: DisruptionTrial, free: DisruptionTrial, *, pdb: bool = True) -> list[str]:
    """What `trial` broke of the guarantees (empty when nothing): compared with the
    crash-free run `free` for the fleet's size. `pdb=False` where the budget may be overridden
    by design (a terminationGracePeriod running out)."""
    found: list[str] = []
    if not trial.settled:
        found.append(f"did not settle ({trial.blocker})")
    if trial.early:
        found.append(f"{trial.early} NodeClaim(s) deleted before their replacement was Ready")
    if pdb and trial.pdb_broken:
        found.append(f"{trial.min_ready} Ready pods, below the PDB's {trial.min_available}")
    if trial.stale_taints or trial.stale_annotations:
        found.append(
            f"{trial.stale_taints} stale taint(s), {trial.stale_annotations} stale annotation(s)"
        )
    if trial.duplicates or trial.leaks:
        found.append(f"{trial.duplicates} duplicate(s), {trial.leaks} leak(s)")
    if abs(trial.nodes - free.nodes) > 1:
        found.append(f"{trial.nodes} nodes, crash-free {free.nodes}")
    return found


async def killed(
    kubeconfig: Path,
    setup: Setup,
    scenario: Scenario,
    *,
    at: float,
    settle_limit: float = SETTLE_LIMIT,
) -> DisruptionTrial:
    """The suite's fixed-moment trial: `scenario` with one SIGKILL `at` seconds in, on a
    client of its own; logged as a table."""
    client = await KubeClient.connect(kubeconfig, request_timeout=10.0)
    try:
        trial = await disruption_trial(
            client,
            setup,
            scenario,
            label=f"{scenario.kind}: kill at {at}s",
            kill_at=at,
            settle_limit=settle_limit,
        )
    finally:
        await client.close()
    log.info("disruption fault trial\n%s", table([trial]))
    return trial


def assert_kept(trial: DisruptionTrial, *, pdb: bool = True) -> None:
    """What every trial must show after its restart: settled, nothing deleted before its
    replacement was Ready, the PDB's minimum held (unless `pdb` is False: a
    terminationGracePeriod may override it by design), nothing stale, no duplicate or leaked
    instance."""
    assert trial.settled, table([trial])
    assert trial.early == 0, table([trial])
    if pdb:
        assert not trial.pdb_broken, table([trial])
    assert (trial.stale_taints, trial.stale_annotations) == (0, 0), table([trial])
    assert (trial.duplicates, trial.leaks) == (0, 0), table([trial])
