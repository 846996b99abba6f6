"""The legacy controller declared as the operator declares a provider's loops: the kinds it
needs informed (Provisioners, the provider's legacy templates) and one keyed controller fed by
them and by NodePools (whose readiness it mirrors)."""

from __future__ import annotations

from typing import Any

from karpy.apis.v1alpha5.translate import LegacySettings, legacy_node_classes
from karpy.controllers.legacy.controller import LegacyController, nodepool_keys, template_keys
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODEPOOLS, PROVISIONERS
from karpy.manager import Controller, ProviderExtension, Watch
from karpy.runtime.clock import Clock
from karpy.state.view import ClusterView


def legacy_extension(
    provider: str,
    *,
    client: KubeClient,
    view: ClusterView,
    settings: LegacySettings,
    clock: Clock,
) -> ProviderExtension:
    """The legacy controller for `provider`; nothing when the provider declares no legacy
    translation (a ``karpy.legacy`` entry point)."""
    try:
        node_classes = legacy_node_classes(provider)
    except LookupError:
        return ProviderExtension()
    controller = LegacyController(
        client,
        view,
        node_classes=node_classes,
        settings=settings,
        recorder=Recorder(client, clock),
        clock=clock,
    )
    watches: list[Watch[Any]] = [
        Watch(kind=PROVISIONERS),
        Watch(kind=NODEPOOLS, keys=lambda event: nodepool_keys(event.item.obj)),
    ]
    watches += [
        Watch(kind=kind, keys=lambda event: template_keys(event.item.obj, view))
        for kind in controller.template_kinds
    ]
    return ProviderExtension(
        kinds=(PROVISIONERS, *controller.template_kinds),
        controllers=(
            Controller(
                name=controller.name, reconcile=controller.reconcile, watches=tuple(watches)
            ),
        ),
    )
