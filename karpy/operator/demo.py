"""``karpy demo`` — the README's main command: the inflate walkthrough on one machine.

It brings up the real local control plane, installs karpy's CRDs, a KWOKNodeClass and a
NodePool (label intent=apps, WhenEmpty, consolidateAfter 30s), runs the whole karpy daemon
in-process with the kwok provider, and scales the ``inflate`` Deployment (pause image, 1 CPU,
1.5Gi, nodeSelector intent=apps) from 0 to 1, to 6 and back to 0, printing a live timeline of
pods, NodeClaims (instance type, zone, capacity type, price) and nodes. Every step has an
expectation; the exit code is 0 only when all of them held. karpy's own JSON logs go to a file
so the timeline stays readable.

``--provider aws`` plays the AWS getting-started walkthrough instead (``inflate`` from 0 to 10
and back to 0, on m5.large or m5.2xlarge in us-west-2a/b) with karpy's AWS provider against moto
on 127.0.0.1, started by the demo with a bridge that joins a Node for every instance moto
launches (karpy.operator.demo_aws); the timeline adds what moto reports, and the last step also
waits for every instance to be terminated in moto.

``--provider clusterapi`` plays the walkthrough with karpy's Cluster API provider on Cluster
API's real core manager, started beside the local cluster with an infrastructure stand-in
(karpy.operator.demo_clusterapi) and two MachineDeployments: ``small`` (the cheaper, capped at one
Machine) and ``large``. It prints Cluster API's version and each Machine as it is made, claimed
and removed; 0 -> 1 must claim a Machine of small, 1 -> 6 one of large (small is full), and
6 -> 0 must remove every Machine karpy claimed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

import attrs
import uvloop

from karpy.apis.crds import all_crds, render_crd
from karpy.apis.kube.pod import Pod
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.errors import CloudProviderError
from karpy.cloudprovider.protocol import CloudProvider
from karpy.cloudprovider.registry import ProviderError
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.install import apply, install_crds, object_path, scale
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.localcluster import ClusterInfo, LocalCluster, LocalClusterError
from karpy.operator.demo_aws import (
    NODEPOOL_REQUIREMENTS,
    Emulator,
    EmulatorError,
    emulator,
    last_line,
)
from karpy.operator.demo_clusterapi import (
    SMALL_MAX_SIZE,
    Testbed,
    TestbedError,
    describe,
    testbed,
)
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime.logging import configure
from karpy.runtime.options import load
from karpy.runtime.solverbanner import silence_solver_banner

NAMESPACE = "default"
POOL = "default"
PROVIDERS: Final = ("kwok", "aws", "clusterapi")
KWOK_NODECLASS_API_VERSION: Final = "karpenter.kwok.sh/v1alpha1"
"""The kwok provider's KWOKNodeClass, by name: karpy never imports a provider."""


def _nodeclass() -> dict[str, Any]:
    return {
        "apiVersion": KWOK_NODECLASS_API_VERSION,
        "kind": "KWOKNodeClass",
        "metadata": {"name": POOL},
    }


def _nodepool(
    nodeclass: Mapping[str, Any],
    consolidate_after: int,
    *,
    requirements: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> dict[str, Any]:
    group = str(nodeclass["apiVersion"]).split("/")[0]
    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": POOL},
        "spec": {
            "template": {
                "metadata": {"labels": {"intent": "apps"}},
                "spec": {
                    "requirements": [
                        {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
                        {
                            "key": wk.LABEL_CAPACITY_TYPE,
                            "operator": "In",
                            "values": [wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND],
                        },
                        *(
                            {"key": key, "operator": "In", "values": list(values)}
                            for key, values in requirements
                        ),
                    ],
                    "nodeClassRef": {"group": group, "kind": nodeclass["kind"], "name": POOL},
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": f"{consolidate_after}s",
            },
            "limits": {"cpu": "1000"},
        },
    }


INFLATE: Mapping[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "inflate", "namespace": NAMESPACE},
    "spec": {
        "replicas": 0,
        "selector": {"matchLabels": {"app": "inflate"}},
        "template": {
            "metadata": {"labels": {"app": "inflate"}},
            "spec": {
                "nodeSelector": {"intent": "apps"},
                "containers": [
                    {
                        "name": "inflate",
                        "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
                        "resources": {"requests": {"cpu": "1", "memory": "1.5Gi"}},
                    }
                ],
            },
        },
    },
}


@attrs.frozen
class View:
    """What the timeline shows at one instant."""

    pending: int
    running: int
    claims: Mapping[str, NodeClaim]
    nodes: frozenset[str]
    nodeclass_ready: bool = False
    instances: frozenset[str] = frozenset()
    """Instances the cloud reports running (moto's with --provider aws; with --provider
    clusterapi, the Machines karpy claimed)."""
    groups: tuple[str, ...] = ()
    """Sorted, the MachineDeployment of each Machine in `instances` (--provider clusterapi)."""


@attrs.define
class Timeline:
    """Prints what changed between two views, with the time since the demo started."""

    out: TextIO
    prices: Mapping[tuple[str, str, str], float]
    started: float = attrs.field(factory=time.monotonic)
    last: View | None = None
    launched: set[str] = attrs.field(factory=set)
    ready: set[str] = attrs.field(factory=set)
    peak_nodes: int = 0
    peak_cost: float = 0.0

    def say(self, message: str) -> None:
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {message}\n")
        self.out.flush()

    def priced(self, key: tuple[str, str, str]) -> str:
        """``<type> in <zone>, <capacity type>, <price>`` of one offering."""
        price = self.prices.get(key)
        cost = f"${price:.4f}/h" if price is not None else "price unknown"
        return f"{key[0]} in {key[1]}, {key[2]}, {cost}"

    def cloud(self, event: Mapping[str, str]) -> None:
        """What moto's bridge reported (karpy.operator.demo_aws)."""
        instance = event.get("instance", "?")
        key = (
            event.get("instance-type", "?"),
            event.get("zone", "?"),
            event.get("capacity-type", "?"),
        )
        messages = {
            "instance-running": f"moto: instance {instance} running: {self.priced(key)}",
            "node-joined": f"moto: node {event.get('node', '?')} joined for {instance}",
            "instance-ended": f"moto: instance {instance} terminated",
            "node-left": f"moto: node {event.get('node', '?')} left with {instance}",
        }
        self.say(messages.get(event.get("event", ""), f"moto: {dict(event)}"))

    def update(self, view: View) -> None:
        last = self.last or View(0, 0, {}, frozenset())
        for name, claim in sorted(view.claims.items()):
            if name not in last.claims:
                requests = ", ".join(f"{k}={v}" for k, v in claim.spec.resources.requests.items())
                self.say(f"nodeclaim {name} created ({requests})")
            if name not in self.launched and _true(claim, "Launched"):
                self.launched.add(name)
                self.say(f"nodeclaim {name} launched: {self.priced(_offering(claim))}")
            if name not in self.ready and _true(claim, "Ready"):
                self.ready.add(name)
                self.say(f"nodeclaim {name} ready as node {claim.status.node_name}")
        for name in sorted(set(last.claims) - set(view.claims)):
            self.say(f"nodeclaim {name} removed")
        if (view.pending, view.running) != (last.pending, last.running):
            self.say(f"pods: {view.pending} pending, {view.running} running")
        self.peak_nodes = max(self.peak_nodes, len(view.nodes))
        self.peak_cost = max(self.peak_cost, self.cost(view))
        self.last = view

    def cost(self, view: View) -> float:
        return sum(self.prices.get(_offering(claim), 0.0) for claim in view.claims.values())


def _offering(claim: NodeClaim) -> tuple[str, str, str]:
    """The instance type, zone and capacity type a NodeClaim was launched with ("?" if unset)."""
    labels = claim.metadata.labels
    return (
        labels.get(wk.LABEL_INSTANCE_TYPE, "?"),
        labels.get(wk.LABEL_TOPOLOGY_ZONE, "?"),
        labels.get(wk.LABEL_CAPACITY_TYPE, "?"),
    )


def _true(claim: NodeClaim, condition: str) -> bool:
    return any(
        c.type == condition and c.status is ConditionStatus.TRUE for c in claim.status.conditions
    )


async def _view(
    client: KubeClient, nodeclass: Mapping[str, Any], cloud: Emulator | Testbed | None = None
) -> View:
    pods = [
        p.obj
        for p in (await client.list(PODS, namespace=NAMESPACE)).items
        if p.obj.metadata.labels.get("app") == "inflate"
        and p.obj.metadata.deletion_timestamp is None
    ]
    claims = {
        c.obj.metadata.name or "": c.obj
        for c in (await client.list(NODECLAIMS)).items
        if c.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == POOL
    }
    nodes = frozenset(
        n.obj.metadata.name or ""
        for n in (await client.list(NODES)).items
        if n.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == POOL
    )
    running = sum(1 for p in pods if _running(p))
    return View(
        len(pods) - running,
        running,
        claims,
        nodes,
        nodeclass_ready=await _ready(client, nodeclass),
        instances=frozenset(cloud.running) if cloud is not None else frozenset(),
        groups=tuple(sorted(cloud.claimed.values())) if isinstance(cloud, Testbed) else (),
    )


async def _ready(client: KubeClient, manifest: Mapping[str, Any]) -> bool:
    try:
        found = await client.request("GET", object_path(manifest))
    except NotFoundError:
        return False
    conditions = found.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _running(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Running"


async def _prices(provider: CloudProvider, client: KubeClient) -> dict[tuple[str, str, str], float]:
    pool: NodePool = await client.get(NODEPOOLS, POOL)
    prices: dict[tuple[str, str, str], float] = {}
    try:
        instance_types = await provider.get_instance_types(pool)
    except CloudProviderError:  # a NodeClass not resolved yet: priced at the next step
        return prices
    for instance_type in instance_types:
        for offering in instance_type.offerings:
            prices[(instance_type.name, offering.zone, offering.capacity_type)] = offering.price
    return prices


@attrs.frozen
class Step:
    """Scale `inflate` to `replicas`, then expect `met` within `within` seconds.

    `hold`: `met` must stay true that long (a 0-replica step must launch nothing for a while,
    not merely at its first look). `not_before`: `met` coming true sooner than that is a failure
    (empty nodes must outlive consolidateAfter).
    """

    title: str
    replicas: int
    expectation: str
    met: Callable[[View], bool]
    within: float
    hold: float = 0.0
    not_before: float = 0.0


@attrs.frozen
class Scenario:
    """What the demo installs and plays for one provider, and the flags karpy runs with."""

    nodeclass: Mapping[str, Any]
    nodepool: Mapping[str, Any]
    steps: tuple[Step, ...]
    flags: tuple[str, ...]


def _emptied(consolidate_after: int, *, expectation: str = "") -> Step:
    """The last step of every walkthrough: inflate at 0, and every node (and instance the cloud
    reports) gone once it has been empty for consolidateAfter, not sooner."""
    return Step(
        "scale inflate to 0",
        0,
        f"pods gone, then every node removed after {consolidate_after}s empty{expectation}",
        lambda v: v.running + v.pending == 0 and not v.claims and not v.nodes and not v.instances,
        consolidate_after + 120.0,
        not_before=max(consolidate_after - 1.0, 0.0),
    )


def _kwok_scenario(consolidate_after: int) -> Scenario:
    """inflate from 0 to 1, to 6 and back to 0 on kwok nodes."""
    steps = (
        Step(
            "inflate at 0 replicas",
            0,
            "no NodeClaim for 5s",
            lambda v: not v.claims,
            15.0,
            hold=5.0,
        ),
        Step(
            "scale inflate to 1",
            1,
            "1 pod running on a new node",
            lambda v: v.running == 1 and bool(v.nodes),
            180.0,
        ),
        Step("scale inflate to 6", 6, "6 pods running", lambda v: v.running == 6, 240.0),
        _emptied(consolidate_after),
    )
    nodeclass = _nodeclass()
    return Scenario(
        nodeclass, _nodepool(nodeclass, consolidate_after), steps, ("--provider", "kwok")
    )


def _aws_scenario(cloud: Emulator, *, consolidate_after: int) -> Scenario:
    """The AWS walkthrough: inflate from 0 to 10 and back to 0 on instances moto launches. The
    NodeClass is resolved first, so that no pod goes pending before karpy can launch for it."""
    nodeclass = cloud.nodeclass(POOL)
    steps = (
        Step(
            "karpy resolves the EC2NodeClass in moto",
            0,
            "EC2NodeClass Ready, no NodeClaim",
            lambda v: v.nodeclass_ready and not v.claims,
            90.0,
        ),
        Step(
            "scale inflate to 10",
            10,
            "10 pods running on nodes of instances launched in moto",
            lambda v: v.running == 10 and bool(v.nodes) and len(v.instances) == len(v.nodes),
            240.0,
        ),
        _emptied(consolidate_after, expectation=" and its instance terminated in moto"),
    )
    nodepool = _nodepool(nodeclass, consolidate_after, requirements=NODEPOOL_REQUIREMENTS)
    return Scenario(nodeclass, nodepool, steps, tuple(cloud.flags()))


def _clusterapi_scenario(bed: Testbed, *, consolidate_after: int) -> Scenario:
    """The walkthrough on Cluster API: small is the cheapest MachineDeployment that fits, and
    full after one Machine, so 1 -> 6 claims one of large; 6 -> 0 removes every Machine karpy
    claimed. The NodeClass is resolved first, so that no pod goes pending before karpy can
    launch for it."""
    nodeclass = bed.nodeclass(POOL)
    steps = (
        Step(
            "karpy resolves the ClusterAPINodeClass",
            0,
            "ClusterAPINodeClass Ready, no NodeClaim",
            lambda v: v.nodeclass_ready and not v.claims,
            90.0,
        ),
        Step(
            "scale inflate to 1",
            1,
            "1 pod running on a Machine karpy claimed of small, the cheapest that fits",
            lambda v: v.running == 1 and bool(v.nodes) and v.groups == ("small",),
            180.0,
        ),
        Step(
            "scale inflate to 6",
            6,
            "6 pods running; small is full, so on one more Machine, of large",
            lambda v: v.running == 6 and v.groups == ("large", "small"),
            240.0,
        ),
        _emptied(consolidate_after, expectation=" and every Machine karpy claimed removed"),
    )
    nodepool = _nodepool(nodeclass, consolidate_after)
    return Scenario(nodeclass, nodepool, steps, tuple(bed.flags()))


async def _play(
    info: ClusterInfo,
    scenario: Scenario,
    *,
    cloud: Emulator | Testbed | None,
    out: TextIO,
    log: TextIO,
) -> bool:
    configure("info", stream=log)
    options = load(
        [
            "--kubeconfig",
            str(info.kubeconfig),
            "--disable-leader-election",
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            "0",
            "--health-probe-port",
            "0",
            *scenario.flags,
        ],
        {},
    )
    components = await build(options)
    client = components.client
    steps = scenario.steps
    results: list[tuple[Step, bool, float]] = []
    try:
        async with asyncio.timeout(60):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
            await apply(client, scenario.nodeclass)
            await apply(client, scenario.nodepool)
            await apply(client, INFLATE)
        provider = components.cloudprovider
        if provider is None:  # build() always makes one; kept explicit for the type checker
            raise RuntimeError("karpy demo: the daemon was built without a cloud provider")
        timeline = Timeline(out=out, prices={})
        look = partial(_view, client, scenario.nodeclass, cloud)
        stop = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            supervised = group.create_task(Supervisor(components, stop=stop).run())
            watched = group.create_task(_watch(cloud, timeline))
            try:
                for step in steps:
                    if not timeline.prices:
                        timeline.prices = await _prices(provider, client)
                    timeline.say(f"== {step.title}: expecting {step.expectation}")
                    await scale(client, INFLATE, step.replicas)
                    began = time.monotonic()
                    ok = await _until(look, timeline, step)
                    results.append((step, ok, time.monotonic() - began))
                    timeline.say(
                        f"   {'ok' if ok else 'FAILED'} in {time.monotonic() - began:.1f}s"
                    )
                    if not ok:
                        break
            finally:
                stop.set()
            async with asyncio.timeout(60):
                await supervised
            watched.cancel()
    finally:
        await components.close()
    _summary(out, results, timeline_peak=(timeline.peak_nodes, timeline.peak_cost), steps=steps)
    return len(results) == len(steps) and all(ok for _, ok, _ in results)


async def _watch(cloud: Emulator | Testbed | None, timeline: Timeline) -> None:
    """Put what moto's bridge or the Cluster API setup reports on the timeline (nothing to do
    for kwok)."""
    if isinstance(cloud, Testbed):
        async for event in cloud.events():
            timeline.say(f"{cloud.label}: {describe(event)}")
    elif cloud is not None:
        async for event in cloud.events():
            timeline.cloud(event)


async def _until(look: Callable[[], Awaitable[View]], timeline: Timeline, step: Step) -> bool:
    """Whether `step.met` came true within the step's time, no sooner than `not_before`, and
    stayed true for `hold` seconds."""
    began = time.monotonic()
    held_since: float | None = None
    while True:
        view = await look()
        timeline.update(view)
        now = time.monotonic()
        if not step.met(view):
            held_since = None
        elif now - began < step.not_before:
            timeline.say(f"   too early: after {now - began:.1f}s, expected {step.not_before:.0f}s")
            return False
        else:
            held_since = now if held_since is None else held_since
            if now - held_since >= step.hold:
                return True
        if now - began > step.within:
            return False
        await asyncio.sleep(0.5)


def _summary(
    out: TextIO,
    results: list[tuple[Step, bool, float]],
    *,
    timeline_peak: tuple[int, float],
    steps: tuple[Step, ...],
) -> None:
    out.write("\nsummary\n")
    done = {step.title: (ok, took) for step, ok, took in results}
    for step in steps:
        if step.title in done:
            ok, took = done[step.title]
            verdict = "ok    " if ok else "FAILED"
            out.write(f"  {verdict}  {step.title} ({took:.1f}s): {step.expectation}\n")
        else:
            out.write(f"  skipped {step.title}\n")
    nodes, cost = timeline_peak
    out.write(f"  peak: {nodes} node(s), ${cost:.4f}/h\n")
    out.flush()


async def _run(
    info: ClusterInfo,
    *,
    provider: str,
    consolidate_after: int,
    out: TextIO,
    log: TextIO,
    cloud_log: Path,
) -> bool:
    if provider == "kwok":
        return await _play(info, _kwok_scenario(consolidate_after), cloud=None, out=out, log=log)
    if provider == "clusterapi":
        with cloud_log.open("a") as setup_log:
            async with testbed(kubeconfig=info.kubeconfig, log=setup_log) as bed:
                out.write(
                    f"Cluster API v{bed.version}: core manager running; MachineDeployments small "
                    f"(at most {SMALL_MAX_SIZE} Machine) and large\n"
                )
                scenario = _clusterapi_scenario(bed, consolidate_after=consolidate_after)
                return await _play(info, scenario, cloud=bed, out=out, log=log)
    with cloud_log.open("a") as emulator_log:
        async with emulator(
            kubeconfig=info.kubeconfig, cluster_name=info.name, log=emulator_log
        ) as cloud:
            # karpy's AWS clients read credentials from the environment: moto's fake ones.
            os.environ.update(cloud.environment())
            scenario = _aws_scenario(cloud, consolidate_after=consolidate_after)
            return await _play(info, scenario, cloud=cloud, out=out, log=log)


def main(argv: list[str]) -> int:
    """Entry point of ``karpy demo``; returns the exit code (0 only if every step held)."""
    parser = argparse.ArgumentParser(prog="karpy demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="karpy-demo", help="local cluster name")
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="kwok",
        help="kwok (default: the inflate walkthrough on simulated nodes), aws (the same at 10 "
        "replicas with karpy's AWS provider against moto on 127.0.0.1; needs the dev extra) or "
        "clusterapi (the walkthrough with karpy-clusterapi on Cluster API's core manager and an "
        "infrastructure stand-in; needs karpy-clusterapi installed)",
    )
    parser.add_argument(
        "--consolidate-after",
        type=int,
        default=30,
        help="seconds a node must stay empty before it is removed (default 30)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    args = parser.parse_args(argv)
    # A terminated demo still tears its cluster down (the finally below runs on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    cluster = LocalCluster(args.name)
    try:
        info = cluster.up()
    except LocalClusterError as error:
        sys.stderr.write(f"karpy demo: {error}\n")
        return 1
    # Beside the cluster's state directory, which `down` removes: the logs outlive the demo.
    log_path = Path(info.state_dir).parent / f"{args.name}.karpy.log"
    cloud = {"aws": "moto"}.get(args.provider, args.provider)
    cloud_log = Path(info.state_dir).parent / f"{args.name}.{cloud}.log"
    sys.stdout.write(f"karpy's own logs: {log_path}\n")
    if args.provider == "aws":
        sys.stdout.write(f"moto's and the kubelet bridge's logs: {cloud_log}\n")
    if args.provider == "clusterapi":
        sys.stdout.write(f"Cluster API's setup's logs: {cloud_log}\n")
    sys.stdout.write("\n")
    silence_solver_banner()
    passed = False
    try:
        with log_path.open("a") as log:
            passed = uvloop.run(
                _run(
                    info,
                    provider=args.provider,
                    consolidate_after=args.consolidate_after,
                    out=sys.stdout,
                    log=log,
                    cloud_log=cloud_log,
                )
            )
    except (EmulatorError, TestbedError) as error:
        sys.stderr.write(f"karpy demo: {error}\n{last_line(cloud_log)}\n")
    except ProviderError as error:  # karpy-clusterapi not installed, say
        sys.stderr.write(f"karpy demo: {error}\n")
    finally:
        if not args.keep:
            cluster.down()
    return 0 if passed else 1
