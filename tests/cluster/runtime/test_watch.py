"""List-then-watch on the real apiserver: typed events, 410 Gone, catching up after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets

import pytest
from kubernetes_asyncio import client

from karpy.kube.client import KubeClient
from karpy.kube.errors import GoneError, from_status_object
from karpy.kube.resources import Listed
from karpy.kube.watch import Event, EventType, Stream, _raw_events, infinite_watch
from karpy.localcluster import LocalCluster
from karpy.localcluster.errors import PortInUseError
from karpy.runtime.backoff import Backoff
from karpy.runtime.options import WatchingOptions
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from tests.cluster.runtime.support import (
    CONFIG_MAPS,
    ROOT_CA,
    ConfigMap,
    create_config_map,
    server_names,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.marks import CHAIN_A
from tests.support.metrics import total
from tests.support.waiting import eventually

SETTINGS = WatchingOptions(
    server_timeout=60.0, inactivity_timeout=30.0, backoff=Backoff(base=0.5, cap=2.0)
)


async def test_list_yields_listed_then_typed_events(
    kube: KubeClient, telemetry: Telemetry, api_client: client.ApiClient, namespace: str
) -> None:
    await create_config_map(api_client, namespace, "before")
    received: list[Stream[ConfigMap]] = []
    async with contextlib.aclosing(
        infinite_watch(
            kube, CONFIG_MAPS, settings=SETTINGS, metrics=telemetry.metrics, namespace=namespace
        )
    ) as stream:
        async with asyncio.timeout(30):
            first = await anext(stream)
            assert isinstance(first, Listed)
            assert [item.obj.name for item in first.items if item.obj.name != ROOT_CA] == ["before"]
            assert first.resource_version
            await create_config_map(api_client, namespace, "after")
            await client.CoreV1Api(api_client).delete_namespaced_config_map("before", namespace)
            async for entry in stream:
                if isinstance(entry, Event) and entry.item.obj.name == ROOT_CA:
                    continue
                received.append(entry)
                if len(received) == 2:
                    break
    assert all(isinstance(entry, Event) for entry in received)
    events = [(e.type, e.item.obj.name) for e in received if isinstance(e, Event)]
    assert events == [(EventType.ADDED, "after"), (EventType.DELETED, "before")]
    added = received[0]
    assert isinstance(added, Event)
    assert added.item.ref.uid == added.item.obj.uid


async def test_a_too_old_resource_version_is_gone(kube: KubeClient, namespace: str) -> None:
    # Version "1" predates the watch cache; the apiserver answers 410 Gone (as a status or an
    # ERROR event), which continuous_watch turns into a relist.
    async def watch_from_version_one() -> None:
        async with asyncio.timeout(30):
            async for raw in _raw_events(
                kube, CONFIG_MAPS, resource_version="1", settings=SETTINGS, namespace=namespace
            ):
                if raw.get("type") == "ERROR":
                    raise from_status_object(raw["object"])

    with pytest.raises(GoneError):
        await watch_from_version_one()


@CHAIN_A  # restarts the worker's kube-apiserver
@pytest.mark.timeout(600)  # the apiserver may need a minute to rebind; see restart_apiserver
async def test_informers_catch_up_after_the_apiserver_restarts(
    kube: KubeClient,
    telemetry: Telemetry,
    api_client: client.ApiClient,
    namespace: str,
    local_cluster: LocalCluster,
    kube_http: KubeHTTP,
) -> None:
    for index in range(5):
        await create_config_map(api_client, namespace, f"cm-{index}")
    state = ClusterState(metrics=telemetry.metrics)
    store = state.register(CONFIG_MAPS)
    informer = Informer(
        kube,
        store,
        state=state,
        settings=SETTINGS,
        metrics=telemetry.metrics,
        namespace=namespace,
    )
    heard: list[tuple[EventType, str]] = []
    informer.subscribe(lambda event: heard.append((event.type, event.item.obj.name)))

    def state_names() -> set[str]:
        return {item.obj.name for item in store.items()} - {ROOT_CA}

    async with asyncio.TaskGroup() as group:
        task = group.create_task(informer.run())
        async with asyncio.timeout(30):
            await state.wait_synced()
        assert state_names() == {f"cm-{index}" for index in range(5)}

        await asyncio.to_thread(local_cluster.stop_component, "kube-apiserver")

        async def failing() -> bool:
            return total(telemetry, "karpy_watch_errors_total", kind="ConfigMap") >= 1

        await eventually(failing, within=60)  # the informer is now failing and backing off
        await restart_apiserver(local_cluster)
        # Change the cluster right away, while the informer is still reconnecting.
        core = client.CoreV1Api(api_client)
        await core.delete_namespaced_config_map("cm-0", namespace)
        await core.patch_namespaced_config_map("cm-1", namespace, {"data": {"value": "new"}})
        for index in range(5, 8):
            await create_config_map(api_client, namespace, f"cm-{index}")

        expected = await server_names(api_client, namespace)

        async def caught_up() -> bool:
            cm1 = store.get("cm-1", namespace=namespace)
            return state_names() == expected and cm1 is not None and cm1.data["value"] == "new"

        await eventually(caught_up, within=60)
        task.cancel()
    assert state.synced
    assert (EventType.DELETED, "cm-0") in heard
    assert {(EventType.ADDED, f"cm-{index}") for index in range(5, 8)} <= set(heard)
    assert "karpy_watch_errors_total" in telemetry.prometheus_text()
    await wait_for_controller_manager(kube_http)


async def restart_apiserver(local_cluster: LocalCluster) -> None:
    """Start the stopped apiserver again on its old port.

    LocalCluster checks the port with a bind that lacks SO_REUSEADDR, so connections the killed
    apiserver left in TIME_WAIT make it refuse for up to a minute (kube-apiserver itself binds fine
    with SO_REUSEADDR). Retry until the check passes. The start runs on this (the main) thread on
    purpose: the component dies with the thread that spawned it (PR_SET_PDEATHSIG is per thread),
    so starting it from a worker thread would kill it when the loop's executor shuts down.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while True:
        try:
            local_cluster.start_component("kube-apiserver")
        except PortInUseError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(1.0)
        else:
            return


async def test_an_idle_stream_is_reopened_from_its_version_without_a_relist(
    kube: KubeClient,
    telemetry: Telemetry,
    api_client: client.ApiClient,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    idle = WatchingOptions(server_timeout=60.0, inactivity_timeout=0.3, backoff=SETTINGS.backoff)
    caplog.set_level(logging.DEBUG, logger="karpy.kube.watch")

    def reconnects() -> list[logging.LogRecord]:
        return [
            r for r in caplog.records if r.getMessage() == "watch stream inactive, reconnecting"
        ]

    async with contextlib.aclosing(
        infinite_watch(
            kube, CONFIG_MAPS, settings=idle, metrics=telemetry.metrics, namespace=namespace
        )
    ) as stream:
        async with asyncio.timeout(30):
            assert isinstance(await anext(stream), Listed)

            async def reconnected_twice() -> bool:
                return len(reconnects()) >= 2

            async def create_later() -> None:
                await eventually(reconnected_twice, interval=0.05)  # idle timeouts pass first
                await create_config_map(api_client, namespace, "late")

            async with asyncio.TaskGroup() as group:
                group.create_task(create_later())
                async for entry in stream:
                    if isinstance(entry, Event) and entry.item.obj.name == "late":
                        break
    # The watch still delivered the object created after reconnecting.
    assert len(reconnects()) >= 2
    assert 'karpy_watch_lists_total{kind="ConfigMap"} 1' in telemetry.prometheus_text()


async def wait_for_controller_manager(kube_http: KubeHTTP) -> None:
    """Leave the session's cluster as found: wait until the controller-manager is back at work.

    After a long apiserver outage its reflectors back off for up to a minute or two, and the next
    test's namespace fixture needs it to create the default ServiceAccount.
    """
    name = f"t-restart-probe-{secrets.token_hex(3)}"
    await asyncio.to_thread(
        kube_http.request, "POST", "/api/v1/namespaces", {"metadata": {"name": name}}
    )
    path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    try:

        async def ready() -> bool:
            return await asyncio.to_thread(kube_http.exists, path)

        await eventually(ready, within=240, interval=1.0)
    finally:
        await asyncio.to_thread(kube_http.delete, f"/api/v1/namespaces/{name}")
