"""THE composition root: the only place that constructs karpy's collaborators (house rule 5).

Reading `build()` top to bottom shows the whole process graph: telemetry, the kube client, cluster
state and its informers, the cloud provider (found by name through `karpy.providers`, wrapped
for spans and metrics), the leader elector, the probe server, and the controllers (provisioning,
NodeClaim lifecycle and garbage collection, Node termination, disruption with its orchestration
queue and lastPodEventTime stamper, and the upkeep of `_upkeep()`: NodePool hash and status, the
NodeClaim Drifted/Consolidatable conditions, expiry, node repair). Controllers are registered in
`_controllers()`, fed by informer subscriptions made here; they run on the leader only. The
provider's own kinds and loops are declared by it
(`karpy.cloudprovider.protocol.ProviderExtension`) and built here too, in
`_provider_extension()`: its kinds are informed like the core kinds and its loops get the same
queues, runners, backoff and shutdown drain. Nothing else in karpy calls a constructor of another
package's service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, ParamSpec, Protocol, TypeVar, runtime_checkable

import attrs
from opentelemetry.sdk.trace.export import SpanExporter

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1alpha5.translate import LegacySettings
from karpy.cloudprovider.instrumented import InstrumentedCloudProvider
from karpy.cloudprovider.protocol import (
    Change,
    CloudProvider,
    Extended,
    KeyedController,
    PeriodicController,
    ProviderExtension,
    Watch,
)
from karpy.cloudprovider.registry import ProviderContext, ProviderError, build_provider
from karpy.controllers.disruption import commands as disruption_commands
from karpy.controllers.disruption.controller import DisruptionController
from karpy.controllers.disruption.queue import OrchestrationQueue
from karpy.controllers.legacy.extension import legacy_extension
from karpy.controllers.metrics.state import StateMetrics
from karpy.controllers.node.health.controller import NodeHealthController, policies_with
from karpy.controllers.node.termination import subscribers as termination_events
from karpy.controllers.node.termination.controller import TerminationController
from karpy.controllers.nodeclaim.disruption import NodeClaimDisruptionController
from karpy.controllers.nodeclaim.expiration import ExpirationController
from karpy.controllers.nodeclaim.garbagecollection import GarbageCollectionController
from karpy.controllers.nodeclaim.lifecycle import subscribers as lifecycle_events
from karpy.controllers.nodeclaim.lifecycle.controller import LifecycleController
from karpy.controllers.nodeclaim.podevents import PodEventsController
from karpy.controllers.nodeclaim.podevents import pod_subscriber as podevents_subscriber
from karpy.controllers.nodepool.hash import NodePoolHashController
from karpy.controllers.nodepool.status import NodePoolStatusController
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.deleting import node_subscriber, nodeclaim_subscriber
from karpy.controllers.provisioning.provisioner import Provisioner
from karpy.controllers.provisioning.trigger import pod_subscriber
from karpy.core.disruption.consolidation import Search, Settings
from karpy.core.scheduling.preferences import MinValuesPolicy, PreferencePolicy
from karpy.core.scheduling.scheduler import SchedulerOptions
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import (
    DAEMONSETS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODDISRUPTIONBUDGETS,
    PODS,
    STORAGE_CLASSES,
)
from karpy.kube.lease import LeaderElector
from karpy.kube.resources import ResourceKind
from karpy.kube.watch import Event, EventType
from karpy.operator.dryrun import DecisionLog, DryRunKubeClient
from karpy.runtime.backoff import Backoff
from karpy.runtime.channels import Trigger
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.health import ProbeServer
from karpy.runtime.options import Options
from karpy.runtime.ratelimit import TokenBucket
from karpy.runtime.reconciler import Result, Runner, SingletonLoop, WorkQueue
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer, Subscriber
from karpy.state.nominations import NodeNominations
from karpy.state.snapshot import SnapshotKinds
from karpy.state.view import ClusterView

T = TypeVar("T")
P = ParamSpec("P")

SNAPSHOT_KINDS: Final = SnapshotKinds(
    daemonsets=DAEMONSETS,
    persistent_volumes=PERSISTENT_VOLUMES,
    persistent_volume_claims=PERSISTENT_VOLUME_CLAIMS,
    storage_classes=STORAGE_CLASSES,
)
"""What the provisioner's snapshot reads beyond the four required kinds: DaemonSets (their pods'
requests are every new node's overhead) and the storage kinds (a pod's volumes pin its zone)."""

INFORMED_KINDS: tuple[ResourceKind[Any], ...] = (
    NODES,
    PODS,
    NODECLAIMS,
    NODEPOOLS,
    PODDISRUPTIONBUDGETS,
    *(kind for kind in attrs.astuple(SNAPSHOT_KINDS, recurse=False) if kind is not None),
)
"""Kinds every replica keeps in cluster state (karpy's CRDs must be installed)."""

PROVISIONING_KINDS: frozenset[str] = frozenset(k.kind for k in (NODES, PODS, NODECLAIMS, NODEPOOLS))
"""The provisioner reads these; it is registered only when all of them are informed."""

DISRUPTION_KINDS: frozenset[str] = PROVISIONING_KINDS
"""Disruption and lastPodEventTime read these; registered only when all are informed (the
disruption pass also reads PodDisruptionBudgets when they are)."""


class Controller(Protocol):
    """What the supervisor needs from a controller loop (a `karpy.runtime.reconciler.Runner`)."""

    @property
    def name(self) -> str:
        """Dotted controller name, used for task names and logs."""
        ...

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
    cloudprovider: CloudProvider | None = None

    async def close(self) -> None:
        """Close the provider (its optional `aclose()` hook), the kube client, and flush
        telemetry (after the supervisor has stopped)."""
        try:
            if self.cloudprovider is not None:
                await _close_provider(self.cloudprovider)
        finally:
            try:
                await self.client.close()
            finally:
                self.telemetry.shutdown()


@runtime_checkable
class _Closes(Protocol):
    """The optional provider hook: release clients and connections at shutdown."""

    async def aclose(self) -> None: ...


def _unwrapped(provider: CloudProvider) -> object:
    return provider.inner if isinstance(provider, InstrumentedCloudProvider) else provider


async def _build_provider(
    options: Options,
    *,
    kube: KubeClient,
    view: ClusterView,
    clock: Clock,
    telemetry: Telemetry | None = None,
) -> CloudProvider:
    """The configured cloud provider (`options.provider`) over `kube` and `view`."""
    return await build_provider(
        options.provider.name,
        ProviderContext(
            kube=kube,
            view=view,
            clock=clock,
            cluster_name=options.provider.cluster_name,
            settings=options.provider.settings,
            telemetry=telemetry,
        ),
    )


async def _close_provider(provider: CloudProvider) -> None:
    inner = _unwrapped(provider)
    if isinstance(inner, _Closes):
        await inner.aclose()


async def build(
    options: Options,
    *,
    clock: Clock | None = None,
    span_exporter: SpanExporter | None = None,
    kinds: Sequence[ResourceKind[Any]] = INFORMED_KINDS,
) -> Components:
    """Construct the process graph for `options`. `span_exporter` and `kinds` serve tests.

    Raises KubeConfigError for an unusable kubeconfig and ProviderError (from
    karpy.cloudprovider.registry) when the provider cannot be found or built.
    """
    clock = clock if clock is not None else SystemClock()
    telemetry = Telemetry.setup(
        service_name=options.telemetry.service_name,
        otlp_endpoint=options.telemetry.otlp_endpoint,
        span_exporter=span_exporter,
        cluster_name=options.provider.cluster_name,
    )
    client = await (DryRunKubeClient if options.dry_run else KubeClient).connect(
        options.kube.kubeconfig,
        request_timeout=options.kube.request_timeout,
        limiter=TokenBucket(rate=options.kube.qps, burst=options.kube.burst),
    )
    state = ClusterState(metrics=telemetry.metrics)
    view = ClusterView(state)
    informers = [
        _informer(kind, client=client, state=state, options=options, telemetry=telemetry)
        for kind in kinds
    ]
    provider: CloudProvider | None = None
    try:
        provider = InstrumentedCloudProvider(
            await _build_provider(
                options, kube=client, view=view, clock=clock, telemetry=telemetry
            ),
            telemetry,
        )
        provider_controllers = [
            controller
            for extension in (
                _extension(provider),
                # Karpenter v0.x Provisioners/templates kept as owned v1 objects (migration.md).
                legacy_extension(
                    options.provider.name,
                    client=client,
                    view=view,
                    settings=LegacySettings(
                        cluster_name=options.provider.cluster_name,
                        default_instance_profile=options.provider.default_instance_profile,
                    ),
                    clock=clock,
                ),
            )
            for controller in _provider_extension(
                extension,
                client=client,
                state=state,
                informers=informers,
                options=options,
                telemetry=telemetry,
            )
        ]
    except BaseException:
        try:
            if provider is not None:
                await _close_provider(provider)
        finally:
            await client.close()
            telemetry.shutdown()
        raise
    if isinstance(client, DryRunKubeClient):  # shadow mode: report what is withheld
        client.decisions = DecisionLog(view, provider, Recorder(client, clock), telemetry, clock)
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
        controllers=[
            *_controllers(
                options,
                client=client,
                view=view,
                informers=informers,
                provider=provider,
                telemetry=telemetry,
                clock=clock,
                nominations=state.nominations,
            ),
            *provider_controllers,
        ],
        cloudprovider=provider,
    )


def _controllers(
    options: Options,
    *,
    client: KubeClient,
    view: ClusterView,
    informers: Sequence[Informer[Any]],
    provider: CloudProvider,
    telemetry: Telemetry,
    clock: Clock,
    nominations: NodeNominations,
) -> list[Controller]:
    """Every core controller loop, each with its dependencies passed explicitly. They all read
    through `view`, the one read path: cluster state, never a list per reconcile."""
    controllers: list[Controller] = []
    by_kind = {informer.kind: informer for informer in informers}
    if by_kind.keys() >= PROVISIONING_KINDS:
        # pod informer -> Batcher (window) -> Provisioner (snapshot, solve, create NodeClaims)
        batcher = Batcher(options.batching, signal=Trigger("provisioning-batch"))
        by_kind[PODS.kind].subscribe(pod_subscriber(batcher))
        by_kind[NODES.kind].subscribe(node_subscriber(batcher))
        by_kind[NODECLAIMS.kind].subscribe(nodeclaim_subscriber(batcher))
        controllers.append(
            Provisioner(
                client,
                view,
                cloudprovider=provider,
                batcher=batcher,
                recorder=Recorder(client, clock),
                telemetry=telemetry,
                reconcile=options.reconcile,
                # Karpenter's nomination window: max(2 x batch max duration, 10s).
                nomination_window=_nomination_window(options),
                snapshot_kinds=_snapshot_kinds(by_kind),
                node_nominations=nominations,
                clock=clock,
                scheduler=_scheduler_options(options, provider),
            )
        )
    if by_kind.keys() >= {NODES.kind, PODS.kind, NODECLAIMS.kind, NODEPOOLS.kind}:
        controllers.append(
            StateMetrics(
                view, cloudprovider=provider, telemetry=telemetry, reconcile=options.reconcile
            )
        )
    if by_kind.keys() >= {NODES.kind, PODS.kind, NODECLAIMS.kind}:
        controllers.extend(
            _lifecycle_and_termination(
                options,
                client=client,
                view=view,
                by_kind=by_kind,
                provider=provider,
                telemetry=telemetry,
                clock=clock,
            )
        )
    if by_kind.keys() >= DISRUPTION_KINDS:
        controllers.extend(
            _upkeep(
                options,
                client=client,
                view=view,
                by_kind=by_kind,
                provider=provider,
                telemetry=telemetry,
                clock=clock,
            )
        )
        controllers.extend(
            _disruption(
                options,
                client=client,
                view=view,
                by_kind=by_kind,
                provider=provider,
                telemetry=telemetry,
                clock=clock,
            )
        )
    return controllers


def _informer(
    kind: ResourceKind[T],
    *,
    client: KubeClient,
    state: ClusterState,
    options: Options,
    telemetry: Telemetry,
) -> Informer[T]:
    """The informer of `kind`, core or provider alike, writing the store it registers."""
    return Informer(
        client,
        state.register(kind),
        state=state,
        settings=options.watching,
        metrics=telemetry.metrics,
    )


def _extension(provider: CloudProvider) -> ProviderExtension[Any]:
    """What the provider declares besides its methods (nothing when it has no `extension()`)."""
    inner = _unwrapped(provider)
    return inner.extension() if isinstance(inner, Extended) else ProviderExtension()


def _resource_kind(kind: object, *, provider: str) -> ResourceKind[Any]:
    if not isinstance(kind, ResourceKind):
        msg = (
            f"cloud provider {provider!r} declared a kind of type {type(kind).__name__}; "
            "kinds are karpy.kube.resources.ResourceKind"
        )
        raise ProviderError(msg)
    return kind


def _provider_extension(
    extension: ProviderExtension[Any],
    *,
    client: KubeClient,
    state: ClusterState,
    informers: list[Informer[Any]],
    options: Options,
    telemetry: Telemetry,
) -> list[Controller]:
    """Inform the provider's kinds (and any kind its loops watch) into cluster state, appending
    their informers to `informers`, and build its declared loops.

    Raises ProviderError when a declared kind is not a ResourceKind.
    """
    name = options.provider.name
    informed = {informer.kind for informer in informers}
    watched = (
        w.kind
        for spec in extension.controllers
        if isinstance(spec, KeyedController)
        for w in spec.watches
    )
    for declared in (*extension.kinds, *watched):
        kind = _resource_kind(declared, provider=name)
        if kind.kind in informed:
            continue
        informed.add(kind.kind)
        informers.append(
            _informer(kind, client=client, state=state, options=options, telemetry=telemetry)
        )
    return provider_controllers(
        extension,
        by_kind={informer.kind: informer for informer in informers},
        telemetry=telemetry,
        backoff=options.reconcile.backoff,
        synced=state.wait_synced,
    )


def provider_controllers(
    extension: ProviderExtension[Any],
    *,
    by_kind: Mapping[str, Informer[Any]],
    telemetry: Telemetry,
    backoff: Backoff,
    synced: Callable[[], Awaitable[None]] | None = None,
) -> list[Controller]:
    """The provider's declared loops as controllers: a keyed spec becomes a WorkQueue and Runner
    fed by subscriptions to the informers of its watched kinds (which `by_kind` must hold), a
    periodic spec a SingletonLoop. With `synced`, every reconcile first waits for it: a loop that
    judges the cluster from cluster state (leaked instances: "no NodeClaim holds it") must not
    see the empty state of a process still listing. Tests use this to run a provider's loops
    without an operator.
    """
    controllers: list[Controller] = []
    for spec in extension.controllers:
        if isinstance(spec, PeriodicController):
            controllers.append(
                SingletonLoop(
                    spec.name,
                    _after_sync(spec.reconcile_once, synced),
                    telemetry=telemetry,
                    backoff=backoff,
                    wake=spec.wake,
                    requeue_on=spec.requeue_on,
                )
            )
            continue
        queue = WorkQueue[str](spec.name, telemetry=telemetry)
        for watch in spec.watches:
            by_kind[_resource_kind(watch.kind, provider=spec.name).kind].subscribe(
                _watch_subscriber(watch, queue.add)
            )
        controllers.append(
            Runner(
                spec.name,
                _after_sync(spec.reconcile, synced),
                queue=queue,
                telemetry=telemetry,
                backoff=backoff,
                workers=spec.workers,
                describe=spec.describe,
                done_on=spec.done_on,
                requeue_on=spec.requeue_on,
            )
        )
    return controllers


def _after_sync(
    reconcile: Callable[P, Awaitable[Result]], synced: Callable[[], Awaitable[None]] | None
) -> Callable[P, Awaitable[Result]]:
    """`reconcile`, waiting for `synced` before each call (as it is, without `synced`)."""
    if synced is None:
        return reconcile

    async def gated(*args: P.args, **kwargs: P.kwargs) -> Result:
        await synced()
        return await reconcile(*args, **kwargs)

    return gated


def _watch_subscriber(watch: Watch[Any], enqueue: Callable[[str], None]) -> Subscriber[Any]:
    """An informer event, as the provider's `Change`, through its key function into the queue."""

    def on_event(event: Event[Any]) -> None:
        change = Change(
            name=event.item.ref.name,
            obj=event.item.obj,
            deleted=event.type is EventType.DELETED,
        )
        for key in watch.keys(change):
            enqueue(key)

    return on_event


def _snapshot_kinds(by_kind: Mapping[str, Informer[Any]]) -> SnapshotKinds:
    """SNAPSHOT_KINDS less the kinds this process does not inform (tests inform fewer)."""

    def informed(kind: ResourceKind[T] | None) -> ResourceKind[T] | None:
        return kind if kind is not None and kind.kind in by_kind else None

    return SnapshotKinds(
        daemonsets=informed(SNAPSHOT_KINDS.daemonsets),
        persistent_volumes=informed(SNAPSHOT_KINDS.persistent_volumes),
        persistent_volume_claims=informed(SNAPSHOT_KINDS.persistent_volume_claims),
        storage_classes=informed(SNAPSHOT_KINDS.storage_classes),
    )


#: Parallel reconciles per controller: NodeClaims and Nodes are independent of each other.
LIFECYCLE_WORKERS = 8


def _lifecycle_and_termination(
    options: Options,
    *,
    client: KubeClient,
    view: ClusterView,
    by_kind: dict[str, Informer[Any]],
    provider: CloudProvider,
    telemetry: Telemetry,
    clock: Clock,
) -> list[Controller]:
    """NodeClaim lifecycle (keyed by NodeClaim name), Node termination (keyed by Node name) and
    NodeClaim garbage collection (a singleton pass every two minutes).

    They are registered together: finalizing a NodeClaim waits for its Node's termination and
    terminating a Node ends with its NodeClaim's instance.
    """
    lifecycle = LifecycleController(
        client,
        view,
        provider,
        clock=clock,
        recorder=Recorder(client, clock),
        tracer=telemetry.tracer,
        metrics=telemetry.metrics,
    )
    termination = TerminationController(
        client,
        view,
        provider,
        clock=clock,
        recorder=Recorder(client, clock),
        metrics=telemetry.metrics,
    )
    lifecycle_queue = WorkQueue[str](lifecycle.name, telemetry=telemetry)
    termination_queue = WorkQueue[str](termination.name, telemetry=telemetry)
    by_kind[NODECLAIMS.kind].subscribe(lifecycle_events.nodeclaim_subscriber(lifecycle_queue.add))
    by_kind[NODES.kind].subscribe(lifecycle_events.node_subscriber(lifecycle_queue.add, view))
    by_kind[NODES.kind].subscribe(termination_events.node_subscriber(termination_queue.add))
    by_kind[PODS.kind].subscribe(termination_events.pod_subscriber(termination_queue.add, view))
    garbagecollection = GarbageCollectionController(
        client, view, provider, clock=clock, telemetry=telemetry, reconcile=options.reconcile
    )
    return [
        Runner(
            lifecycle.name,
            lifecycle.reconcile,
            queue=lifecycle_queue,
            telemetry=telemetry,
            backoff=options.reconcile.backoff,
            workers=LIFECYCLE_WORKERS,
        ),
        Runner(
            termination.name,
            termination.reconcile,
            queue=termination_queue,
            telemetry=telemetry,
            backoff=options.reconcile.backoff,
            workers=LIFECYCLE_WORKERS,
        ),
        garbagecollection,
    ]


def _nomination_window(options: Options) -> float:
    """Karpenter's nomination window: max(2 x batch max duration, 10 s)."""
    return max(2 * options.batching.max_duration, 10.0)


def _scheduler_options(options: Options, provider: CloudProvider) -> SchedulerOptions:
    return SchedulerOptions(
        preference_policy=PreferencePolicy(options.scheduling.preference_policy),
        min_values_policy=MinValuesPolicy(options.scheduling.min_values_policy),
        provider_labels=provider.well_known_labels(),
    )


def _disruption(
    options: Options,
    *,
    client: KubeClient,
    view: ClusterView,
    by_kind: dict[str, Informer[Any]],
    provider: CloudProvider,
    telemetry: Telemetry,
    clock: Clock,
) -> list[Controller]:
    """The disruption singleton (polled every 10 s, triggered by pod events on nodes), its
    orchestration queue (woken by changes to the NodeClaims of a command), and the
    lastPodEventTime stamper it depends on (keyed by Node name).

    pod informer -> podevents subscriber -> {podevents queue, disruption trigger}
    nodeclaim informer -> {orchestration queue (command id)}
    """
    trigger = Trigger("disruption")
    podevents = PodEventsController(client, view, clock=clock)
    podevents_queue = WorkQueue[str](podevents.name, telemetry=telemetry)
    recorder = Recorder(client, clock)
    queue = OrchestrationQueue(
        client,
        view,
        clock=clock,
        recorder=recorder,
        telemetry=telemetry,
        reconcile=options.reconcile,
    )

    def on_pod_moved(node: str) -> None:
        podevents_queue.add(node)
        trigger.fire()

    def on_nodeclaim(event: Event[NodeClaim]) -> None:
        claim = event.item.obj
        for command in (
            disruption_commands.command_of(claim),
            disruption_commands.replacement_for(claim),
        ):
            if command is not None:
                queue.wake(command)

    by_kind[PODS.kind].subscribe(podevents_subscriber(on_pod_moved, view))
    by_kind[NODECLAIMS.kind].subscribe(on_nodeclaim)
    return [
        queue,
        DisruptionController(
            view,
            queue,
            clock=clock,
            recorder=recorder,
            telemetry=telemetry,
            reconcile=options.reconcile,
            trigger=trigger,
            cloudprovider=provider,
            scheduler=_scheduler_options(options, provider),
            snapshot_kinds=_snapshot_kinds(by_kind),
            nomination_window=_nomination_window(options),
            consolidation=Settings(
                search=Search(options.consolidation.search),
                spot_to_spot=options.feature_gates.spot_to_spot_consolidation,
            ),
            min_improvement=options.consolidation.min_improvement,
            validation_delay=options.consolidation.validation_delay,
            # Built with the provisioner (DISRUPTION_KINDS are PROVISIONING_KINDS).
            await_provisioning=True,
        ),
        Runner(
            podevents.name,
            podevents.reconcile,
            queue=podevents_queue,
            telemetry=telemetry,
            backoff=options.reconcile.backoff,
            workers=LIFECYCLE_WORKERS,
            done_on=(NotFoundError,),
        ),
    ]


# ---------------------------------------------------------------- NodePool and NodeClaim upkeep


def _upkeep(
    options: Options,
    *,
    client: KubeClient,
    view: ClusterView,
    by_kind: dict[str, Informer[Any]],
    provider: CloudProvider,
    telemetry: Telemetry,
    clock: Clock,
) -> list[Controller]:
    """The NodePool hash and status, the NodeClaim Drifted/Consolidatable conditions, expiry, and
    node repair when the NodeRepair gate is on; each keyed by name and fed by informer events:

    NodePool -> nodepool.hash, nodepool.status, nodeclaim.disruption (the pool's NodeClaims)
    NodeClaim -> nodeclaim.disruption, nodeclaim.expiration, nodepool.status (its pool)
    NodeClass (the provider's kinds) -> nodepool.status and nodeclaim.disruption (referrers)
    Node -> node.health
    """
    supported = {(k.group, k.kind) for k in provider.supported_node_classes()}
    nodeclass_kinds = {
        (i.store.kind.group, i.kind): i.store.kind
        for i in by_kind.values()
        if (i.store.kind.group, i.kind) in supported
    }
    recorder = Recorder(client, clock)
    hashing = NodePoolHashController(client, view)
    status = NodePoolStatusController(
        client, view, clock=clock, telemetry=telemetry, nodeclass_kinds=nodeclass_kinds
    )
    conditions = NodeClaimDisruptionController(
        client, view, provider, clock=clock, telemetry=telemetry
    )
    expiration = ExpirationController(
        client, view, clock=clock, recorder=recorder, telemetry=telemetry
    )
    keyed: list[tuple[str, Callable[[str], Awaitable[Result]]]] = [
        (hashing.name, hashing.reconcile),
        (status.name, status.reconcile),
        (conditions.name, conditions.reconcile),
        (expiration.name, expiration.reconcile),
    ]
    if options.feature_gates.node_repair:
        health = NodeHealthController(
            client,
            view,
            policies=policies_with(
                provider.repair_policies(), toleration=options.node_repair.toleration
            ),
            unhealthy_threshold=options.node_repair.unhealthy_threshold,
            clock=clock,
            recorder=recorder,
            telemetry=telemetry,
        )
        keyed.append((health.name, health.reconcile))
    queues = {name: WorkQueue[str](name, telemetry=telemetry) for name, _ in keyed}

    def claims_of_pool(pool: str) -> list[str]:
        return [
            c.metadata.name or ""
            for c in view.nodeclaims()
            if c.metadata.labels.get(wk.LABEL_NODEPOOL) == pool
        ]

    seen: dict[str, tuple[object, ...]] = {}

    def on_nodepool(event: Event[Any]) -> None:
        name = event.item.ref.name
        queues[hashing.name].add(name)
        queues[status.name].add(name)
        # The pool's NodeClaims are rechecked only when what drift reads changed (its spec, by
        # generation, or its hash), not on each of its own status writes.
        meta = event.item.obj.metadata
        key = (meta.generation, meta.annotations.get(wk.ANNOTATION_NODEPOOL_HASH))
        if event.type is EventType.DELETED:
            seen.pop(name, None)
        elif seen.get(name) != key:
            seen[name] = key
            for claim in claims_of_pool(name):
                queues[conditions.name].add(claim)

    def on_nodeclaim(event: Event[Any]) -> None:
        claim = event.item.obj
        queues[conditions.name].add(event.item.ref.name)
        queues[expiration.name].add(event.item.ref.name)
        pool = claim.metadata.labels.get(wk.LABEL_NODEPOOL)
        if pool:
            queues[status.name].add(pool)

    def on_nodeclass(event: Event[Any]) -> None:
        name = event.item.ref.name
        for pool in view.nodepools():
            if pool.spec.template.spec.node_class_ref.name == name:
                queues[status.name].add(pool.metadata.name or "")
        for claim in view.nodeclaims():
            if claim.spec.node_class_ref.name == name:
                queues[conditions.name].add(claim.metadata.name or "")

    by_kind[NODEPOOLS.kind].subscribe(on_nodepool)
    by_kind[NODECLAIMS.kind].subscribe(on_nodeclaim)
    for kind in {k.kind for k in nodeclass_kinds.values()}:
        by_kind[kind].subscribe(on_nodeclass)
    if options.feature_gates.node_repair:
        by_kind[NODES.kind].subscribe(lambda event: queues[NodeHealthController.name].add(
            event.item.ref.name
        ))  # fmt: skip
    return [
        Runner(
            name,
            reconcile,
            queue=queues[name],
            telemetry=telemetry,
            backoff=options.reconcile.backoff,
            workers=LIFECYCLE_WORKERS,
            done_on=(NotFoundError,),
            requeue_on=(ConflictError,),
        )
        for name, reconcile in keyed
    ]
