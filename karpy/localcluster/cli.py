"""``karpy cluster up | down | status | env | build`` — the local control plane from a shell.

Errors of the local cluster are printed as one clear sentence (with the log tail that explains
them) and exit code 1; they never surface as a bare stack trace.
"""

from __future__ import annotations

import argparse
import shlex
import sys

import attrs

from karpy.localcluster.build import ensure_all, ensure_binaries, ensure_clusterapi, ensure_tools
from karpy.localcluster.cluster import LocalCluster
from karpy.localcluster.errors import LocalClusterError
from karpy.localcluster.versions import KUBERNETES_VERSION, KWOK_VERSION


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="karpy cluster",
        description=(
            f"A real local control plane on 127.0.0.1: etcd, kube-apiserver "
            f"{KUBERNETES_VERSION}, kube-controller-manager, kube-scheduler and kwok "
            f"{KWOK_VERSION}, built from Go modules on first use."
        ),
    )
    parser.add_argument("--name", default="karpy", help="cluster name (default: karpy)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = sub.add_parser("up", help="start the control plane (idempotent)")
    up.add_argument(
        "--apiserver-port", type=int, default=0, help="port for kube-apiserver (default: free)"
    )
    up.add_argument(
        "--timeout", type=float, default=120.0, help="seconds each component may take to start"
    )
    sub.add_parser("down", help="stop every process and remove the cluster's state")
    sub.add_parser("status", help="show what runs where, with memory use")
    sub.add_parser("env", help="print shell exports for kubectl and karpy")
    build = sub.add_parser(
        "build",
        help="build (or find cached) control-plane binaries, helm and Jaeger, in parallel",
    )
    build.add_argument(
        "--only",
        choices=("control-plane", "tools", "cluster-api"),
        help="build only the control plane (etcd, Kubernetes, kwok), only the test tools "
        "(helm, Jaeger) or only Cluster API's core controller manager (for the Cluster API "
        "provider's tests and demo; not part of the default build)",
    )
    return parser


def main(argv: list[str]) -> int:
    """Entry point of ``karpy cluster``; returns the exit code."""
    args = _parser().parse_args(argv)
    cluster = LocalCluster(args.name)
    try:
        if args.action == "up":
            info = cluster.up(apiserver_port=args.apiserver_port, timeout=args.timeout)
            sys.stdout.write(f"export KUBECONFIG={shlex.quote(str(info.kubeconfig))}\n")
        elif args.action == "down":
            if not cluster.down():
                sys.stdout.write(f"cluster {args.name!r} is not running\n")
        elif args.action == "status":
            return _status(cluster)
        elif args.action == "env":
            found = cluster.info()
            if found is None:
                sys.stderr.write(f"cluster {args.name!r} is not up; run 'karpy cluster up'\n")
                return 1
            sys.stdout.write(f"export KUBECONFIG={shlex.quote(str(found.kubeconfig))}\n")
        elif args.action == "build":
            if args.only == "control-plane":
                paths = attrs.asdict(ensure_binaries())
            elif args.only == "tools":
                paths = attrs.asdict(ensure_tools())
            elif args.only == "cluster-api":
                built = ensure_clusterapi()
                paths = {
                    "cluster-api-manager": built.manager,
                    "cluster-api-webhooks": built.webhooks,
                }
            else:
                binaries, tools = ensure_all()
                paths = {**attrs.asdict(binaries), **attrs.asdict(tools)}
            for field, path in sorted(paths.items()):
                sys.stdout.write(f"{field.replace('_', '-'):<24} {path}\n")
    except LocalClusterError as error:
        sys.stderr.write(f"karpy cluster {args.action}: {error}\n")
        return 1
    return 0


def _status(cluster: LocalCluster) -> int:
    info = cluster.info()
    if info is None:
        sys.stdout.write(f"cluster {cluster.name!r} is not running\n")
        return 1
    rows = cluster.status()
    sys.stdout.write(
        f"cluster {cluster.name!r}: {info.server} (Kubernetes {info.kubernetes_version}, "
        f"kwok {info.kwok_version})\nkubeconfig: {info.kubeconfig}\n\n"
    )
    sys.stdout.write(f"{'COMPONENT':<25}{'STATE':<9}{'PID':>8}{'PORT':>7}{'RSS':>10}\n")
    for row in rows:
        rss = f"{row.rss_bytes / 2**20:.0f}Mi" if row.rss_bytes is not None else "-"
        state = "running" if row.running else "stopped"
        sys.stdout.write(f"{row.name:<25}{state:<9}{row.pid:>8}{row.port:>7}{rss:>10}\n")
    return 0 if all(row.running for row in rows) else 1
