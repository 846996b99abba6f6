"""THE composition root: the only place that constructs karpy's collaborators (house rule 5).

Reading `build()` top to bottom shows the whole process graph: telemetry, the kube client, cluster
state and its informers, the leader elector, the probe server, and the controllers. Controllers
are registered in `_controllers()`; each is a `Runner` over a work queue, fed by informer
subscriptions made here. Nothing else in karpy calls a constructor of another package's service.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
from opentelemetry.sdk.trace.export import SpanExporter

from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODES, PODS
from karpy.kube.lease import LeaderElector
from karpy.kube.resources import ResourceKind
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.health import ProbeServer
from karpy.runtime.options import Options
from karpy.runtime.ratelimit import TokenBucket
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer

INFORMED_KINDS: tuple[ResourceKind[Any], ...] = (NODES, PODS)
"""Kinds every replica keeps in cluster state. karpy's CRDs join once their controllers land."""


class Controller(Protocol):
    """What the supervisor needs from a controller loop (a `karpy.runtime.reconciler.Runner`)."""

    name: str

    async def run(self) -> None:
        """Work until `stop()` is called and in-flight work is done."""
        ...

    def stop(self) -> None:
        """Stop taking new work."""
        ...


@attrs.define
class Components:
    """Everything one `karpy run` process is made of."""

    options: Options
    telemetry: Telemetry
    client: KubeClient
    state: ClusterState
    informers: Sequence[Informer[Any]]
    elector: LeaderElector | None
    probes: ProbeServer
    controllers: Sequence[Controller]

    async def close(self) -> None:
        """Close the kube client and flush telemetry (after the supervisor has stopped)."""
        try:
            await self.client.close()
        finally:
            self.telemetry.shutdown()


async def build(
    options: Options,
    *,
    clock: Clock | None = None,
    span_exporter: SpanExporter | None = None,
    kinds: Sequence[ResourceKind[Any]] = INFORMED_KINDS,
) -> Components:
    """Construct the process graph for `options`. `span_exporter` and `kinds` serve tests."""
    clock = clock if clock is not None else SystemClock()
    telemetry = Telemetry.setup(
        service_name=options.telemetry.service_name,
        otlp_endpoint=options.telemetry.otlp_endpoint,
        span_exporter=span_exporter,
    )
    client = await KubeClient.connect(
        options.kube.kubeconfig,
        request_timeout=options.kube.request_timeout,
        limiter=TokenBucket(rate=options.kube.qps, burst=options.kube.burst),
    )
    state = ClusterState(metrics=telemetry.metrics)
    informers: list[Informer[Any]] = [
        Informer(
            client,
            state.register(kind),
            state=state,
            settings=options.watching,
            metrics=telemetry.metrics,
        )
        for kind in kinds
    ]
    elector = (
        LeaderElector(client, options.leader_election, clock=clock, metrics=telemetry.metrics)
        if options.leader_election.enabled
        else None
    )
    probes = ProbeServer(
        host=options.server.bind_address,
        health_port=options.server.health_probe_port,
        metrics_port=options.server.metrics_port,
        liveness={"ping": lambda: True},
        readiness={"cluster-state-synced": lambda: state.synced},
        metrics=telemetry.prometheus_text,
    )
    return Components(
        options=options,
        telemetry=telemetry,
        client=client,
        state=state,
        informers=informers,
        elector=elector,
        probes=probes,
        controllers=_controllers(),
    )


def _controllers() -> list[Controller]:
    # Controllers are constructed here, each with its dependencies passed explicitly, and fed by
    # informer subscriptions made here. None are registered yet: `karpy run` today keeps cluster
    # state, leader election, probes and metrics running so controllers can be plugged in.
    return []
