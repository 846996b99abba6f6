"""Node termination on the real local cluster, with kwok Nodes launched through the NodeClaim
lifecycle: a PodDisruptionBudget that allows no disruption keeps the Node (the eviction's 429 is
retried, never deleted around) until it allows one; a do-not-disrupt pod holds the Node until the
terminationGracePeriod runs out; a pod a PDB protects is deleted at the deadline less its own
grace period, with that grace; a drained Node's VolumeAttachment (a CSIDriver, a
PersistentVolume, the attachment held by a finalizer the test owns) holds the instance until it
goes, or until the deadline, unless a pod the drain leaves mounts its volume; a pod already
terminating with more grace than the deadline leaves is deleted again with the time left;
deleting a NodeClaim removes its Node and instance."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Final

import attrs
import pytest

from karpy.apis.codec import parse_time
from karpy.apis.kube.common import Toleration, TolerationOperator
from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.kube.pod import (
    Container,
    PersistentVolumeClaimVolumeSource,
    Pod,
    PodSpec,
    Volume,
)
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaimStatus
from karpy.controllers.node.termination import TerminationController
from karpy.controllers.nodeclaim.lifecycle import LifecycleController
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError, TooManyRequestsError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy.runtime.clock import FakeClock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.testing.fake_cloudprovider import FakeCloudProvider
from karpy_kwok import KwokCloudProvider, KwokOptions
from karpy_kwok.catalog import load_entries
from tests.cluster.nodeclaim.conftest import make_nodeclaim, reconcile_until
from tests.support import metrics
from tests.support.clusterview import LiveView
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

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
        return metrics.sample(self.telemetry, series)

    def total(self, name: str, **labels: str) -> float:
        """The sum of `name`'s series that carry `labels` (whatever their other labels)."""
        return metrics.total(self.telemetry, name, **labels)


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


HOLD: Final = "example.com/hold"
"""A finalizer the test owns, so what it holds stays until the test lets it go."""


def _attach(kube_http: KubeHTTP, node: str) -> str:
    """A CSI volume attached to `node`: its CSIDriver, its PersistentVolume (named after the
    Node) and a VolumeAttachment held by HOLD. Returns the attachment's path."""
    driver = f"{node}.csi.example.com"
    kube_http.request(
        "POST",
        "/apis/storage.k8s.io/v1/csidrivers",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": driver},
            "spec": {"attachRequired": True},
        },
    )
    kube_http.request(
        "POST",
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": node},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "csi": {"driver": driver, "volumeHandle": f"vol-{node}"},
            },
        },
    )
    kube_http.request(
        "POST",
        "/apis/storage.k8s.io/v1/volumeattachments",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": node, "finalizers": [HOLD]},
            "spec": {
                "attacher": driver,
                "nodeName": node,
                "source": {"persistentVolumeName": node},
            },
        },
    )
    return f"/apis/storage.k8s.io/v1/volumeattachments/{node}"


def _detach(kube_http: KubeHTTP, attachment: str) -> None:
    """The volume detached: the attachment released and deleted, as the attach/detach
    controller deletes it."""
    kube_http.merge_patch(attachment, {"metadata": {"finalizers": None}})
    kube_http.delete(attachment)


def _has(
    claim_conditions: tuple[Condition, ...],
    kind: ConditionType,
    status: ConditionStatus,
    reason: str,
) -> bool:
    return any((c.type, c.status, c.reason) == (kind, status, reason) for c in claim_conditions)


def _condition(
    kube: KubeClient, name: str, kind: ConditionType, status: ConditionStatus, reason: str
) -> Callable[[], Awaitable[bool]]:
    async def holds() -> bool:
        return _has((await kube.get(NODECLAIMS, name)).status.conditions, kind, status, reason)

    return holds


async def test_a_drained_node_waits_for_its_volume_attachments_to_go(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP
) -> None:
    h = await _registered_node(live, "tm-vol")
    attachment = _attach(kube_http, "tm-vol")
    await kube.delete(NODES, "tm-vol")
    awaiting = _condition(
        kube,
        "tm-vol",
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.UNKNOWN,
        "AwaitingVolumeDetachment",
    )
    await reconcile_until(h.termination.reconcile, "tm-vol", awaiting, within=30)

    for _ in range(3):
        result = await h.termination.reconcile("tm-vol")
        assert result.requeue or result.requeue_after is not None
    node = await kube.get(NODES, "tm-vol")
    assert wk.FINALIZER_TERMINATION in node.metadata.finalizers, "terminated with a volume on"
    assert ("Warning", "AwaitingVolumeDetachment") in kube_http.events_about(
        node.metadata.uid or ""
    )
    claim = await kube.get(NODECLAIMS, "tm-vol")
    assert _has(claim.status.conditions, ConditionType.DRAINED, ConditionStatus.TRUE, "Drained")
    assert not _has(
        claim.status.conditions,
        ConditionType.INSTANCE_TERMINATING,
        ConditionStatus.TRUE,
        "InstanceTerminating",
    )

    _detach(kube_http, attachment)
    await reconcile_until(
        h.termination.reconcile, "tm-vol", lambda: _absent(kube, "tm-vol"), within=30
    )
    claim = await kube.get(NODECLAIMS, "tm-vol")
    assert _has(
        claim.status.conditions,
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.TRUE,
        "VolumesDetached",
    )


async def test_a_volume_attachment_that_never_goes_holds_the_node_until_the_deadline(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP
) -> None:
    h = await _registered_node(live, "tm-held", termination_grace_period="2m")
    attachment = _attach(kube_http, "tm-held")
    await kube.delete(NODES, "tm-held")
    awaiting = _condition(
        kube,
        "tm-held",
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.UNKNOWN,
        "AwaitingVolumeDetachment",
    )
    await reconcile_until(h.termination.reconcile, "tm-held", awaiting, within=30)
    result = await h.termination.reconcile("tm-held")
    # The wait looks again within seconds, and never later than the deadline.
    assert result.requeue_after is not None
    assert 0 < result.requeue_after <= 5.0
    assert not await _absent(kube, "tm-held")

    # The clock stands at the NodeClaim's creation, seconds before the Node's deletion.
    h.clock.step(datetime.timedelta(minutes=3))
    await reconcile_until(
        h.termination.reconcile, "tm-held", lambda: _absent(kube, "tm-held"), within=30
    )
    assert kube_http.exists(attachment), "the attachment went, so the deadline was not tested"
    claim = await kube.get(NODECLAIMS, "tm-held")
    assert _has(
        claim.status.conditions,
        ConditionType.VOLUMES_DETACHED,
        ConditionStatus.FALSE,
        "TerminationGracePeriodElapsed",
    )
    _detach(kube_http, attachment)


async def test_a_volume_a_pod_the_drain_leaves_mounts_does_not_hold_the_node(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP, namespace: str
) -> None:
    h = await _registered_node(live, "tm-kept")
    attachment = _attach(kube_http, "tm-kept")
    kube_http.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "",
                "volumeName": "tm-kept",
            },
        },
    )
    # An agent tolerating every taint, as node agents do: the drain leaves it, and its volume.
    agent = Pod(
        metadata=ObjectMeta(name="agent"),
        spec=PodSpec(
            containers=(Container(name="app", image="registry.k8s.io/pause:3.9"),),
            node_name="tm-kept",
            termination_grace_period_seconds=0,
            tolerations=(Toleration(operator=TolerationOperator.EXISTS),),
            volumes=(
                Volume(
                    name="data",
                    persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name="data"),
                ),
            ),
        ),
    )
    await kube.create(PODS, agent, namespace=namespace)
    await kube.delete(NODES, "tm-kept")

    await reconcile_until(
        h.termination.reconcile, "tm-kept", lambda: _absent(kube, "tm-kept"), within=30
    )
    assert kube_http.exists(attachment)
    left = await kube.get(PODS, "agent", namespace=namespace)
    assert left.metadata.deletion_timestamp is None, "the drain evicted a pod it should leave"
    _detach(kube_http, attachment)


async def test_a_pdb_protected_pod_is_deleted_its_own_grace_before_the_deadline(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP, namespace: str
) -> None:
    h = await _registered_node(live, "tm-early", termination_grace_period="60s")
    pod = Pod(
        metadata=ObjectMeta(name="guarded", labels={"app": "guarded"}, finalizers=(HOLD,)),
        spec=PodSpec(
            containers=(Container(name="app", image="registry.k8s.io/pause:3.9"),),
            node_name="tm-early",
            termination_grace_period_seconds=30,
        ),
    )
    guarded = await kube.create(PODS, pod, namespace=namespace)
    pod_path = f"/api/v1/namespaces/{namespace}/pods/guarded"
    kube_http.request(
        "POST",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    try:
        await kube.delete(NODES, "tm-early")

        async def claim_deleting() -> bool:
            return (await kube.get(NODECLAIMS, "tm-early")).metadata.deletion_timestamp is not None

        # Taints the Node, then deletes its NodeClaim; kwok's heartbeats move the Node's version,
        # so the optimistic taint write may conflict and requeue first (as in the test above).
        await reconcile_until(h.termination.reconcile, "tm-early", claim_deleting, within=30)
        claim = await kube.get(NODECLAIMS, "tm-early")
        assert claim.metadata.deletion_timestamp is not None
        deadline = claim.metadata.deletion_timestamp + datetime.timedelta(seconds=60)

        # 29 s in, the PDB still holds the pod, and the drain looks again when its time comes.
        h.clock.set(deadline - datetime.timedelta(seconds=31))
        result = await h.termination.reconcile("tm-early")
        assert result.requeue_after is not None
        assert result.requeue_after <= 1.0
        held = await kube.get(PODS, "guarded", namespace=namespace)
        assert held.metadata.deletion_timestamp is None

        # 30 s in, 30 s before the deadline: deleted past its PDB, with its whole 30 s grace
        # (kwok finishes the deletion at once, so the grace is read from the update the
        # apiserver made when the deletion began).
        h.clock.set(deadline - datetime.timedelta(seconds=30))
        await h.termination.reconcile("tm-early")
        grace = await _deletion_grace(
            kube, namespace, "guarded", since=held.metadata.resource_version or ""
        )
        assert grace == 30
        assert ("Warning", "TerminationGracePeriodExpiring") in kube_http.events_about(
            guarded.metadata.uid or "", namespace
        )
        node = await kube.get(NODES, "tm-early")
        assert wk.FINALIZER_TERMINATION in node.metadata.finalizers
    finally:
        if kube_http.exists(pod_path):
            kube_http.merge_patch(pod_path, {"metadata": {"finalizers": None}})


async def _deletion_grace(kube: KubeClient, namespace: str, name: str, *, since: str) -> int | None:
    """The deletionGracePeriodSeconds the pod's deletion began with: the first update after
    `since` that shows it terminating, read from a watch (None if none came)."""
    buffer = b""
    async with (
        asyncio.timeout(15),
        kube.open_watch(
            PODS, resource_version=since, timeout_seconds=10, namespace=namespace
        ) as response,
    ):
        while chunk := await response.content.readany():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in filter(bytes.strip, lines):
                meta = json.loads(line)["object"]["metadata"]
                if meta.get("name") == name and meta.get("deletionTimestamp"):
                    grace: int | None = meta.get("deletionGracePeriodSeconds")
                    return grace
    return None


async def test_a_pod_terminating_past_the_deadline_is_deleted_again_to_end_by_it(
    kube: KubeClient, live: LiveView, kube_http: KubeHTTP, namespace: str
) -> None:
    # A Node no kwok manages: nothing finishes a pod's deletion there, so a terminating pod
    # stays terminating for its whole grace, as on a node whose kubelet waits it out.
    name = f"tm-overrun-{secrets.token_hex(3)}"
    provider_id = f"fake:///zone-a/{name}"
    claim = make_nodeclaim(name, termination_grace_period="60s")
    claim = attrs.evolve(
        claim, metadata=attrs.evolve(claim.metadata, finalizers=(wk.FINALIZER_TERMINATION,))
    )
    await kube.create(NODECLAIMS, claim)
    await kube.patch_status(
        NODECLAIMS, name, NodeClaimStatus(provider_id=provider_id, node_name=name)
    )
    node = Node(
        metadata=ObjectMeta(
            name=name,
            labels={wk.LABEL_NODEPOOL: "default"},
            finalizers=(wk.FINALIZER_TERMINATION,),
        ),
        spec=NodeSpec(provider_id=provider_id),
    )
    await kube.create(NODES, node)
    # A pod whose own grace (5 minutes) is longer than the node's 60 s; held by a finalizer.
    pod = Pod(
        metadata=ObjectMeta(name="lingering", finalizers=(HOLD,)),
        spec=PodSpec(
            containers=(Container(name="app", image="registry.k8s.io/pause:3.9"),),
            node_name=name,
            termination_grace_period_seconds=300,
        ),
    )
    lingering = await kube.create(PODS, pod, namespace=namespace)
    pod_path = f"/api/v1/namespaces/{namespace}/pods/lingering"
    try:
        # Someone deleted the pod with its own grace: it would end 5 minutes from now.
        await kube.delete(PODS, "lingering", namespace=namespace)
        before = await kube.get(PODS, "lingering", namespace=namespace)
        assert before.metadata.deletion_grace_period_seconds == 300

        await kube.delete(NODES, name)
        deleting = await kube.get(NODES, name)
        assert deleting.metadata.deletion_timestamp is not None
        deadline = deleting.metadata.deletion_timestamp + datetime.timedelta(seconds=60)
        clock = FakeClock(deadline - datetime.timedelta(seconds=50))
        termination = live.settled(
            TerminationController(
                kube, live.view, FakeCloudProvider(), clock=clock, recorder=Recorder(kube, clock)
            ).reconcile
        )
        await termination(name)

        # Deleted again with the 50 s left: it now ends by the deadline, not 4 minutes after.
        after = await kube.get(PODS, "lingering", namespace=namespace)
        assert after.metadata.deletion_grace_period_seconds == 50
        assert after.metadata.deletion_timestamp is not None
        assert after.metadata.deletion_timestamp <= deadline
        assert ("Warning", "TerminationGracePeriodExpiring") in kube_http.events_about(
            lingering.metadata.uid or "", namespace
        )
        # Ending by the deadline, it is left to end: the next pass deletes it no more.
        await termination(name)
        again = await kube.get(PODS, "lingering", namespace=namespace)
        assert again.metadata.resource_version == after.metadata.resource_version
        node_now = await kube.get(NODES, name)
        assert wk.FINALIZER_TERMINATION in node_now.metadata.finalizers
    finally:
        if kube_http.exists(pod_path):
            kube_http.merge_patch(pod_path, {"metadata": {"finalizers": None}})
        for path in (f"/api/v1/nodes/{name}", f"/apis/{wk.GROUP}/v1/nodeclaims/{name}"):
            if kube_http.exists(path):
                kube_http.merge_patch(path, {"metadata": {"finalizers": None}})
                if kube_http.exists(path):
                    kube_http.request("DELETE", path)


async def test_an_eviction_granted_whose_pod_was_never_deleted_is_finished(
    kube: KubeClient,
    live: LiveView,
    kube_http: KubeHTTP,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process killed mid-eviction can leave the PDB charged for a pod the apiserver never
    deleted (it records the pod in status.disruptedPods before deleting it); every later
    eviction of that pod meets a 429 until kube-controller-manager drops the entry two minutes
    on. The drain deletes such a pod itself, as its granted eviction would have, instead of
    holding the Node for those two minutes."""
    caplog.set_level(logging.INFO, logger="karpy.controllers.node.termination")
    h = await _registered_node(live, "tm-granted")
    pod = await _run_pod(kube, namespace, "granted", "tm-granted")
    pdb_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    kube_http.request(
        "POST",
        pdb_path,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "granted"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "granted"}}},
        },
    )

    async def counted() -> bool:
        got = kube_http.get(f"{pdb_path}/granted")
        status = got.get("status") or {}
        return status.get("expectedPods") == 1 and status.get("observedGeneration") == 1

    await eventually(counted, within=60, what="kube-controller-manager counts the pod")
    # What the apiserver leaves when the evicting client's request is cut between the budget's
    # charge and the pod's deletion: the pod listed as disrupted, the budget spent.
    assert pod.metadata.creation_timestamp is not None
    charged = (pod.metadata.creation_timestamp + datetime.timedelta(seconds=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    kube_http.request(
        "PATCH",
        f"{pdb_path}/granted/status",
        {"status": {"disruptedPods": {"granted": charged}, "disruptionsAllowed": 0}},
        content_type="application/merge-patch+json",
    )

    async def refused() -> bool:
        try:
            await kube.evict("granted", namespace=namespace)
        except TooManyRequestsError:
            return True
        return False

    assert await refused(), "the budget is spent: an eviction of the pod meets a 429"
    await kube.delete(NODES, "tm-granted")
    await reconcile_until(
        h.termination.reconcile, "tm-granted", lambda: _absent(kube, "tm-granted"), within=60
    )
    with pytest.raises(NotFoundError):
        await kube.get(PODS, "granted", namespace=namespace)
    finished = [
        r for r in caplog.records if r.getMessage() == "deleted pod whose eviction was granted"
    ]
    assert len(finished) == 1
