"""Karpenter's performance suite (kubernetes-sigs/karpenter `test/suites/performance`) on karpy.

Karpenter publishes what its controller must do on kwok: how long until every pod is healthy, how
full the nodes it made are, how much memory and CPU the controller may use. This rebuilds those
scenarios — the same Deployments (pause pods of the same requests, spreads, anti-affinities and
annotations), the same NodePool settings (no limits, `WhenEmptyOrUnderutilized`, `consolidateAfter:
30s`, a 100 % budget, on-demand Linux nodes below 32 vCPU) and the same measurements — against
karpy's kwok provider on the local control plane, and prints one table: each scenario's phase and
measure, Karpenter's threshold, karpy's figure and their ratio.

Scenarios: basic (1,000 pods, then 700 with consolidation), hostname (1,000, half of them spread one
per node), xl (2,000 of the same), wide (30 Deployments of varied size, zonal spread, some hostname
spread or anti-affinity), dnd (do-not-disrupt pods among 1,100), drift (600 pods, then the
NodePool's template changes), interference (self anti-affinity, scaled out, in and sideways), and
the many-NodePools sweep (`pools-50` … `pools-500`: N distinct NodePools, each with its own
Deployment of 2 pods; out, in to 1, out again).

Measured per phase, as Karpenter's report does:

* time: from the scale request until every pod is healthy (Running and Ready); for a scale-in or
  drift, until the last NodeClaim was created or began deleting, once every pod is healthy and
  nothing changed for `--quiet` seconds (Karpenter's report adds its 3-minute quiet window to the
  time; this does not);
* reserved cpu / memory utilisation: the pods' requests on each of karpy's nodes over the node's
  allocatable, averaged per node (Karpenter's monitor `AvgUtilization`), at the phase's end;
* controller p95 RSS and average cores: karpy runs as its own process; its /proc is sampled each
  second (RSS) and its CPU time is read at the phase's ends;
* consolidation rounds: the times the fleet went from no node disrupting (tainted
  `karpenter.sh/disrupted` or deleting) to some;
* karpy's apiserver requests per second: from the apiserver's audit log, by karpy's User-Agent
  (watches excluded: the log records one only when it ends).

Karpenter's thresholds come from its suite's assertions (each phase's `Limits` in `scenarios`
below, with the test file each comes from); where its suite only bounds a phase by its timeout, that
timeout is the threshold. kwok sizes here are karpy's kwok catalog (AWS-like c/m/r/t families up
to 8xlarge), so "below 32 vCPU" is the `instance-cpu` label (Karpenter's kwok names sizes by their
vCPU count), and the sweep pins each NodePool to one family and size of that catalog.

    .venv/bin/python benchmarks/perf_suite.py                      # every scenario, 1 cluster each
    .venv/bin/python benchmarks/perf_suite.py --scenarios basic,pools-50
    .venv/bin/python benchmarks/perf_suite.py --scenarios basic --profile /tmp/karpy.prof
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from karpy.apis.crds import all_crds, render_crd
from karpy.apis.v1 import labels as wk
from karpy.core.resources import CPU, MEMORY, parse_resource
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.install import apply, install_crds, scale
from karpy.localcluster import ClusterInfo, LocalCluster, audit
from karpy.runtime.clock import SystemClock
from karpy_kwok.apis import labels as kwoklabels

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "default"
SUITE_LABEL = "karpy-perf-suite"
"""Every pod of the suite carries it: what the healthy count and the utilisation read."""
CLIENT_USER_AGENT = "karpy-perf-suite"
"""The suite's own client names itself so: its polling is not karpy's requests."""
NODECLASS = "perf"
POOL_LABEL = "mnp-pool"
"""The many-NodePools sweep's per-pool label, requirement and taint key (Karpenter's name)."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CLOCK = SystemClock()
SMALL = ("900m", "3100Mi")
LARGE = ("3500m", "28Gi")
NONE = "-"
"""A table cell with no threshold or no ratio."""


# ---------------------------------------------------------------- what a scenario is


@attrs.frozen
class App:
    """One Deployment of pause pods, as Karpenter's `test.CreateDeploymentOptions` makes it."""

    name: str
    cpu: str
    memory: str
    hostname_spread: bool = False
    zone_spread: bool = False
    anti_affinity: bool = False
    do_not_disrupt: bool = False
    pool: str = ""  # the sweep: a nodeSelector and toleration for this NodePool's label and taint


@attrs.frozen
class Limits:
    """Karpenter's bounds for one phase; None where its suite sets none."""

    minutes: float
    cpu_util: float | None = None
    memory_util: float | None = None
    rss_mb: float | None = None
    cores: float | None = None
    source: str = ""


@attrs.frozen
class Phase:
    """Set these replica counts (creating Deployments not yet scaled), then wait as `kind` says:
    "out" until `pods` are healthy; "in" until they are and the fleet settles; "drift" after
    changing the NodePools' template, until every node from before is replaced and it settles."""

    name: str
    kind: str
    replicas: Mapping[str, int]
    pods: int
    limits: Limits


@attrs.frozen
class Scenario:
    name: str
    apps: tuple[App, ...]
    phases: tuple[Phase, ...]
    pools: int = 0  # 0: one shared NodePool; N: the sweep's N distinct NodePools


@attrs.frozen
class Measured:
    """One phase's figures."""

    scenario: str
    phase: str
    kind: str
    seconds: float
    completed: bool
    pods: int
    nodes: int
    cpu_util: float
    memory_util: float
    rss_p95_mb: float
    cores: float
    rounds: int
    requests_per_s: float
    load: float
    limits: Limits
    note: str = ""


def _scaled(count: int, factor: float) -> int:
    return max(1, round(count * factor)) if count else 0


def scenarios(
    scale_factor: float = 1.0, pool_counts: Sequence[int] = (50, 100, 250, 500)
) -> dict[str, Scenario]:
    """Karpenter's scenarios, pod counts times `scale_factor` (1.0: Karpenter's own)."""

    def n(count: int) -> int:
        return _scaled(count, scale_factor)

    def phase(name: str, kind: str, limits: Limits, **replicas: int) -> Phase:
        counts = {app.replace("_", "-"): n(count) for app, count in replicas.items()}
        return Phase(name, kind, counts, sum(counts.values()), limits)

    small, large = App("small-resource-app", *SMALL), App("large-resource-app", *LARGE)
    spread = attrs.evolve(small, hostname_spread=True)
    basic = Scenario(
        "basic",
        (small, large),
        (
            phase(
                "scale-out",
                "out",
                Limits(2, 0.53, 0.65, 260, 0.5, "basic_test.go; p95/cores: basic/scaleOut"),
                small_resource_app=500,
                large_resource_app=500,
            ),
            phase(
                "consolidation",
                "in",
                Limits(20, rss_mb=260, cores=0.25, source="basic_test.go; basic/consolidation"),
                small_resource_app=350,
                large_resource_app=350,
            ),
        ),
    )
    hostname = Scenario(
        "hostname",
        (spread, large),
        (
            phase(
                "scale-out",
                "out",
                Limits(5, 0.38, 0.40, 680, source="host_name_spreading_test.go"),
                small_resource_app=500,
                large_resource_app=500,
            ),
            phase(
                "consolidation",
                "in",
                Limits(10, 0.38, 0.40, 680, source="host_name_spreading(_test).go"),
                small_resource_app=350,
                large_resource_app=350,
            ),
        ),
    )
    xl = Scenario(
        "xl",
        (spread, large),
        (
            phase(
                "scale-out",
                "out",
                Limits(35, 0.38, 0.40, 1330, source="host_name_spreading_xl_test.go"),
                small_resource_app=1000,
                large_resource_app=1000,
            ),
            phase(
                "consolidation",
                "in",
                Limits(35, 0.38, 0.40, 1330, source="host_name_spreading_xl_test.go"),
                small_resource_app=700,
                large_resource_app=700,
            ),
        ),
    )
    wide_apps, wide_out, wide_in = _wide(n)
    wide = Scenario(
        "wide",
        wide_apps,
        (
            Phase(
                "scale-out",
                "out",
                wide_out,
                sum(wide_out.values()),
                Limits(5, 0.20, 0.20, source="wide_deployments_test.go"),
            ),
            Phase(
                "consolidation",
                "in",
                wide_in,
                sum(wide_in.values()),
                Limits(40, 0.20, 0.20, source="wide_deployments_test.go"),
            ),
        ),
    )
    protected = App("do-not-disrupt-app", "900m", "450Mi", do_not_disrupt=True)
    dnd = Scenario(
        "dnd",
        (spread, large, protected),
        (
            phase(
                "scale-out",
                "out",
                Limits(4, 0.38, 0.40, source="do_no_disrupt_test.go"),
                small_resource_app=500,
                large_resource_app=500,
                do_not_disrupt_app=100,
            ),
            phase(
                "consolidation",
                "in",
                Limits(35, 0.38, 0.40, source="do_no_disrupt_test.go"),
                small_resource_app=250,
                large_resource_app=250,
                do_not_disrupt_app=100,
            ),
        ),
    )
    drift = Scenario(
        "drift",
        (App("hostname-spread-app", *SMALL, hostname_spread=True), App("standard-app", *LARGE)),
        (
            phase(
                "scale-out",
                "out",
                Limits(5, source="drift_performance_test.go"),
                hostname_spread_app=300,
                standard_app=300,
            ),
            phase(
                "drift",
                "drift",
                Limits(50, source="drift_performance_test.go"),
                hostname_spread_app=300,
                standard_app=300,
            ),
        ),
    )
    anti_small = attrs.evolve(small, anti_affinity=True)
    anti_large = attrs.evolve(large, anti_affinity=True)
    interference = Scenario(
        "interference",
        (anti_small, anti_large),
        (
            phase(
                "scale-out",
                "out",
                Limits(5, 0.38, 0.40, 620, 0.90, "interference_test.go"),
                small_resource_app=500,
            ),
            phase(
                "interference",
                "out",
                Limits(10, 0.38, 0.40, 1205, 1.30, "interference_test.go"),
                small_resource_app=250,
                large_resource_app=500,
            ),
            phase(
                "consolidation",
                "in",
                Limits(25, 0.38, 0.40, 820, 0.80, "interference_test.go"),
                small_resource_app=400,
                large_resource_app=200,
            ),
        ),
    )
    found = {s.name: s for s in (basic, hostname, xl, wide, dnd, drift, interference)}
    for count in pool_counts:
        found[f"pools-{count}"] = _pools(count)
    return found


WIDE_CPUS = (
    "240m 450m 650m 900m 1400m 1900m 2400m 2800m 3300m 3700m",
    "2300m 900m 1300m 2800m 1800m 1850m 3300m 3800m 225m 450m",
    "700m 900m 1300m 1800m 2400m 2800m 3400m 3800m 3300m 2800m",
)
WIDE_MEMORY = (
    "300Mi 400Mi 700Mi 1Gi 2Gi 4Gi 8Gi 4Gi 16Gi 10Gi",
    "64Gi 30Gi 32Gi 32Gi 30Gi 20Gi 30Gi 300Mi 500Mi 750Mi",
    "1Gi 2Gi 4Gi 8Gi 16Gi 32Gi 28Gi 64Gi 13Gi 24Gi",
)


def _wide(n: Callable[[int], int]) -> tuple[tuple[App, ...], dict[str, int], dict[str, int]]:
    """Karpenter's 30 wide Deployments: fixed sizes, zonal spread for all, hostname
    anti-affinity for the first three and hostname spread for the next three; 1,000 pods, then
    700."""
    sizes = [  # (cpu, memory) of Deployments 1 ... 30, ten to a line
        *zip(WIDE_CPUS[0].split(), WIDE_MEMORY[0].split(), strict=True),
        *zip(WIDE_CPUS[1].split(), WIDE_MEMORY[1].split(), strict=True),
        *zip(WIDE_CPUS[2].split(), WIDE_MEMORY[2].split(), strict=True),
    ]
    apps = tuple(
        App(
            f"wide-deployment-{i + 1}",
            *sizes[i],
            zone_spread=True,
            anti_affinity=i < 3,
            hostname_spread=3 <= i < 6,
        )
        for i in range(30)
    )
    out = {app.name: n(35 if i < 20 else 30) for i, app in enumerate(apps)}
    scaled_in = {app.name: n(25 if i < 20 else 20) for i, app in enumerate(apps)}
    return apps, out, scaled_in


def _pools(count: int) -> Scenario:
    """The many-NodePools sweep: `count` NodePools, each with a Deployment of 2 pods pinned to
    it (100m, 128Mi); out to 2 per pool, in to 1, out to 2 again."""
    apps = tuple(
        App(f"mnp-{i:03d}-dep", "100m", "128Mi", pool=f"mnp-{i:03d}") for i in range(count)
    )
    sweep = "many_nodepools_test.go (phase timeout); p95/cores: manyNodePools/*"
    out = Limits(30, rss_mb=300, cores=0.80, source=sweep)
    scaled_in = Limits(30, rss_mb=300, cores=0.30, source=sweep)
    two = {app.name: 2 for app in apps}
    one = {app.name: 1 for app in apps}
    return Scenario(
        f"pools-{count}",
        apps,
        (
            Phase("scale-out", "out", two, 2 * count, out),
            Phase("scale-in", "in", one, count, scaled_in),
            Phase("scale-out again", "out", two, 2 * count, out),
        ),
        pools=count,
    )


# ---------------------------------------------------------------- manifests

SWEEP_FAMILIES = ("c5", "m5", "r5")
SWEEP_SIZES = ("large", "xlarge", "2xlarge", "4xlarge")


def nodeclass() -> dict[str, Any]:
    return {
        "apiVersion": f"{kwoklabels.KWOK_GROUP}/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": NODECLASS},
    }


def nodepool(name: str, *, consolidate_after: str, index: int | None = None) -> dict[str, Any]:
    """Karpenter's suite NodePool; with `index`, the sweep's pool of that number (one family
    and size, its own label, requirement and taint)."""
    requirements: list[dict[str, Any]] = [
        {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": wk.LABEL_OS, "operator": "In", "values": [wk.OS_LINUX]},
        {"key": kwoklabels.LABEL_KWOK_INSTANCE_CPU, "operator": "Lt", "values": ["32"]},
    ]
    template: dict[str, Any] = {
        "requirements": requirements,
        "nodeClassRef": {
            "group": kwoklabels.KWOK_GROUP,
            "kind": "KWOKNodeClass",
            "name": NODECLASS,
        },
    }
    labels: dict[str, str] = {}
    if index is not None:
        family = SWEEP_FAMILIES[index % len(SWEEP_FAMILIES)]
        size = SWEEP_SIZES[(index // len(SWEEP_FAMILIES)) % len(SWEEP_SIZES)]
        requirements += [
            {"key": kwoklabels.LABEL_KWOK_INSTANCE_FAMILY, "operator": "In", "values": [family]},
            {"key": kwoklabels.LABEL_KWOK_INSTANCE_SIZE, "operator": "In", "values": [size]},
            {"key": POOL_LABEL, "operator": "In", "values": [name]},
        ]
        labels[POOL_LABEL] = name
        template["taints"] = [{"key": POOL_LABEL, "value": name, "effect": "NoSchedule"}]
    return {
        "apiVersion": f"{wk.GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"metadata": {"labels": labels}, "spec": template},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def deployment(app: App, namespace: str) -> dict[str, Any]:
    """The app's Deployment at 0 replicas."""
    selector = {"matchLabels": {"app": app.name}}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": app.cpu, "memory": app.memory}},
            }
        ],
    }
    spreads = []
    if app.zone_spread:
        spreads.append(_spread(wk.LABEL_TOPOLOGY_ZONE, selector))
    if app.hostname_spread:
        spreads.append(_spread(wk.LABEL_HOSTNAME, selector))
    if spreads:
        spec["topologySpreadConstraints"] = spreads
    if app.anti_affinity:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": wk.LABEL_HOSTNAME, "labelSelector": selector}
                ]
            }
        }
    if app.pool:
        spec["nodeSelector"] = {POOL_LABEL: app.pool}
        spec["tolerations"] = [
            {"key": POOL_LABEL, "operator": "Equal", "value": app.pool, "effect": "NoSchedule"}
        ]
    annotations = {wk.ANNOTATION_DO_NOT_DISRUPT: "true"} if app.do_not_disrupt else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app.name, "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": selector,
            "template": {
                "metadata": {
                    "labels": {"app": app.name, SUITE_LABEL: "true"},
                    "annotations": annotations,
                },
                "spec": spec,
            },
        },
    }


def _spread(key: str, selector: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector,
    }


# ---------------------------------------------------------------- the karpy process


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process (/proc/<pid>/stat, utime and stime)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def checkout_path(root: Path) -> str:
    """A PYTHONPATH that loads karpy and every provider from the checkout at `root`."""
    paths = [root, *(root / "providers" / name for name in ("aws", "kwok", "clusterapi"))]
    return os.pathsep.join(str(path) for path in paths)


def spawn_karpy(
    root: Path, kubeconfig: Path, log: Path, profile: Path | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """`karpy run` (kwok provider) from the checkout at `root`, whatever the caller's path says,
    optionally under cProfile; the process and its health port."""
    port = _free_port()
    runner = ["-m", "cProfile", "-o", str(profile)] if profile else []
    command = [
        sys.executable,
        *runner,
        "-m",
        "karpy",
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--disable-leader-election",
        "--bind-address",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--health-probe-port",
        str(port),
        "--provider",
        "kwok",
    ]
    env = {
        **os.environ,
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "warning"),
        "PYTHONPATH": checkout_path(root),
    }
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    return process, port


@attrs.define
class Karpy:
    """`karpy run` (kwok provider) as a child process, optionally under cProfile."""

    process: subprocess.Popen[bytes]
    health_port: int

    @classmethod
    def start(cls, kubeconfig: Path, log: Path, profile: Path | None = None) -> Karpy:
        return cls(*spawn_karpy(ROOT, kubeconfig, log, profile))

    @property
    def pid(self) -> int:
        return self.process.pid

    async def ready(self, within: float = 120.0) -> None:
        """Wait until karpy answers /readyz (its informers have listed)."""
        deadline = time.monotonic() + within
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                msg = f"karpy exited with {self.process.returncode} before it was ready"
                raise RuntimeError(msg)
            with contextlib.suppress(OSError):
                status = await asyncio.to_thread(_status, url)
                if status == 200:
                    return
            await asyncio.sleep(0.5)
        msg = f"karpy was not ready within {within:.0f} s"
        raise TimeoutError(msg)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def _status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (a local http URL)
        return int(response.status)


# ---------------------------------------------------------------- reading the cluster


async def _items(client: KubeClient, path: str, selector: str = "") -> list[Mapping[str, Any]]:
    """Every object at a collection path (paginated), raw."""
    items: list[Mapping[str, Any]] = []
    token = ""
    while True:
        query = [("limit", "500")]
        if selector:
            query.append(("labelSelector", selector))
        if token:
            query.append(("continue", token))
        page = await client.request("GET", path, query=query)
        items.extend(page.get("items") or [])
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return items


@attrs.frozen
class Snapshot:
    """What one poll saw."""

    healthy: int
    claims: frozenset[str]
    disrupting: frozenset[str]  # karpy's nodes tainted disrupted or deleting, and deleting claims
    nodes: tuple[Mapping[str, Any], ...]  # karpy's nodes, not deleting
    pods: tuple[Mapping[str, Any], ...]


def _healthy(pod: Mapping[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def snapshot(client: KubeClient, namespace: str) -> Snapshot:
    pods = await _items(client, f"/api/v1/namespaces/{namespace}/pods", f"{SUITE_LABEL}=true")
    nodes = await _items(client, "/api/v1/nodes", wk.LABEL_NODEPOOL)
    claims = await _items(client, f"/apis/{wk.GROUP}/v1/nodeclaims")
    disrupting = {
        f"node/{n['metadata']['name']}"
        for n in nodes
        if n["metadata"].get("deletionTimestamp")
        or any(
            t.get("key") == wk.TAINT_DISRUPTED_KEY
            for t in (n.get("spec") or {}).get("taints") or []
        )
    } | {f"claim/{c['metadata']['name']}" for c in claims if c["metadata"].get("deletionTimestamp")}
    return Snapshot(
        healthy=sum(1 for p in pods if _healthy(p)),
        claims=frozenset(c["metadata"]["name"] for c in claims),
        disrupting=frozenset(disrupting),
        nodes=tuple(n for n in nodes if not n["metadata"].get("deletionTimestamp")),
        pods=tuple(pods),
    )


def utilisation(seen: Snapshot) -> tuple[float, float]:
    """Reserved cpu and memory: each node's pod requests over its allocatable, averaged per
    node (all pods on it, the suite's and any other)."""
    requested: dict[str, list[int]] = {}
    for pod in seen.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or pod["metadata"].get("deletionTimestamp") or phase in {"Succeeded", "Failed"}:
            continue
        totals = requested.setdefault(node, [0, 0])
        for container in pod["spec"].get("containers") or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            totals[0] += parse_resource(CPU, requests.get("cpu", "0"))
            totals[1] += parse_resource(MEMORY, requests.get("memory", "0"))
    cpu, memory = [], []
    for node in seen.nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        totals = requested.get(node["metadata"]["name"], [0, 0])
        cpu.append(totals[0] / max(1, parse_resource(CPU, allocatable.get("cpu", "0"))))
        memory.append(totals[1] / max(1, parse_resource(MEMORY, allocatable.get("memory", "0"))))
    if not cpu:
        return 0.0, 0.0
    return sum(cpu) / len(cpu), sum(memory) / len(memory)


def p95(samples: Sequence[int]) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return float(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)])


# ---------------------------------------------------------------- running a scenario


@attrs.frozen
class Options:
    quiet: float = 120.0  # a scale-in or drift has settled after this long without a change
    consolidate_after: str = "30s"
    timeout_factor: float = 3.0  # a phase gives up after its Karpenter limit times this
    poll: float = 1.0
    timeline: Path | None = None  # each poll's counts appended here (tab-separated), if given


DEFAULTS = Options()


@attrs.frozen
class Window:
    """A phase's stretch of wall clock, for the audit log."""

    start: datetime
    end: datetime


async def _connect(kubeconfig: Path) -> KubeClient:
    client = await KubeClient.connect(kubeconfig, request_timeout=60.0)
    client.sdk_client.user_agent = CLIENT_USER_AGENT
    return client


async def prepare(client: KubeClient, scenario: Scenario, namespace: str, options: Options) -> None:
    """CRDs, the KWOKNodeClass, the NodePool(s) and every Deployment at 0 replicas."""
    async with asyncio.timeout(120):
        await install_crds(client, [render_crd(crd) for crd in all_crds()])
    await apply(client, nodeclass())
    if scenario.pools:
        for index in range(scenario.pools):
            await apply(
                client,
                nodepool(
                    f"mnp-{index:03d}", consolidate_after=options.consolidate_after, index=index
                ),
            )
    else:
        await apply(client, nodepool("perf", consolidate_after=options.consolidate_after))
    for app in scenario.apps:
        await apply(client, deployment(app, namespace))


async def _pools_ready(client: KubeClient, count: int, within: float) -> None:
    """The sweep's warm-up: wait until karpy reports every NodePool Ready (Karpenter's suite
    sleeps 60 s for its NodePool controllers to reach steady state)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pools = await _items(client, f"/apis/{wk.GROUP}/v1/nodepools")
        ready = sum(
            1
            for p in pools
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )
        if ready >= count:
            return
        await asyncio.sleep(1.0)
    msg = f"NodePools not all Ready within {within:.0f} s"
    raise TimeoutError(msg)


class _Sampler:
    """karpy's RSS each second, into whichever list the current phase holds."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[int] = []

    async def run(self) -> None:
        while True:
            self.samples.append(rss_bytes(self.pid))
            await asyncio.sleep(1.0)


async def run_phase(
    client: KubeClient,
    scenario: Scenario,
    phase: Phase,
    *,
    namespace: str,
    karpy: Karpy,
    sampler: _Sampler,
    options: Options,
) -> tuple[Measured, Window]:
    apps = {app.name: app for app in scenario.apps}
    before = await snapshot(client, namespace)
    load = os.getloadavg()[0]
    sampler.samples = []
    wall, cpu = CLOCK.now(), cpu_seconds(karpy.pid)
    if phase.kind == "drift":
        stamp = str(int(CLOCK.now().timestamp()))
        pools = await _items(client, f"/apis/{wk.GROUP}/v1/nodepools")
        for pool in pools:
            await client.request(
                "PATCH",
                f"/apis/{wk.GROUP}/v1/nodepools/{pool['metadata']['name']}",
                body={
                    "spec": {
                        "template": {"metadata": {"annotations": {"test-drift-trigger": stamp}}}
                    }
                },
                content_type="application/merge-patch+json",
            )
    for name, replicas in phase.replicas.items():
        await scale(client, deployment(apps[name], namespace), replicas)
    started = time.monotonic()
    limit = phase.limits.minutes * 60 * options.timeout_factor
    state = before
    last_change = started
    reached: float | None = None  # when every pod was first healthy
    rounds = 0
    done = False
    while time.monotonic() - started < limit:
        await asyncio.sleep(options.poll)
        now_seen = await snapshot(client, namespace)
        now = time.monotonic()
        if now_seen.disrupting and not state.disrupting:
            rounds += 1
        if (now_seen.claims, now_seen.disrupting) != (state.claims, state.disrupting):
            last_change = now
        state = now_seen
        if options.timeline is not None:
            _trace(options.timeline, f"{scenario.name}/{phase.name}", now - started, state, karpy)
        if state.healthy < phase.pods:
            continue
        reached = reached or now
        if phase.kind == "out":
            done = True
            break
        if phase.kind == "drift" and state.claims & before.claims:
            continue
        if not state.disrupting and now - max(last_change, reached) >= options.quiet:
            done = True
            break
    end_wall, end_cpu = CLOCK.now(), cpu_seconds(karpy.pid)
    seconds = (max(last_change, reached or 0.0) if done else time.monotonic()) - started
    cpu_util, memory_util = utilisation(state)
    wall_seconds = max(1e-9, (end_wall - wall).total_seconds())
    note = ""
    if not done:
        note = f"incomplete: {state.healthy}/{phase.pods} pods healthy at the limit"
    if scenario.name == "dnd" and phase.kind == "in":
        note = _protected(before, state, note)
    measured = Measured(
        scenario=scenario.name,
        phase=phase.name,
        kind=phase.kind,
        seconds=seconds,
        completed=done,
        pods=state.healthy,
        nodes=len(state.nodes),
        cpu_util=cpu_util,
        memory_util=memory_util,
        rss_p95_mb=p95(sampler.samples) / 2**20,
        cores=(end_cpu - cpu) / wall_seconds,
        rounds=rounds,
        requests_per_s=0.0,
        load=load,
        limits=phase.limits,
        note=note,
    )
    return measured, Window(wall, end_wall)


def _trace(path: Path, where: str, seconds: float, seen: Snapshot, karpy: Karpy) -> None:
    """One line of the timeline: where the pods are (unbound, bound, healthy), the NodeClaims,
    the nodes and how many are Ready, karpy's CPU seconds so far — what says whether karpy,
    kube-scheduler or the nodes hold a phase up."""
    bound = sum(1 for p in seen.pods if (p.get("spec") or {}).get("nodeName"))
    ready = sum(
        1
        for n in seen.nodes
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
    )
    # Nodes kube-scheduler cannot use yet: karpy lifts its unregistered taint at registration
    # and the node's own not-ready taints go when it is Ready (the sweep's pool taints stay).
    tainted = sum(
        1
        for n in seen.nodes
        if any(
            t.get("effect") in {"NoSchedule", "NoExecute"} and t.get("key") != POOL_LABEL
            for t in (n.get("spec") or {}).get("taints") or []
        )
    )
    fields = (
        where,
        f"{seconds:.1f}",
        f"pods={len(seen.pods)}",
        f"unbound={len(seen.pods) - bound}",
        f"healthy={seen.healthy}",
        f"claims={len(seen.claims)}",
        f"nodes={len(seen.nodes)}",
        f"ready={ready}",
        f"tainted={tainted}",
        f"disrupting={len(seen.disrupting)}",
        f"karpy_cpu={cpu_seconds(karpy.pid):.1f}",
    )
    with path.open("a") as sink:
        sink.write("\t".join(fields) + "\n")


def _protected(before: Snapshot, after: Snapshot, note: str) -> str:
    """Karpenter's do-not-disrupt check: the nodes that held protected pods are still there."""
    held = {
        p["spec"].get("nodeName")
        for p in before.pods
        if p["metadata"]["labels"].get("app") == "do-not-disrupt-app" and p["spec"].get("nodeName")
    }
    kept = held & {n["metadata"]["name"] for n in after.nodes}
    return "; ".join(s for s in (note, f"protected nodes kept {len(kept)}/{len(held)}") if s)


async def run_scenario(
    info: ClusterInfo,
    scenario: Scenario,
    *,
    namespace: str = NAMESPACE,
    options: Options = Options(),
    log: Path | None = None,
    profile: Path | None = None,
) -> list[Measured]:
    """Set the scenario up on the running cluster, start karpy, run each phase and stop karpy;
    the phases' figures, with karpy's requests per second from the audit log."""
    log = log or Path(tempfile.gettempdir()) / f"karpy-perf-{scenario.name}.log"
    mark = audit.lines(info.audit_log)
    client = await _connect(info.kubeconfig)
    karpy: Karpy | None = None
    results: list[tuple[Measured, Window]] = []
    try:
        await prepare(client, scenario, namespace, options)
        karpy = Karpy.start(info.kubeconfig, log, profile)
        await karpy.ready()
        if scenario.pools:
            await _pools_ready(client, scenario.pools, within=600)
        sampler = _Sampler(karpy.pid)
        async with asyncio.TaskGroup() as group:
            sampling = group.create_task(sampler.run())
            try:
                for phase in scenario.phases:
                    results.append(
                        await run_phase(
                            client,
                            scenario,
                            phase,
                            namespace=namespace,
                            karpy=karpy,
                            sampler=sampler,
                            options=options,
                        )
                    )
                    if not results[-1][0].completed:
                        break
            finally:
                sampling.cancel()
    finally:
        if karpy is not None:
            await asyncio.to_thread(karpy.stop)
        await client.close()
    requests = [r for r in audit.karpy_requests(info.audit_log, skip=mark) if r.verb != "watch"]
    rated = []
    for measured, window in results:
        within = sum(1 for r in requests if window.start <= r.received < window.end)
        seconds = max(1e-9, (window.end - window.start).total_seconds())
        rated.append(attrs.evolve(measured, requests_per_s=within / seconds))
    return rated


async def clear(info: ClusterInfo, namespace: str, within: float = 300.0) -> None:
    """Remove what a scenario left once karpy has stopped — the suite's Deployments and pods,
    every NodePool, NodeClaim and karpy node (finalizers lifted: no karpy is left to honour
    them) — so the next scenario starts on an empty cluster without a new control plane."""
    client = await _connect(info.kubeconfig)
    try:
        for item in await _items(client, f"/apis/apps/v1/namespaces/{namespace}/deployments"):
            labels = item["spec"]["template"]["metadata"].get("labels") or {}
            if SUITE_LABEL in labels:
                await _delete(client, f"/apis/apps/v1/namespaces/{namespace}/deployments", item)
        pods = f"/api/v1/namespaces/{namespace}/pods"
        for pod in await _items(client, pods, f"{SUITE_LABEL}=true"):
            await _delete(client, pods, pod, grace=0)
        for path, selector in (
            (f"/apis/{wk.GROUP}/v1/nodepools", ""),
            (f"/apis/{wk.GROUP}/v1/nodeclaims", ""),
            ("/api/v1/nodes", wk.LABEL_NODEPOOL),
        ):
            for item in await _items(client, path, selector):
                await _delete(client, path, item, unblock=True)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            left = (
                await _items(client, pods, f"{SUITE_LABEL}=true")
                + await _items(client, f"/apis/{wk.GROUP}/v1/nodeclaims")
                + await _items(client, "/api/v1/nodes", wk.LABEL_NODEPOOL)
            )
            if not left:
                return
            await asyncio.sleep(1.0)
        msg = f"the cluster still held {len(left)} of the scenario's objects after {within:.0f} s"
        raise TimeoutError(msg)
    finally:
        await client.close()


async def _delete(
    client: KubeClient,
    path: str,
    item: Mapping[str, Any],
    *,
    grace: int | None = None,
    unblock: bool = False,
) -> None:
    url = f"{path}/{item['metadata']['name']}"
    with contextlib.suppress(NotFoundError):
        if unblock and item["metadata"].get("finalizers"):
            await client.request(
                "PATCH",
                url,
                body={"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )
        body = None if grace is None else {"gracePeriodSeconds": grace}
        await client.request("DELETE", url, body=body)


# ---------------------------------------------------------------- the table


@attrs.frozen
class Row:
    scenario: str
    measure: str
    threshold: str
    figure: str
    ratio: str


def rows(results: Sequence[Measured]) -> list[Row]:
    """One row per measure Karpenter bounds, then the figures it reports without a bound."""
    out: list[Row] = []
    for m in results:
        where = f"{m.scenario} {m.phase}"
        limits = m.limits
        seconds = m.seconds if m.completed else float("nan")
        out.append(
            Row(
                where,
                "time to healthy" if m.kind == "out" else "time to settled",
                f"< {limits.minutes * 60:.0f} s",
                f"{m.seconds:.1f} s" if m.completed else f"> {m.seconds:.0f} s (gave up)",
                _ratio(seconds, limits.minutes * 60),
            )
        )
        for label, floor, value in (
            ("reserved cpu util", limits.cpu_util, m.cpu_util),
            ("reserved memory util", limits.memory_util, m.memory_util),
        ):
            out.append(
                Row(
                    where,
                    label,
                    f"> {floor:.0%}" if floor is not None else NONE,
                    f"{value:.1%}",
                    _ratio(value, floor),
                )
            )
        out.append(
            Row(
                where,
                "karpy p95 RSS",
                f"< {limits.rss_mb:.0f} MB" if limits.rss_mb else NONE,
                f"{m.rss_p95_mb:.0f} MB",
                _ratio(m.rss_p95_mb, limits.rss_mb),
            )
        )
        out.append(
            Row(
                where,
                "karpy avg cores",
                f"< {limits.cores:.2f}" if limits.cores else NONE,
                f"{m.cores:.3f}",
                _ratio(m.cores, limits.cores),
            )
        )
        extra = f"{m.nodes} nodes, {m.pods} pods, {m.rounds} rounds, load {m.load:.1f}"
        out.append(Row(where, "apiserver req/s (karpy)", NONE, f"{m.requests_per_s:.1f}", NONE))
        out.append(Row(where, "fleet", NONE, extra + (f"; {m.note}" if m.note else ""), NONE))
    return out


def _ratio(value: float, bound: float | None) -> str:
    if bound is None or not bound or math.isnan(value):
        return NONE
    return f"{value / bound:.2f}"


def table(result_rows: Sequence[Row]) -> str:
    """A markdown table: scenario (and phase), measure, Karpenter's threshold, karpy's figure,
    ratio (karpy / threshold: time, memory and cores want it low, utilisation at or above 1)."""
    header = ("scenario", "measure", "Karpenter", "karpy", "ratio")
    lines = ["| " + " | ".join(header) + " |", "|---|---|---:|---:|---:|"]
    lines += [
        f"| {r.scenario} | {r.measure} | {r.threshold} | {r.figure} | {r.ratio} |"
        for r in result_rows
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def _chosen(names: str, known: Mapping[str, Scenario]) -> Iterator[Scenario]:
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name.startswith("pools-") and name[len("pools-") :].isdigit():
            yield _pools(int(name[len("pools-") :]))
            continue
        if name not in known:
            msg = f"--scenarios: unknown scenario {name!r}; known: {', '.join(known)}"
            raise SystemExit(msg)
        yield known[name]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenarios",
        default="basic,hostname,xl,wide,dnd,drift,interference,pools-50,pools-100,pools-250,pools-500",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="pod counts times this")
    parser.add_argument(
        "--quiet",
        type=float,
        default=DEFAULTS.quiet,
        help="a scale-in or drift has settled after this many s without a change (more than "
        "consolidateAfter and karpy's 15 s validation together)",
    )
    parser.add_argument("--consolidate-after", default=DEFAULTS.consolidate_after)
    parser.add_argument("--timeout-factor", type=float, default=DEFAULTS.timeout_factor)
    parser.add_argument("--profile", type=Path, help="run karpy under cProfile, stats to this path")
    parser.add_argument("--timeline", type=Path, help="append each poll's counts to this file")
    args = parser.parse_args()
    options = Options(
        quiet=args.quiet,
        consolidate_after=args.consolidate_after,
        timeout_factor=args.timeout_factor,
        timeline=args.timeline,
    )
    known = scenarios(args.scale)
    chosen = list(_chosen(args.scenarios, known))
    results: list[Measured] = []
    for scenario in chosen:
        cluster = LocalCluster(f"bench-perf-{scenario.name}-{os.getpid()}", detach=False)
        info = cluster.up()
        try:
            print(f"== {scenario.name} (load {os.getloadavg()[0]:.1f})", flush=True)
            profile = args.profile.with_suffix(f".{scenario.name}.prof") if args.profile else None
            measured = asyncio.run(run_scenario(info, scenario, options=options, profile=profile))
            results += measured
            print(table(rows(measured)), flush=True)
        finally:
            cluster.down()
    print("\n" + table(rows(results)))
    return 0 if all(m.completed for m in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
