"""The manager runs every declared controller alike: a keyed controller is fed by informer
events through its key function and by its channels, a singleton runs its passes when woken,
every loop waits for cluster state to sync, and each ends when stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.kube.resources import Item, ObjectRef
from karpy.kube.watch import Event, EventType
from karpy.manager import Controller, Keys, Manager, Singleton, Watch, unless_deleted
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import WatchingOptions
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer

BACKOFF = Backoff(base=0.01, cap=0.05)


def _event(name: str, kind: EventType) -> Event[NodeClaim]:
    claim = NodeClaim(
        metadata=ObjectMeta(name=name),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
    )
    ref = ObjectRef(kind="NodeClaim", namespace="", name=name, uid=name, resource_version="1")
    return Event(type=kind, item=Item(ref=ref, obj=claim))


def _informer(telemetry: Telemetry) -> Informer[Any]:
    state = ClusterState(metrics=telemetry.metrics)
    # The informer only fans events out here; it never talks to an apiserver.
    return Informer(
        cast(KubeClient, None),
        state.register(NODECLAIMS),
        state=state,
        settings=WatchingOptions(),
        metrics=telemetry.metrics,
    )


async def test_declared_loops_are_fed_run_and_drained(telemetry: Telemetry) -> None:
    informer = _informer(telemetry)
    reconciled: list[str] = []
    passes: list[int] = []
    both_ran = asyncio.Event()
    seen: list[Event[NodeClaim]] = []

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

    def keys(event: Event[NodeClaim]) -> Iterable[str]:
        seen.append(event)
        return unless_deleted(event)

    loops = Manager(telemetry=telemetry, backoff=BACKOFF, synced=None).loops(
        (
            Controller(
                name="test.keyed",
                reconcile=reconcile,
                watches=(Watch(kind=NODECLAIMS, keys=keys),),
                workers=2,
            ),
            Singleton(name="test.periodic", reconcile=reconcile_once),
        ),
        {"NodeClaim": informer},
    )
    assert [c.name for c in loops] == ["test.keyed", "test.periodic"]

    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        for loop in loops:
            group.create_task(loop.run())
        informer._notify(_event("a", EventType.ADDED))
        informer._notify(_event("b", EventType.DELETED))
        await both_ran.wait()
        for loop in loops:
            loop.stop()

    assert reconciled == ["a"]
    assert passes == [0]
    assert [(e.item.ref.name, e.type) for e in seen] == [
        ("a", EventType.ADDED),
        ("b", EventType.DELETED),
    ]


async def test_no_reconcile_before_sync_and_events_meanwhile_are_kept(
    telemetry: Telemetry,
) -> None:
    informer = _informer(telemetry)
    synced = asyncio.Event()
    reconciled: list[str] = []
    done = asyncio.Event()

    async def reconcile(name: str) -> Result:
        assert synced.is_set(), "reconciled before cluster state synced"
        reconciled.append(name)
        done.set()
        return Result()

    async def wait_synced() -> None:
        await synced.wait()

    initial = ["left-by-a-previous-process"]
    (loop,) = Manager(telemetry=telemetry, backoff=BACKOFF, synced=wait_synced).loops(
        (
            Controller(
                name="test.keyed",
                reconcile=reconcile,
                watches=(Watch(kind=NODECLAIMS),),
                initial=lambda: initial,
            ),
        ),
        {"NodeClaim": informer},
    )
    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        group.create_task(loop.run())
        informer._notify(_event("early", EventType.ADDED))
        await asyncio.sleep(0.05)
        assert reconciled == []
        synced.set()
        while len(reconciled) < 2:
            done.clear()
            await done.wait()
        loop.stop()
    assert sorted(reconciled) == ["early", "left-by-a-previous-process"]


async def test_a_loop_stopped_before_sync_returns(telemetry: Telemetry) -> None:
    never = asyncio.Event()

    async def wait_synced() -> None:
        await never.wait()

    async def reconcile_once() -> Result:
        raise AssertionError("a pass ran before cluster state synced")

    (loop,) = Manager(telemetry=telemetry, backoff=BACKOFF, synced=wait_synced).loops(
        (Singleton(name="test.periodic", reconcile=reconcile_once),), {}
    )
    async with asyncio.timeout(5):
        task = asyncio.create_task(loop.run())
        await asyncio.sleep(0.01)
        loop.stop()
        await task


async def test_keys_sent_before_start_reach_the_controller(telemetry: Telemetry) -> None:
    channel = Keys("test.channel")
    channel.send("sent-early")
    reconciled: list[str] = []
    got = asyncio.Event()

    async def reconcile(name: str) -> Result:
        reconciled.append(name)
        got.set()
        return Result()

    (loop,) = Manager(telemetry=telemetry, backoff=BACKOFF, synced=None).loops(
        (Controller(name="test.keyed", reconcile=reconcile, sources=(channel,)),), {}
    )
    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        group.create_task(loop.run())
        await got.wait()
        got.clear()
        channel.send("sent-later")
        await got.wait()
        loop.stop()
    assert reconciled == ["sent-early", "sent-later"]
    with pytest.raises(ValueError, match="already has a receiver"):
        channel.connect(lambda key: None)


async def test_a_gate_holds_a_singletons_passes(telemetry: Telemetry) -> None:
    informer = _informer(telemetry)
    opened = asyncio.Event()
    triggered: list[str] = []
    passes: list[int] = []
    ran = asyncio.Event()

    class Gate:
        def trigger(self, key: str) -> None:
            triggered.append(key)

        async def wait(self) -> object:
            await opened.wait()
            opened.clear()
            return None

    async def reconcile_once() -> Result:
        passes.append(len(passes))
        ran.set()
        return Result()

    (loop,) = Manager(telemetry=telemetry, backoff=BACKOFF, synced=None).loops(
        (
            Singleton(
                name="test.gated",
                reconcile=reconcile_once,
                watches=(Watch(kind=NODECLAIMS),),
                gate=Gate(),
                at_start=False,
            ),
        ),
        {"NodeClaim": informer},
    )
    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        group.create_task(loop.run())
        informer._notify(_event("a", EventType.ADDED))
        await asyncio.sleep(0.05)
        assert passes == []
        opened.set()
        await ran.wait()
        loop.stop()
    assert triggered == ["a"]
    assert passes == [0]


def test_a_controller_needing_a_kind_not_informed_is_left_out(telemetry: Telemetry) -> None:
    async def reconcile(name: str) -> Result:
        return Result()

    loops = Manager(telemetry=telemetry, backoff=BACKOFF, synced=None).loops(
        (
            Controller(name="test.nodes", reconcile=reconcile, watches=(Watch(kind=NODES),)),
            Controller(name="test.claims", reconcile=reconcile, reads=(NODECLAIMS,)),
        ),
        {"NodeClaim": _informer(telemetry)},
    )
    assert [loop.name for loop in loops] == ["test.claims"]


def test_a_controller_needs_a_worker() -> None:
    async def reconcile(name: str) -> Result:
        return Result()

    with pytest.raises(ValueError, match="workers must be >= 1"):
        Controller(name="test.none", reconcile=reconcile, workers=0)


async def test_a_singleton_runs_a_pass_for_keys_on_its_channel(telemetry: Telemetry) -> None:
    """As kwok's launch pass is woken when a delayed launch is recorded."""
    channel = Keys("test.launches")
    passes: list[int] = []
    ran = asyncio.Event()

    async def reconcile_once() -> Result:
        passes.append(len(passes))
        ran.set()
        return Result()

    (loop,) = Manager(telemetry=telemetry, backoff=BACKOFF, synced=None).loops(
        (
            Singleton(
                name="test.launches", reconcile=reconcile_once, sources=(channel,), at_start=False
            ),
        ),
        {},
    )
    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        group.create_task(loop.run())
        await asyncio.sleep(0.05)
        assert passes == []
        channel.send("claim-a")
        await ran.wait()
        loop.stop()
    assert passes == [0]
