"""Crash and outage sweep on the real local control plane: what karpy leaves behind when it is
SIGKILLed mid scale-out, or kube-apiserver goes away for a while, and how long pods wait.

Each trial scales a pause Deployment out (small instance types, so many NodeClaims), injects one
fault and samples the cluster until every pod runs (tests/support/faults.py says what each
column counts). A crash-free run comes first: it is the NodeClaim count a crash should not
exceed. Crash moments are drawn from a seeded RNG, so a sweep is repeatable.

    .venv/bin/python benchmarks/faults.py                         # kwok: 20 crashes + outages
    .venv/bin/python benchmarks/faults.py --provider aws --trials 20
    .venv/bin/python benchmarks/faults.py --scenario outage --outage-pods 100
    .venv/bin/python benchmarks/faults.py --karpy-src /path/to/other/checkout   # "before"
    .venv/bin/python benchmarks/faults.py --scenario drift --trials 20         # kills mid drift
    .venv/bin/python benchmarks/faults.py --scenario termination --fault outage
    .venv/bin/python benchmarks/faults.py --scenario drift --fault watchcut --cut expire
    .venv/bin/python benchmarks/faults.py --provider aws --scenario drift   # moto + bridge
    .venv/bin/python benchmarks/faults.py --scenario pressure   # AWS throttled a minute etc.

The disruption scenarios (drift, consolidation, expiration, termination:
tests/support/disruptfaults.py) run a crash-free trial and then `--trials` faults at moments
drawn uniformly over the crash-free trial's own duration: SIGKILLs of karpy (`--fault kill`),
kube-apiserver stopped for `--outage` seconds (`--fault outage`), or every connection karpy
holds to the apiserver cut through a proxy (`--fault watchcut`, tests/support/watchcut.py):
`--cut expire` compacts etcd (every re-watch meets 410 Gone; the sweep's apiserver runs
without a watch cache for this), `drop` resets every connection, `stall` silences them as a
middlebox's idle timeout does, and `mixed` (the default) takes the three in turn. Kills and
outages run on kwok or on the AWS path (moto, with the kubelet bridge registering a Node for
every instance it runs).

docs/reliability.md has
the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from karpy.apis.crds import all_crds, render_crd
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError
from karpy.kube.install import install_crds
from karpy.localcluster import LocalCluster
from tests.support import awsworld, disruptfaults, watchcut
from tests.support.faults import Setup, Trial, crash_trial, outage_trial, table

NAME = "faults"


async def _sweep(args: argparse.Namespace, cluster: LocalCluster, kubeconfig: Path) -> int:
    log_dir = Path(tempfile.mkdtemp(prefix="karpy-faults-"))
    # The harness's own reads and writes: an overloaded machine's apiserver may take more than
    # 10 s to answer, which is no finding of karpy's.
    client = await KubeClient.connect(kubeconfig, request_timeout=30.0)
    try:
        async with asyncio.timeout(240):
            await install_crds(client, [render_crd(crd) for crd in all_crds()])
        async with contextlib.AsyncExitStack() as stack:
            extra: dict[str, Any] = {}
            if args.provider == "aws":
                extra = await stack.enter_async_context(awsworld.started(kubeconfig, log_dir, NAME))
            setup = Setup(
                kubeconfig=kubeconfig,
                namespace="default",
                name=NAME,
                pods=args.pods,
                karpy_src=args.karpy_src,
                log_dir=log_dir,
                **extra,
            )
            rng = random.Random(args.seed)
            if args.scenario in disruptfaults.SCENARIOS:
                return await _disruption_sweep(args, client, setup, cluster, rng)
            trials: list[Trial] = []
            if args.scenario in ("crash", "all"):
                trials.append(await crash_trial(client, setup, kill_after=None, label="crash-free"))
                print(table(trials[-1:]), flush=True)
                for i in range(args.trials):
                    moment = round(rng.uniform(args.earliest, args.latest), 1)
                    label = f"kill {i + 1} at {moment}s"
                    trials.append(await crash_trial(client, setup, kill_after=moment, label=label))
                    print(table(trials[-1:]).splitlines()[-1], flush=True)
            if args.scenario in ("outage", "all"):
                wide = attrs.evolve(setup, pods=args.outage_pods)
                for election in (None, "default"):
                    label = "outage, " + (
                        "no leader election" if election is None else "leader election"
                    )
                    trials.append(
                        await outage_trial(
                            client,
                            wide,
                            cluster,
                            stop_after=args.outage_after,
                            outage=args.outage,
                            label=label,
                            leader_election=election,
                        )
                    )
                    print(table(trials[-1:]).splitlines()[-1], flush=True)
        print(f"\nkarpy logs in {log_dir}\n")
        print(table(trials))
        crashes = [t for t in trials if t.label.startswith("kill")]
        if crashes:
            base = trials[0].nodeclaims
            worst = max(t.nodeclaims_seen for t in crashes)
            print(
                f"\ncrash-free nodeclaims {base}; after crashes: most seen {worst}, "
                f"duplicates {sum(t.duplicates for t in crashes)}, "
                f"leaks {sum(t.leaks for t in crashes)}, "
                f"slowest to Running {max((t.to_running or 0) for t in crashes):.1f} s"
            )
        return 0
    finally:
        await client.close()


async def _disruption_sweep(
    args: argparse.Namespace,
    client: KubeClient,
    setup: Setup,
    cluster: LocalCluster,
    rng: random.Random,
) -> int:
    """A crash-free trial of the scenario, then `args.trials` faults over its duration."""
    scenario = disruptfaults.Scenario(kind=args.scenario, nodes=args.nodes)
    if args.fault == "watchcut":
        return await _watchcut_sweep(args, client, setup, cluster, rng, scenario)
    free = await disruptfaults.disruption_trial(client, setup, scenario, label="crash-free")
    trials = [free]
    print(disruptfaults.table(trials), flush=True)
    span = free.to_settle or 60.0
    # Expiration's drain is the grace period at most; later moments find nothing to cut.
    for i in range(args.trials):
        moment = round(rng.uniform(0.5, span), 1)
        try:
            if args.fault == "kill":
                trial = await disruptfaults.disruption_trial(
                    client, setup, scenario, label=f"kill {i + 1} at {moment}s", kill_at=moment
                )
            else:
                trial = await disruptfaults.disruption_trial(
                    client,
                    setup,
                    scenario,
                    label=f"outage {i + 1} at {moment}s",
                    outage_at=moment,
                    outage=args.outage,
                    control_plane=cluster,
                )
        except (AssertionError, KubeError, OSError, TimeoutError) as error:
            # The harness itself gave up (the fleet never came up, or the apiserver did not
            # answer the trial's own reads in time on an overloaded machine): say so, go on.
            print(f"trial {i + 1} at {moment}s: harness failed: {error!r}", flush=True)
            continue
        trials.append(trial)
        print(disruptfaults.table(trials[-1:]).splitlines()[-1], flush=True)
    return _report(args, setup, trials)


async def _watchcut_sweep(
    args: argparse.Namespace,
    client: KubeClient,
    setup: Setup,
    cluster: LocalCluster,
    rng: random.Random,
    scenario: disruptfaults.Scenario,
) -> int:
    """As `_disruption_sweep`, with karpy behind the cutting proxy in every trial."""
    modes = watchcut.CUTS if args.cut == "mixed" else (args.cut,)
    trials: list[disruptfaults.DisruptionTrial] = []
    span = 60.0
    for i in range(args.trials + 1):
        mode = modes[(i - 1) % len(modes)]
        async with watchcut.watch_cut(
            setup.kubeconfig, setup.log_dir, mode=mode, control_plane=cluster
        ) as cut:
            if not trials:
                trial = await disruptfaults.disruption_trial(
                    client, setup, scenario, label="cut-free", cut=cut
                )
                span = trial.to_settle or span
                print(disruptfaults.table([trial]), flush=True)
            else:
                moment = round(rng.uniform(0.5, span), 1)
                trial = await disruptfaults.disruption_trial(
                    client,
                    setup,
                    scenario,
                    label=f"{mode} {i} at {moment}s",
                    cut_at=moment,
                    cut=cut,
                )
                print(disruptfaults.table([trial]).splitlines()[-1], flush=True)
        trials.append(trial)
    return _report(args, setup, trials)


def _report(
    args: argparse.Namespace, setup: Setup, trials: list[disruptfaults.DisruptionTrial]
) -> int:
    free = trials[0]
    print(f"\nkarpy logs in {setup.log_dir}\n")
    print(disruptfaults.table(trials))
    pdb = args.scenario != "expiration"
    broken = [t for t in trials[1:] if disruptfaults.problems(t, free, pdb=pdb)]
    print(f"\n{len(broken)} of {len(trials) - 1} faulted trials broke a guarantee")
    for t in broken:
        print(f"  {t.label}: {'; '.join(disruptfaults.problems(t, free, pdb=pdb))}")
    print(f"load average at the end: {os.getloadavg()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("kwok", "aws"), default="kwok")
    parser.add_argument(
        "--scenario",
        choices=("crash", "outage", "all", "pressure", *disruptfaults.SCENARIOS),
        default="all",
    )
    parser.add_argument("--fault", choices=("kill", "outage", "watchcut"), default="kill")
    parser.add_argument("--cut", choices=(*watchcut.CUTS, "mixed"), default="mixed")
    parser.add_argument("--nodes", type=int, default=10, help="nodes a disruption starts with")
    parser.add_argument("--trials", type=int, default=20, help="crash trials")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--earliest", type=float, default=0.5, help="earliest kill, s")
    parser.add_argument("--latest", type=float, default=8.0, help="latest kill, s")
    parser.add_argument("--outage-pods", type=int, default=100)
    parser.add_argument("--outage-after", type=float, default=3.0, help="s after scale-up")
    parser.add_argument("--outage", type=float, default=20.0, help="s the apiserver is away")
    parser.add_argument("--karpy-src", type=Path, default=None, help="run karpy from here")
    args, rest = parser.parse_known_args()
    if args.scenario == "pressure":  # benchmarks/aws_pressure.py, with its own flags
        import aws_pressure

        return aws_pressure.main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    which = "other" if args.karpy_src else "this"
    # The pid keeps two sweeps started at once (say, before and after) off each other's cluster.
    name = f"faults-{args.provider}-{args.scenario}-{which}-{os.getpid()}"
    # An expired resourceVersion is only forced by compacting etcd when watches are served from
    # etcd (the watch cache holds every event younger than 75 s).
    flags = ("--watch-cache=false",) if args.fault == "watchcut" else ()
    cluster = LocalCluster(name, detach=False, apiserver_flags=flags)
    info = cluster.up()
    try:
        return asyncio.run(_sweep(args, cluster, info.kubeconfig))
    finally:
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
