"""What the Cluster API provider brings besides the CloudProvider methods, declared in one place:
the ClusterAPINodeClass kind (informed into cluster state), its two loops, and the question node
repair asks first (does a MachineHealthCheck repair this node's Machine?)."""

from __future__ import annotations

from karpy.kube.client import KubeClient
from karpy.manager import ProviderExtension, RepairedElsewhere
from karpy.runtime.clock import Clock
from karpy.state.view import ClusterView
from karpy_clusterapi.apis.kinds import NODECLASSES
from karpy_clusterapi.controllers.garbagecollection import GarbageCollector
from karpy_clusterapi.controllers.nodeclass import NodeClassController
from karpy_clusterapi.providers.machines import Fleet
from karpy_clusterapi.providers.nodeclass import NodeClasses


def extension(
    kube: KubeClient,
    view: ClusterView,
    fleet: Fleet,
    nodeclasses: NodeClasses,
    *,
    clock: Clock,
    repaired_elsewhere: RepairedElsewhere,
) -> ProviderExtension:
    collector = GarbageCollector(view, fleet, clock=clock)
    return ProviderExtension(
        kinds=(NODECLASSES,),
        controllers=(
            NodeClassController(kube, fleet, nodeclasses, clock=clock).spec(),
            collector.spec(),
        ),
        repaired_elsewhere=repaired_elsewhere,
    )
