"""What the Cluster API provider brings besides the CloudProvider methods, declared in one place:
the ClusterAPINodeClass kind (informed into cluster state) and its two loops."""

from __future__ import annotations

from karpy.kube.client import KubeClient
from karpy.manager import ProviderExtension, Singleton
from karpy.runtime.clock import Clock
from karpy.state.view import ClusterView
from karpy_clusterapi.apis.kinds import NODECLASSES
from karpy_clusterapi.controllers import garbagecollection
from karpy_clusterapi.controllers.garbagecollection import GarbageCollector
from karpy_clusterapi.controllers.nodeclass import NodeClassController
from karpy_clusterapi.providers.machines import Fleet
from karpy_clusterapi.providers.nodeclass import NodeClasses


def extension(
    kube: KubeClient,
    view: ClusterView | None,
    fleet: Fleet,
    nodeclasses: NodeClasses,
    *,
    clock: Clock,
) -> ProviderExtension:
    collector = GarbageCollector(kube, view, fleet, clock=clock)
    return ProviderExtension(
        kinds=(NODECLASSES,),
        controllers=(
            NodeClassController(kube, fleet, nodeclasses, clock=clock).spec(),
            Singleton(name=garbagecollection.NAME, reconcile=collector.reconcile_once),
        ),
    )
