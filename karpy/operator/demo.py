"""``karpy demo`` — the README's main command.

Today it proves the ground karpy stands on: it builds (first time) and starts the real local
control plane, shows what runs where with each component's memory, and takes it all down again,
exiting non-zero if any step misbehaves. The provisioning walkthrough joins it once the
provisioning loops land.
"""

from __future__ import annotations

import argparse
import sys

from karpy.localcluster import LocalCluster, LocalClusterError
from karpy.localcluster.cli import main as cluster_cli


def main(argv: list[str]) -> int:
    """Entry point of ``karpy demo``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="karpy demo", description=__doc__)
    parser.add_argument("--name", default="karpy-demo", help="local cluster name")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    args = parser.parse_args(argv)
    cluster = LocalCluster(args.name)
    try:
        cluster.up()
    except LocalClusterError as error:
        sys.stderr.write(f"karpy demo: {error}\n")
        return 1
    try:
        sys.stdout.write("\n")
        code = cluster_cli(["--name", args.name, "status"])
    finally:
        if not args.keep:
            cluster.down()
    if code == 0 and not args.keep:
        leftovers = [row.name for row in cluster.status() if row.running]
        if leftovers:
            sys.stderr.write(f"karpy demo: still running after down: {', '.join(leftovers)}\n")
            return 1
    return code
