"""AWS under pressure, the long run: a minute of throttling, the cheapest pools out of capacity,
DescribeInstanceTypes failing at start and 1,000 interruption messages, half malformed or
repeated (tests/support/pressure.py has the trial; the suite runs it short in
tests/e2e/test_aws_pressure.py). Run by hand, on a local cluster of its own:

    .venv/bin/python benchmarks/faults.py --scenario pressure
    .venv/bin/python benchmarks/aws_pressure.py --throttled 60 --messages 1000 --pods 20

It prints the figures docs/reliability.md quotes: calls per second while throttled (mean and
busiest second), errors injected, launches, what ran where, and the queue's counts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes_asyncio import client, config

from karpy.apis.crds import all_crds, render_crd
from karpy.kube.client import KubeClient
from karpy.kube.install import install_crds
from karpy.localcluster import ClusterInfo, LocalCluster
from karpy.operator.demo_aws import emulator
from tests.support.pressure import Figures, pressure_trial


async def run(args: argparse.Namespace, info: ClusterInfo) -> Figures:
    kube = await KubeClient.connect(info.kubeconfig, request_timeout=10.0)
    try:
        async with asyncio.timeout(120):
            await install_crds(kube, [render_crd(crd) for crd in all_crds()])
    finally:
        await kube.close()
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(info.kubeconfig), client_configuration=configuration
    )
    log = Path(tempfile.mkdtemp(prefix="karpy-pressure-")) / "emulator.log"
    async with client.ApiClient(configuration) as api:
        with log.open("w") as out:
            async with emulator(kubeconfig=info.kubeconfig, cluster_name="pressure", log=out) as em:
                os.environ.update(em.environment())
                caller = f"AKIAKARPY{secrets.token_hex(6).upper()}"
                os.environ["AWS_ACCESS_KEY_ID"] = caller
                return await pressure_trial(
                    info,
                    api,
                    "default",
                    em,
                    start_failing=args.start_failing,
                    throttled=args.throttled,
                    pods=args.pods,
                    sent=args.messages,
                    caller=caller,
                )


def report(figures: Figures, args: argparse.Namespace) -> str:
    kinds: dict[str, int] = {}
    for instance_type, spot in figures.instances:
        key = f"{instance_type} {'spot' if spot else 'on-demand'}"
        kinds[key] = kinds.get(key, 0) + 1
    return "\n".join(
        [
            f"pods {args.pods}: all Running after {figures.to_running} s "
            f"(on launched instances: {figures.pods_on_instances})",
            f"instances: {', '.join(f'{n} x {k}' for k, n in sorted(kinds.items()))}",
            f"calls while throttled ({args.throttled:.0f} s): {figures.calls}, "
            f"{figures.mean_rate}/s mean, {figures.peak_rate}/s busiest second",
            f"errors injected: {figures.injected}; CreateFleet answered: {figures.launches}",
            f"first DescribeInstanceTypes answered {figures.first_types} s, first CreateFleet "
            f"answered {figures.first_launch} s into the plan (scaled up at {figures.scaled_at} s)",
            "calls/injected per 10 s: "
            + " ".join(f"{calls}/{injected}" for calls, injected in figures.timeline),
            f"messages sent {args.messages}: received {figures.received:.0f}, "
            f"malformed {figures.received_unknown:.0f}, deleted {figures.deleted:.0f}, "
            f"left {figures.left}, all deleted {figures.to_drain} s after the last was sent",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--throttled", type=float, default=60.0, help="s of 50%% throttling")
    parser.add_argument(
        "--start-failing", type=float, default=15.0, help="s DescribeInstanceTypes fails"
    )
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args(argv)
    cluster = LocalCluster(f"pressure-{os.getpid()}", detach=False)
    info = cluster.up()
    try:
        print(report(asyncio.run(run(args, info)), args), flush=True)
        return 0
    finally:
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
