"""Reading ClusterAPINodeClasses (workload cluster) and resolving what they select.

From the operator's cluster state when the provider was given it, else from the apiserver (a
provider built outside the operator, as the contract tests build it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1.common import NodeClassReference
from karpy.cloudprovider import NodeClassNotReadyError
from karpy.cloudprovider.protocol import NodeClassKind
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.state.view import ClusterView
from karpy_clusterapi.apis.kinds import NODECLASSES
from karpy_clusterapi.apis.nodeclass import ClusterAPINodeClass
from karpy_clusterapi.providers.machinedeployments import MachineDeployment, selects

log = logging.getLogger(__name__)

NODE_CLASS: Final = NodeClassKind(ClusterAPINodeClass.GROUP, ClusterAPINodeClass.KIND)


class NodeClasses:
    def __init__(self, kube: KubeClient, view: ClusterView | None) -> None:
        self._kube = kube
        self._view = view

    async def read(self, name: str) -> ClusterAPINodeClass | None:
        if self._view is not None:
            found = self._view.get(NODECLASSES, name)
            if found is not None:
                return found
        try:
            return await self._kube.get(NODECLASSES, name)
        except NotFoundError:
            return None

    async def ready(self, ref: NodeClassReference, *, owner: str) -> ClusterAPINodeClass:
        """The referenced ClusterAPINodeClass, Ready; NodeClassNotReadyError otherwise."""
        if (ref.group, ref.kind) != (NODE_CLASS.group, NODE_CLASS.kind):
            msg = f"{owner}: nodeClassRef {ref.group}/{ref.kind} is not a ClusterAPINodeClass"
            raise NodeClassNotReadyError(msg)
        nodeclass = await self.read(ref.name)
        if nodeclass is None:
            msg = f"{owner}: ClusterAPINodeClass {ref.name!r} not found"
            raise NodeClassNotReadyError(msg)
        if not is_ready(nodeclass):
            msg = f"{owner}: ClusterAPINodeClass {ref.name!r} is not Ready"
            raise NodeClassNotReadyError(msg)
        return nodeclass


def selected(
    nodeclass: ClusterAPINodeClass, deployments: Sequence[MachineDeployment]
) -> list[MachineDeployment]:
    """The MachineDeployments the NodeClass selects, by namespace and name."""
    selector = nodeclass.spec.scalable_resource_selector
    return sorted(
        (md for md in deployments if selects(selector, md.labels)),
        key=lambda md: (md.namespace, md.name),
    )


def is_ready(nodeclass: ClusterAPINodeClass) -> bool:
    return any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE for c in nodeclass.status.conditions
    )
