"""A provider's declared loops, as wiring builds them: a keyed spec is fed by informer events
through its key function, a periodic spec runs its pass, and both end when stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.cloudprovider.protocol import (
    Change,
    KeyedController,
    PeriodicController,
    ProviderExtension,
    Watch,
)
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.kube.resources import Item, ObjectRef, ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.operator.wiring import provider_controllers
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import WatchingOptions
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer


def _event(name: str, kind: EventType) -> Event[NodeClaim]:
    claim = NodeClaim(
        metadata=ObjectMeta(name=name),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
    )
    ref = ObjectRef(kind="NodeClaim", namespace="", name=name, uid=name, resource_version="1")
    return Event(type=kind, item=Item(ref=ref, obj=claim))


async def test_declared_loops_are_fed_run_and_drained(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    # The informer only fans events out here; it never talks to an apiserver.
    informer = Informer(
        cast(KubeClient, None),
        state.register(NODECLAIMS),
        state=state,
        settings=WatchingOptions(),
        metrics=telemetry.metrics,
    )
    reconciled: list[str] = []
    passes: list[int] = []
    both_ran = asyncio.Event()
    changes: list[Change] = []

    async def reconcile(name: str) -> Result:
        reconciled.append(name)
        if passes:
            both_ran.set()
        return Result()

    async def reconcile_once() -> Result:
        passes.append(len(passes))
        if reconciled:
            both_ran.set()
        return Result()

    def keys(change: Change) -> Iterable[str]:
        changes.append(change)
        return () if change.deleted else (change.name,)

    extension: ProviderExtension[ResourceKind[Any]] = ProviderExtension(
        kinds=(NODECLAIMS,),
        controllers=(
            KeyedController(
                name="test.keyed",
                reconcile=reconcile,
                watches=(Watch(kind=NODECLAIMS, keys=keys),),
                workers=2,
            ),
            PeriodicController(name="test.periodic", reconcile_once=reconcile_once),
        ),
    )
    controllers = provider_controllers(
        extension,
        by_kind={"NodeClaim": informer},
        telemetry=telemetry,
        backoff=Backoff(base=0.01, cap=0.05),
    )
    assert [c.name for c in controllers] == ["test.keyed", "test.periodic"]

    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        for controller in controllers:
            group.create_task(controller.run())
        informer._notify(_event("a", EventType.ADDED))
        informer._notify(_event("b", EventType.DELETED))
        await both_ran.wait()
        for controller in controllers:
            controller.stop()

    assert reconciled == ["a"]
    assert passes == [0]
    assert [(c.name, c.deleted) for c in changes] == [("a", False), ("b", True)]
    assert isinstance(changes[0].obj, NodeClaim)
