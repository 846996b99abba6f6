"""THE composition root: the only place that constructs karpy's collaborators (house rule 5).

Reading `build()` top to bottom shows the whole process graph: telemetry, the kube client,
cluster state and its informers, the cloud provider (found by name through `karpy.providers`,
wrapped for spans and metrics), the leader elector, the probe server, and the controllers.
`controllers()` is the flat list of every core controller, as Karpenter's `NewControllers`: each
is constructed with its dependencies and hands out its declaration (`spec()`: what it watches,
what wakes it). The provider's kinds and loops come declared the same way
(`karpy.manager.ProviderExtension`), and so do the Karpenter v0.x legacy controller's. One
`karpy.manager.Manager` turns every declaration into a running loop — queue, workers, backoff,
spans, sync wait — over the informers; the supervisor runs them on the leader.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from karpy.apis.crds import all_crds
from karpy.cloudprovider.overlay import OverlaidCloudProvider
from karpy.cloudprovider.protocol import CloudProvider
from karpy.controllers.capacitybuffer.controller import CapacityBufferController
from karpy.controllers.disruption.controller import DisruptionController
from karpy.controllers.disruption.queue import OrchestrationQueue
from karpy.controllers.metrics.conditions import ConditionTransitions
from karpy.controllers.metrics.pods import PodLatency
from karpy.controllers.metrics.state import StateMetrics
from karpy.controllers.node.health.controller import NodeHealthController, policies_with
from karpy.controllers.node.termination.controller import TerminationController
from karpy.controllers.nodeclaim.consistency import ConsistencyController
from karpy.controllers.nodeclaim.disruption import NodeClaimDisruptionController
from karpy.controllers.nodeclaim.expiration import ExpirationController
from karpy.controllers.nodeclaim.garbagecollection import GarbageCollectionController
from karpy.controllers.nodeclaim.lifecycle.controller import LifecycleController
from karpy.controllers.nodeclaim.podevents import PodEventsController
from karpy.controllers.nodeoverlay.controller import NodeOverlayController
from karpy.controllers.nodepool.hash import NodePoolHashController
from karpy.controllers.nodepool.status import NodePoolStatusController
from karpy.controllers.provisioning.batcher import Batcher
from karpy.controllers.provisioning.provisioner import Provisioner
from karpy.controllers.static.capacity import StaticCapacityController
from karpy.core.disruption.consolidation import Search, Settings
from karpy.kube.client import KubeClient
from karpy.kube.events import Recorder
from karpy.kube.lease import LeaderElector
from karpy.kube.resources import ResourceKind
from karpy.manager import Declaration, Manager, RepairedElsewhere
from karpy.manager.declare import kinds_of
from karpy.operator import inputs
from karpy.operator.components import Components, provider_and_extensions
from karpy.operator.conversion import ConversionWebhook, Endpoint, node_class_defaults
from karpy.operator.dryrun import DecisionLog, DryRunKubeClient
from karpy.operator.inputs import INFORMED_KINDS
from karpy.runtime.channels import Trigger
from karpy.runtime.clock import Clock, SystemClock
from karpy.runtime.health import ProbeServer
from karpy.runtime.options import Options
from karpy.runtime.ratelimit import TokenBucket
from karpy.runtime.telemetry import Telemetry
from karpy.state.buffers import BUFFER_KINDS, BufferPods
from karpy.state.cluster import ClusterState
from karpy.state.informers import Informer
from karpy.state.nominations import NodeNominations
from karpy.state.registrationhealth import RegistrationHealth
from karpy.state.schedulable import SchedulableTimes
from karpy.state.view import ClusterView


async def build(
    options: Options,
    *,
    clock: Clock | None = None,
    span_exporter: SpanExporter | None = None,
    kinds: Sequence[ResourceKind[Any]] = INFORMED_KINDS,
) -> Components:
    """Construct the process graph for `options`. `span_exporter` and `kinds` serve tests (a
    controller needing a kind outside `kinds` is not run).

    Raises KubeConfigError for an unusable kubeconfig and ProviderError (from
    karpy.cloudprovider.registry) when the provider cannot be found or built, or declares a
    kind that is not a ResourceKind.
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
    informers: dict[str, Informer[Any]] = {}

    def inform(kind: ResourceKind[Any]) -> None:
        if kind.kind not in informers:
            informers[kind.kind] = Informer(
                client,
                state.register(kind),
                state=state,
                settings=options.watching,
                metrics=telemetry.metrics,
            )

    for kind in kinds:
        inform(kind)
    if options.feature_gates.capacity_buffer:
        for kind in BUFFER_KINDS:
            inform(kind)
    try:
        provider, extensions = await provider_and_extensions(
            options, client=client, view=view, clock=clock, telemetry=telemetry
        )
    except BaseException:
        try:
            await client.close()
        finally:
            telemetry.shutdown()
        raise
    for extension in extensions:
        # The provider's kinds, and any kind its loops watch, are informed like the core's.
        for kind in (*extension.kinds, *(k for c in extension.controllers for k in kinds_of(c))):
            inform(kind)
    if isinstance(client, DryRunKubeClient):  # shadow mode: report what is withheld
        client.decisions = DecisionLog(view, provider, Recorder(client, clock), telemetry, clock)
    declarations = [
        *controllers(
            options,
            client=client,
            view=view,
            informers=informers,
            provider=provider,
            telemetry=telemetry,
            clock=clock,
            nominations=state.nominations,
            schedulable=state.schedulable,
            repaired_elsewhere=next(
                (e.repaired_elsewhere for e in extensions if e.repaired_elsewhere), None
            ),
        ),
        *(c for extension in extensions for c in extension.controllers),
    ]
    manager = Manager(
        telemetry=telemetry, backoff=options.reconcile.backoff, synced=state.wait_synced
    )
    elector = (
        LeaderElector(client, options.leader_election, clock=clock, metrics=telemetry.metrics)
        if options.leader_election.enabled
        else None
    )
    if elector is not None:
        client.fence(elector.fenced)  # a leader whose lease may have lapsed writes nothing
    webhook = conversion_webhook(options, client=client, provider=provider, clock=clock)
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
        informers=list(informers.values()),
        elector=elector,
        probes=probes,
        webhook=webhook,
        controllers=manager.loops(declarations, informers),
        cloudprovider=provider,
    )


def conversion_webhook(
    options: Options, *, client: KubeClient, provider: CloudProvider, clock: Clock
) -> ConversionWebhook | None:
    """The v1beta1 conversion webhook when enabled: a v1beta1 nodeClassRef that names no kind
    means the provider's first NodeClass, as in Karpenter."""
    settings = options.webhook
    if not settings.enabled:
        return None
    name, _, namespace = settings.service.partition(".")
    endpoint = (
        Endpoint(url=settings.url)
        if settings.url is not None
        else Endpoint(service_name=name, service_namespace=namespace)
    )
    node_class = provider.supported_node_classes()[0]
    crds = all_crds()
    return ConversionWebhook(
        client,
        host=options.server.bind_address,
        port=settings.port,
        endpoint=endpoint,
        crds=crds,
        defaults=node_class_defaults(crds, group=node_class.group, kind=node_class.kind),
        clock=clock,
    )


def controllers(
    options: Options,
    *,
    client: KubeClient,
    view: ClusterView,
    informers: Mapping[str, Informer[Any]],
    provider: CloudProvider,
    telemetry: Telemetry,
    clock: Clock,
    nominations: NodeNominations,
    schedulable: SchedulableTimes,
    repaired_elsewhere: RepairedElsewhere | None = None,
) -> list[Declaration]:
    """Every core controller, declared. They all read through `view`, the one read path:
    cluster state, never a list per reconcile. The manager leaves out one whose kinds are not
    in `informers`."""
    recorder = Recorder(client, clock)
    scheduler = inputs.scheduler_options(options, provider)
    snapshot_kinds = inputs.snapshot_kinds(informers)
    nodeclass_kinds = inputs.nodeclass_kinds(provider, informers)
    queue = OrchestrationQueue(client, view, clock=clock, recorder=recorder, telemetry=telemetry)
    # NodePools' recent registration outcomes: the lifecycle records them, the NodePool status
    # controller forgets them when a pool's spec or NodeClass changes.
    registration_health = RegistrationHealth()
    buffers = BufferPods(view) if options.feature_gates.capacity_buffer else None
    declarations: list[Declaration] = [
        Provisioner(
            client,
            view,
            cloudprovider=provider,
            batcher=Batcher(options.batching, signal=Trigger("provisioning-batch")),
            recorder=recorder,
            telemetry=telemetry,
            nomination_window=inputs.nomination_window(options),
            snapshot_kinds=snapshot_kinds,
            node_nominations=nominations,
            schedulable=schedulable,
            clock=clock,
            scheduler=scheduler,
            buffers=buffers,
        ).spec(),
        StateMetrics(
            view,
            cloudprovider=provider,
            telemetry=telemetry,
            clock=clock,
            nodeclass_kinds=nodeclass_kinds,
        ).spec(),
        ConditionTransitions(
            view, metrics=telemetry.metrics, clock=clock, nodeclass_kinds=nodeclass_kinds
        ).spec(),
        PodLatency(view, metrics=telemetry.metrics, clock=clock, schedulable=schedulable).spec(),
        LifecycleController(
            client,
            view,
            provider,
            clock=clock,
            recorder=recorder,
            tracer=telemetry.tracer,
            metrics=telemetry.metrics,
            registration_health=registration_health,
            extended_resource_timeout=_seconds(options.initialization.extended_resource_timeout),
        ).spec(),
        TerminationController(
            client, view, provider, clock=clock, recorder=recorder, metrics=telemetry.metrics
        ).spec(),
        GarbageCollectionController(
            client, view, provider, clock=clock, telemetry=telemetry
        ).spec(),
        NodePoolHashController(client, view).spec(),
        NodePoolStatusController(
            client,
            view,
            clock=clock,
            telemetry=telemetry,
            nodeclass_kinds={(k.group, k.kind): k for k in nodeclass_kinds},
            registration_health=registration_health,
            cloudprovider=provider,
            static_capacity=options.feature_gates.static_capacity,
        ).spec(),
        NodeClaimDisruptionController(
            client,
            view,
            provider,
            clock=clock,
            telemetry=telemetry,
            nodeclass_kinds=nodeclass_kinds,
        ).spec(),
        ExpirationController(
            client, view, clock=clock, recorder=recorder, telemetry=telemetry
        ).spec(),
        ConsistencyController(client, view, clock=clock, recorder=recorder).spec(),
        queue.spec(),
        DisruptionController(
            view,
            queue,
            clock=clock,
            recorder=recorder,
            telemetry=telemetry,
            cloudprovider=provider,
            scheduler=scheduler,
            snapshot_kinds=snapshot_kinds,
            nomination_window=inputs.nomination_window(options),
            consolidation=Settings(
                search=Search(options.consolidation.search),
                spot_to_spot=options.feature_gates.spot_to_spot_consolidation,
            ),
            min_improvement=options.consolidation.min_improvement,
            validation_delay=options.consolidation.validation_delay,
            # The provisioner is declared above, with the same kinds.
            await_provisioning=True,
            buffers=buffers,
        ).spec(),
        PodEventsController(client, view, clock=clock).spec(),
        NodeOverlayController(
            client,
            view,
            # Judged against the catalog as the cloud reports it; the store is the gate.
            cloudprovider=provider.inner
            if isinstance(provider, OverlaidCloudProvider)
            else provider,
            store=provider.store if isinstance(provider, OverlaidCloudProvider) else None,
            clock=clock,
            nodeclass_kinds=nodeclass_kinds,
        ).spec(),
    ]
    if buffers is not None:
        declarations.append(CapacityBufferController(client, view, clock=clock).spec())
    if options.feature_gates.node_repair:
        declarations.append(
            NodeHealthController(
                client,
                view,
                policies=policies_with(
                    provider.repair_policies(), toleration=options.node_repair.toleration
                ),
                unhealthy_threshold=options.node_repair.unhealthy_threshold,
                clock=clock,
                recorder=recorder,
                telemetry=telemetry,
                repaired_elsewhere=repaired_elsewhere,
            ).spec()
        )
    if options.feature_gates.static_capacity:
        declarations.append(
            StaticCapacityController(
                client, view, cloudprovider=provider, clock=clock, telemetry=telemetry
            ).spec()
        )
    return declarations


def _seconds(value: float | None) -> datetime.timedelta | None:
    return None if value is None else datetime.timedelta(seconds=value)
