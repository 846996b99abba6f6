"""CapacityBuffers as virtual pods: resolving a buffer's chunk and making the pods that hold it.

What the capacitybuffer controller writes to a buffer's status, what provisioning schedules
and what disruption counts as load all come from here, so the three agree. A buffer names its
chunk through a PodTemplate (`podTemplateRef`) or a Deployment, ReplicaSet or StatefulSet
(`scalableRef`, whose replicas a `percentage` is taken of); `resolve` finds it through a
`Lookup` (cluster state in the process, the scenario's objects in `karpy simulate`), and
`replicas_of` sizes the buffer (karpy.core.buffers). `virtual_pods` makes the status's replicas
into unbound pods shaped like the chunk, named as Cluster Autoscaler names its fake pods and
annotated as it annotates them, owned by the buffer. They are never created: provisioning
places them like pending pods (launching the room when none is free) without nominating them,
and a disruption pass binds each to the node whose room it holds (`hold_room`), so a node
holding a buffer's room is not empty and consolidating it must find that room elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs

from karpy.apis import conditions
from karpy.apis.autoscaling.capacitybuffer import (
    ACTIVE_CAPACITY,
    API_VERSION,
    CapacityBuffer,
    ConditionType,
    Reason,
)
from karpy.apis.kube.pod import Pod as KubePod
from karpy.apis.kube.workloads import PodTemplate, PodTemplateSpec
from karpy.apis.meta import ObjectMeta, OwnerReference
from karpy.core.buffers import BufferSizeError, buffer_replicas, held_room
from karpy.core.resources import QuantityError, parse_resource
from karpy.core.scheduling.options import SchedulerOptions
from karpy.kube.kinds import (
    CAPACITYBUFFERS,
    DEPLOYMENTS,
    PODTEMPLATES,
    REPLICASETS,
    STATEFULSETS,
)
from karpy.kube.resources import ResourceKind
from karpy.state.pods import is_reschedulable
from karpy.state.podview import TranslationError, pod_view
from karpy.state.snapshot import ClusterObjects, translate_cluster
from karpy.state.view import ClusterView

FAKE_POD_ANNOTATION: Final = "podType"
FAKE_POD_VALUE: Final = "capacityBufferFakePod"
"""Cluster Autoscaler's mark on a buffer's fake pods; karpy's virtual pods carry it too."""

Lookup = Callable[[str, str, str], Any]
"""(kind, namespace, name) -> the PodTemplate, Deployment, ReplicaSet or StatefulSet, or None."""


class Unresolved(Exception):  # noqa: N818 - a state, as Karpenter's reasons name it
    """The buffer's chunk cannot be resolved; `reason` is the ReadyForProvisioning reason."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@attrs.frozen(kw_only=True)
class Resolved:
    """A buffer's chunk: the pod template, the PodTemplate it came from (with its generation)
    for a podTemplateRef, and the workload's replicas for a scalableRef."""

    template: PodTemplateSpec
    pod_template: str | None = None
    generation: int | None = None
    workload_replicas: int | None = None


def key_of(buffer: CapacityBuffer) -> str:
    """`namespace/name`: the capacitybuffer controller's key."""
    return f"{buffer.metadata.namespace or 'default'}/{buffer.metadata.name or ''}"


def resolve(buffer: CapacityBuffer, lookup: Lookup) -> Resolved:
    """The buffer's chunk; raises Unresolved naming the missing or unusable object."""
    namespace = buffer.metadata.namespace or "default"
    spec = buffer.spec
    if spec.pod_template_ref is not None:
        name = spec.pod_template_ref.name
        found = lookup("PodTemplate", namespace, name)
        if not isinstance(found, PodTemplate):
            msg = f'podtemplates "{name}" not found in namespace {namespace}'
            raise Unresolved(Reason.POD_TEMPLATE_NOT_FOUND, msg)
        return Resolved(
            template=found.template, pod_template=name, generation=found.metadata.generation
        )
    if spec.scalable_ref is not None:
        ref = spec.scalable_ref
        found = lookup(ref.kind, namespace, ref.name)
        if found is None:
            msg = f"{ref.kind} {namespace}/{ref.name} not found"
            raise Unresolved(Reason.SCALABLE_REF_NOT_FOUND, msg)
        template = found.spec.template
        if template is None:
            msg = f"{ref.kind} {namespace}/{ref.name} has no spec.template"
            raise Unresolved(Reason.RESOLUTION_FAILED, msg)
        replicas = found.spec.replicas
        return Resolved(template=template, workload_replicas=1 if replicas is None else replicas)
    msg = "neither spec.podTemplateRef nor spec.scalableRef is set"
    raise Unresolved(Reason.RESOLUTION_FAILED, msg)


def _chunk(buffer: CapacityBuffer, template: PodTemplateSpec, index: int = 0) -> KubePod:
    namespace = buffer.metadata.namespace or "default"
    name = buffer.metadata.name or ""
    meta = ObjectMeta(
        name=f"capacity-buffer-{name}-{index + 1}",
        namespace=namespace,
        uid=f"{buffer.metadata.uid or key_of(buffer)}-{index + 1}",
        creation_timestamp=buffer.metadata.creation_timestamp,
        labels=dict(template.metadata.labels),
        annotations={**template.metadata.annotations, FAKE_POD_ANNOTATION: FAKE_POD_VALUE},
        owner_references=(
            OwnerReference(
                api_version=API_VERSION,
                kind=CapacityBuffer.KIND,
                name=name,
                uid=buffer.metadata.uid or "",
                controller=True,
            ),
        ),
    )
    return KubePod(metadata=meta, spec=attrs.evolve(template.spec, node_name=None))


def replicas_of(buffer: CapacityBuffer, resolved: Resolved) -> int:
    """The chunks the buffer holds room for; raises Unresolved (ResolutionFailed) naming the
    field when its limits cannot size it or its pod template cannot be read."""
    spec = buffer.spec
    try:
        chunk = _chunk(buffer, resolved.template)
        requests = pod_view(chunk.metadata, chunk.spec, uid="chunk").requests()
        limits = (
            None
            if spec.limits is None
            else {k: parse_resource(k, str(v)) for k, v in spec.limits.items()}
        )
        return buffer_replicas(
            replicas=spec.replicas,
            percentage=spec.percentage,
            workload_replicas=resolved.workload_replicas,
            limits=limits,
            chunk=requests,
        )
    except (BufferSizeError, QuantityError) as e:
        raise Unresolved(Reason.RESOLUTION_FAILED, str(e)) from e
    except (TranslationError, ValueError) as e:
        raise Unresolved(Reason.RESOLUTION_FAILED, f"pod template: {e}") from e


def virtual_pods(buffer: CapacityBuffer, template: PodTemplateSpec, replicas: int) -> list[KubePod]:
    """`replicas` unbound pods shaped like `template`, one per chunk of `buffer`."""
    return [_chunk(buffer, template, i) for i in range(replicas)]


def provisioned(buffer: CapacityBuffer) -> bool:
    """Whether provisioning holds room for `buffer`: karpy's strategy, ReadyForProvisioning
    True and replicas in its status."""
    status = buffer.status
    return (
        buffer.metadata.deletion_timestamp is None
        and buffer.spec.provisioning_strategy == ACTIVE_CAPACITY
        and conditions.is_true(status.conditions, ConditionType.READY_FOR_PROVISIONING)
        and bool(status.replicas)
    )


def buffer_pods(buffers: Iterable[CapacityBuffer], lookup: Lookup) -> list[KubePod]:
    """The virtual pods of every provisioned buffer, as its status counts them (a buffer whose
    chunk no longer resolves holds nothing until its controller says otherwise)."""
    pods: list[KubePod] = []
    for buffer in sorted(buffers, key=key_of):
        if not provisioned(buffer):
            continue
        try:
            resolved = resolve(buffer, lookup)
        except Unresolved:
            continue
        pods.extend(virtual_pods(buffer, resolved.template, buffer.status.replicas or 0))
    return pods


def is_virtual(pod: KubePod) -> bool:
    """Whether `pod` is a buffer's virtual pod (never a real one)."""
    return pod.metadata.annotations.get(FAKE_POD_ANNOTATION) == FAKE_POD_VALUE and any(
        ref.kind == CapacityBuffer.KIND and ref.api_version == API_VERSION
        for ref in pod.metadata.owner_references
    )


def hold_room(
    objects: ClusterObjects, virtual: Sequence[KubePod], options: SchedulerOptions | None = None
) -> ClusterObjects:
    """`objects` with each virtual pod bound to the node whose room it holds now (the room
    left once the unbound real pods are placed); one with no room yet is left out.

    Disruption reads this: a node holding a buffer's room is not empty, and a simulation that
    removes it must find that room elsewhere (the virtual pods move like the node's others)."""
    if not virtual:
        return objects
    real = [p for p in objects.pods if not p.spec.node_name and is_reschedulable(p)]
    build = translate_cluster(objects, {}).build([*real, *virtual])
    ours = {p.metadata.uid for p in virtual}
    waiting = [p for p in build.pods if p.uid not in ours]
    mine = [p for p in build.pods if p.uid in ours]
    where = {str(k): v for k, v in held_room(build.snapshot, waiting, mine, options).items()}
    bound = [
        attrs.evolve(p, spec=attrs.evolve(p.spec, node_name=where[p.metadata.uid or ""]))
        for p in virtual
        if (p.metadata.uid or "") in where
    ]
    return attrs.evolve(objects, pods=[*objects.pods, *bound])


def view_lookup(view: ClusterView) -> Lookup:
    """A Lookup over cluster state: a kind the process does not inform finds nothing."""
    kinds: dict[str, ResourceKind[Any]] = {
        k.kind: k for k in (PODTEMPLATES, DEPLOYMENTS, REPLICASETS, STATEFULSETS)
    }

    def lookup(kind: str, namespace: str, name: str) -> Any:
        resource = kinds.get(kind)
        if resource is None or not view.informs(resource):
            return None
        return view.get(resource, name, namespace=namespace)

    return lookup


BUFFER_KINDS: Final = (CAPACITYBUFFERS, PODTEMPLATES, DEPLOYMENTS, REPLICASETS, STATEFULSETS)
"""What the process informs with FEATURE_GATES=CapacityBuffer=true."""


class BufferPods:
    """The virtual pods of every CapacityBuffer in cluster state, read when asked: what
    provisioning schedules and disruption counts (both read them in their one synchronous
    read of the cluster)."""

    def __init__(self, view: ClusterView) -> None:
        self._view = view
        self._lookup = view_lookup(view)

    def pods(self) -> list[KubePod]:
        if not self._view.informs(CAPACITYBUFFERS):
            return []
        return buffer_pods(self._view.objects(CAPACITYBUFFERS), self._lookup)
