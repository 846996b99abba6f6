"""What the kwok provider brings besides the CloudProvider methods, declared in one place.

The KWOKNodeClass kind (informed into cluster state, where launches read it) and the two passes
the operator runs for the provider on the leader: ``kwok.launches`` (run at start, when a launch
is held and when the next one falls due) and ``kwok.garbagecollection``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from karpy.kube.client import KubeClient
from karpy.manager import ProviderExtension, Singleton
from karpy.runtime.clock import Clock
from karpy.state.view import ClusterView
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.controllers.garbagecollection import LeakedNodeController
from karpy_kwok.controllers.launches import LaunchController
from karpy_kwok.providers.instance import KwokInstances

LAUNCHES: Final = "kwok.launches"
"""The name of the pass that creates the Nodes of pending launches."""
GARBAGE_COLLECTION: Final = "kwok.garbagecollection"
"""The name of the pass that deletes kwok Nodes no NodeClaim owns."""


def extension(
    kube: KubeClient,
    view: ClusterView | None,
    instances: KwokInstances,
    *,
    clock: Clock,
    resume: Callable[[], Awaitable[bool]],
) -> ProviderExtension:
    """The KWOKNodeClass kind and the provider's passes over `instances`; `resume` holds again
    the launches an earlier process left waiting (the cloud provider's ``resume``)."""
    launches = LaunchController(instances, resume=resume)
    leaked = LeakedNodeController(kube, view, instances, clock=clock)
    return ProviderExtension(
        kinds=(KWOK_NODECLASSES,),
        controllers=(
            Singleton(name=LAUNCHES, reconcile=launches.reconcile_once, sources=(instances.held,)),
            Singleton(name=GARBAGE_COLLECTION, reconcile=leaked.reconcile_once),
        ),
    )
