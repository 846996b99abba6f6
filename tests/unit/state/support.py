"""Hand-written API objects for the snapshot tests, built through the codec from wire dicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from karpy.apis.codec import from_dict
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.v1.nodepool import NodePool

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pod(name: str, spec: dict[str, Any] | None = None, **meta: Any) -> Pod:
    """A pending pod named `name` in `default` whose uid is `uid-<name>`."""
    metadata = {"name": name, "namespace": "default", "uid": f"uid-{name}", **meta}
    return from_dict(Pod, {"metadata": metadata, "spec": spec or {"containers": []}})


def inflate(replicas: int) -> list[Pod]:
    """The seed walkthrough's `inflate` Deployment: pause, 1 CPU, 1.5Gi, intent=apps selector."""
    spec = {
        "nodeSelector": {"intent": "apps"},
        "containers": [
            {
                "name": "inflate",
                "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                "resources": {"requests": {"cpu": "1", "memory": "1.5Gi"}},
            }
        ],
    }
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "inflate-5d8c",
        "uid": "rs-uid",
        "controller": True,
    }
    return [
        pod(
            f"inflate-5d8c-{i}",
            spec,
            labels={"app": "inflate"},
            ownerReferences=[owner],
            creationTimestamp=(T0 + timedelta(seconds=i)).isoformat(),
        )
        for i in range(replicas)
    ]


def apps_nodepool() -> NodePool:
    """Seed 000's NodePool: nodes labelled intent=apps, on-demand only."""
    return from_dict(
        NodePool,
        {
            "metadata": {"name": "apps"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"intent": "apps"}},
                    "spec": {
                        "requirements": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            }
                        ],
                        "nodeClassRef": {
                            "group": "karpenter.kwok.sh",
                            "kind": "KWOKNodeClass",
                            "name": "default",
                        },
                    },
                },
                "limits": {"cpu": "100"},
            },
        },
    )


def node(name: str, *, labels: dict[str, str] | None = None, **status: Any) -> Node:
    return from_dict(
        Node,
        {
            "metadata": {"name": name, "labels": labels or {}},
            "status": status or {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        },
    )
