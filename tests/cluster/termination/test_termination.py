"""Node termination on the real local cluster, with kwok Nodes launched through the NodeClaim
lifecycle: a PodDisruptionBudget that allows no disruption keeps the Node (the eviction's 429 is
retried, never deleted around) until it allows one; a do-not-disrupt pod holds the Node until the
terminationGracePeriod runs out; deleting a NodeClaim removes its Node and instance."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable

import attrs
import pytest

from karpy.apis.codec import parse_time
from karpy.apis.kube.pod import Container, Pod, PodSpec
from karpy.apis.meta import ConditionStatus, ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType
from karpy.controllers.node.termination import TerminationController
from karpy.controllers.nodeclaim.lifecycle import LifecycleController
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.runtime.clock import FakeClock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy_kwok import KwokCloudProvider, KwokOptions
from karpy_kwok.catalog import load_entries
from tests.cluster.nodeclaim.conftest import make_nodeclaim, reconcile_until
from tests.support.clusterview import LiveView
from tests.support.kubehttp import KubeHTTP

pytestmark = pytest.mark.usefixtures("karpy_crds")


@attrs.frozen
class Reconciles:
    """A controller's reconcile, run once cluster state has caught up with the apiserver."""

    reconcile: Callable[[str], Awaitable[Result]]


@attrs.frozen
class Harness:
    kube: KubeClient
    clock: FakeClock
    lifecycle: Reconciles
    termination: Reconciles
    telemetry: Telemetry

    def sample(self, series: str) -> float:
        """The value of one series on /metrics (0 when it is absent)."""
        for line in self.telemetry.prometheus_text().splitlines():
            if line.startswith(f"{series} "):
                return float(line.split()[-1])
        return 0.0

    def total(self, name: str, **labels: str) -> float:
        """The sum of `name`'s series that carry `labels` (whatever their other labels)."""
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        found = 0.0
        for line in self.telemetry.prometheus_text().splitlines():
            series = line.rsplit(" ", 1)[0]
            if series.startswith(f"{name}{{") and all(w in series for w in wanted):
                found += float(line.split()[-1])
        return found


async def _registered_node(
    live: LiveView, name: str, *, termination_grace_period: str | None = None
) -> Harness:
    """A NodeClaim taken through the lifecycle to a Registered kwok Node named `name`."""
    kube, view = live.kube, live.view
    provider = KwokCloudProvider(kube, load_entries(), options=KwokOptions())
    stored = await kube.create(
        NODECLAIMS, make_nodeclaim(name, termination_grace_period=termination_grace_period)
    )
    assert stored.metadata.creation_timestamp is not None
    clock = FakeClock(stored.metadata.creation_timestamp)
    telemetry = Telemetry.setup(service_name="termination-test")
    harness = Harness(
        kube,
        clock,
        Reconciles(
            live.settled(
                LifecycleController(
                    kube,
                    view,
                    provider,
                    clock=clock,
                    recorder=Recorder(kube, clock),
                    metrics=telemetry.metrics,
                ).reconcile
            )
        ),
        Reconciles(
            live.settled(
                TerminationController(
                    kube,
                    view,
                    provider,
                    clock=clock,
                    recorder=Recorder(kube, clock),
                    metrics=telemetry.metrics,
                ).reconcile
            )
        ),
        telemetry,
    )

    async def registered() -> bool:
        claim = await kube.get(NODECLAIMS, name)
        return any(
            c.type == ConditionType.REGISTERED and c.status is ConditionStatus.TRUE
            for c in claim.status.conditions
        )

    await reconcile_until(harness.lifecycle.reconcile, name, registered)
    return harness


async def _run_pod(
    kube: KubeClient,
    namespace: str,
    name: str,
    node: str,
    *,
    annotations: dict[str, str] | None = None,
) -> Pod:
    pod = Pod(
        metadata=ObjectMeta(name=name, labels={"app": name}, annotations=annotations or {}),
        spec=PodSpec(
            containers=(Container(name="app", image="registry.k8s.io/pause:3.9"),),
            node_name=node,
            termination_grace_period_seconds=0,
        ),
    )
    return await kube.create(PODS, pod, namespace=namespace)


async def _absent(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(NODES, name)
    except NotFoundError:
        return True
    return False


async def _nodeclaim_absent(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(NODECLAIMS, name)
    except NotFoundError:
        return True
    return False


async def test_a_pdb_allowing_no_disruption_holds_the_node_until_it_allows_one(
    kube: KubeClient,
    live: LiveView,
    kube_http: KubeHTTP,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.controllers.node.termination")
    h = await _registered_node(live, "tm-pdb")
    guarded = await _run_pod(kube, namespace, "guarded", "tm-pdb")
    pdb_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    kube_http.request(
        "POST",
        pdb_path,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    await kube.delete(NODES, "tm-pdb")

    for _ in range(4):
        result = await h.termination.reconcile("tm-pdb")
        # kwok's heartbeats move the Node's version, so an optimistic write may conflict and
        # requeue; either way the Node is never released.
        assert result.requeue or result.requeue_after is not None
        await asyncio.sleep(result.requeue_after or 0.1)
    refusals = [r for r in caplog.records if r.getMessage() == "eviction refused"]
    assert len(refusals) >= 3, "each retry after the backoff met the PDB's 429 again"
    node_uid = (await kube.get(NODES, "tm-pdb")).metadata.uid or ""
    assert ("Warning", "FailedDraining") in kube_http.events_about(node_uid)
    node = await kube.get(NODES, "tm-pdb")
    assert wk.FINALIZER_TERMINATION in node.metadata.finalizers
    assert (wk.TAINT_DISRUPTED_KEY, "NoSchedule") in {(t.key, t.effect) for t in node.spec.taints}
    assert node.metadata.labels[wk.LABEL_EXCLUDE_FROM_LB] == "true"
    pod = await kube.get(PODS, "guarded", namespace=namespace)
    assert pod.metadata.deletion_timestamp is None, "the PDB was deleted around"
    # Draining the Node deleted its NodeClaim, which now waits for the Node.
    claim = await kube.get(NODECLAIMS, "tm-pdb")
    assert claim.metadata.deletion_timestamp is not None
    await h.lifecycle.reconcile("tm-pdb")
    assert not await _nodeclaim_absent(kube, "tm-pdb")

    kube_http.delete(f"{pdb_path}/guard")
    await reconcile_until(
        h.termination.reconcile, "tm-pdb", lambda: _absent(kube, "tm-pdb"), within=60
    )
    with pytest.raises(NotFoundError):
        await kube.get(PODS, "guarded", namespace=namespace)
    assert ("Normal", "Evicted") in kube_http.events_about(guarded.metadata.uid or "", namespace)
    await reconcile_until(
        h.lifecycle.reconcile, "tm-pdb", lambda: _nodeclaim_absent(kube, "tm-pdb")
    )
    # Karpenter's counters: each refusal and the accepted eviction, the node made and let go.
    evictions = "karpenter_pods_eviction_requests_total"
    assert h.sample(f'{evictions}{{code="429"}}') >= len(refusals)
    assert h.sample(f'{evictions}{{code="200"}}') == 1
    assert h.total("karpenter_nodes_created_total", nodepool="default") == 1
    assert h.total("karpenter_nodes_terminated_total", nodepool="default") == 1
    assert h.total("karpenter_nodes_drained_total", nodepool="default") == 1
    assert h.total("karpenter_pods_drained_total") == 1
    assert h.total("karpenter_nodeclaims_terminated_total", nodepool="default") == 1
    assert h.total("karpenter_nodes_termination_duration_seconds_count", nodepool="default") == 1
    assert h.total("karpenter_nodeclaims_termination_duration_seconds_count") == 1


async def test_a_do_not_disrupt_pod_holds_the_node_until_the_grace_period_ends(
    kube: KubeClient, live: LiveView, namespace: str
) -> None:
    h = await _registered_node(live, "tm-dnd", termination_grace_period="2m")
    await _run_pod(
        kube, namespace, "precious", "tm-dnd", annotations={wk.ANNOTATION_DO_NOT_DISRUPT: "true"}
    )
    await _run_pod(kube, namespace, "ordinary", "tm-dnd")
    await kube.delete(NODES, "tm-dnd")

    async def ordinary_gone() -> bool:
        try:
            await kube.get(PODS, "ordinary", namespace=namespace)
        except NotFoundError:
            return True
        return False

    await reconcile_until(h.termination.reconcile, "tm-dnd", ordinary_gone, within=60)
    # The lifecycle records the deadline on the NodeClaim the drain deleted.
    await h.lifecycle.reconcile("tm-dnd")
    claim = await kube.get(NODECLAIMS, "tm-dnd")
    assert claim.metadata.deletion_timestamp is not None
    recorded = claim.metadata.annotations[wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP]

    async def draining() -> bool:
        conditions = (await kube.get(NODECLAIMS, "tm-dnd")).status.conditions
        return any(
            (c.type, c.status, c.reason)
            == (ConditionType.DRAINED, ConditionStatus.FALSE, "Draining")
            for c in conditions
        )

    # The drain records its progress on the NodeClaim (best effort: a lost race retries).
    await reconcile_until(h.termination.reconcile, "tm-dnd", draining, within=30)
    assert parse_time(recorded) == claim.metadata.deletion_timestamp + datetime.timedelta(minutes=2)
    await h.termination.reconcile("tm-dnd")
    precious = await kube.get(PODS, "precious", namespace=namespace)
    assert precious.metadata.deletion_timestamp is None
    assert not await _absent(kube, "tm-dnd")

    # The clock stands at the NodeClaim's creation, seconds before the Node's deletion.
    h.clock.step(datetime.timedelta(minutes=3))
    await reconcile_until(
        h.termination.reconcile, "tm-dnd", lambda: _absent(kube, "tm-dnd"), within=60
    )


async def test_deleting_a_nodeclaim_removes_its_node_and_instance(
    kube: KubeClient, live: LiveView
) -> None:
    h = await _registered_node(live, "tm-claim")
    await kube.delete(NODECLAIMS, "tm-claim")

    async def both_gone() -> bool:
        await h.termination.reconcile("tm-claim")
        return await _absent(kube, "tm-claim") and await _nodeclaim_absent(kube, "tm-claim")

    await reconcile_until(h.lifecycle.reconcile, "tm-claim", both_gone, within=60)
