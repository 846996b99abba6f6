"""Warn when Cluster Autoscaler runs in the same cluster.

Both watch for unschedulable pods and both add nodes for them, so running them together
launches capacity twice (seed 000's caution). At start, `karpy run` lists Deployments once and
warns, naming each Cluster Autoscaler it finds with replicas above zero, unless karpy runs in
shadow mode (`--dry-run`), which is the way to run beside it.
"""

from __future__ import annotations

import logging

from karpy.apis.kube.workloads import Deployment
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError
from karpy.kube.kinds import DEPLOYMENTS

log = logging.getLogger(__name__)

_LABELS = ("app.kubernetes.io/name", "app", "k8s-app")


def is_cluster_autoscaler(deployment: Deployment) -> bool:
    """Named or labelled cluster-autoscaler (as its Helm chart and manifests do), and running."""
    meta = deployment.metadata
    named = "cluster-autoscaler" in (meta.name or "") or any(
        "cluster-autoscaler" in meta.labels.get(key, "") for key in _LABELS
    )
    return named and deployment.spec.replicas != 0


async def find_cluster_autoscalers(client: KubeClient) -> list[str]:
    """`namespace/name` of every running Cluster Autoscaler Deployment (none when karpy may not
    list Deployments: that is logged)."""
    try:
        listed = await client.list(DEPLOYMENTS)
    except KubeError as error:
        log.info("cannot look for Cluster Autoscaler", extra={"error": str(error)})
        return []
    return sorted(
        f"{item.obj.metadata.namespace}/{item.obj.metadata.name}"
        for item in listed.items
        if is_cluster_autoscaler(item.obj)
    )


async def warn_if_cluster_autoscaler(client: KubeClient, *, dry_run: bool) -> list[str]:
    """Log what `find_cluster_autoscalers` finds: a warning, or an info line in dry-run."""
    found = await find_cluster_autoscalers(client)
    for name in found:
        if dry_run:
            log.info(
                "Cluster Autoscaler found; shadow mode writes nothing", extra={"deployment": name}
            )
        else:
            log.warning(
                "Cluster Autoscaler is running in this cluster: it and karpy will both launch "
                "nodes for the same pending pods; scale it to zero or run karpy with --dry-run",
                extra={"deployment": name},
            )
    return found
