"""The capacitybuffer controller: resolve each CapacityBuffer and write its status.

Keyed by `namespace/name`, woken by the buffer and by the PodTemplate or workload it names.
It reads everything from cluster state (karpy.state.buffers resolves the chunk and sizes the
buffer) and writes one status patch when anything changed, in Cluster Autoscaler's shape:
`podTemplateRef` and `podTemplateGeneration` for a podTemplateRef buffer, `replicas`,
`provisioningStrategy`, `ReadyForProvisioning` (True, or False with the object that is missing
or the field that cannot size the buffer) and `Provisioning` (True `FakePodsInjected` while
provisioning holds room for its chunks; False `BufferIsEmpty` at zero replicas, False
`NotReadyForProvisioning` while unresolved). Provisioning reads the status, so what a buffer
holds is exactly what its status says.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, ClassVar

import attrs

from karpy.apis import conditions
from karpy.apis.autoscaling.capacitybuffer import (
    CapacityBuffer,
    CapacityBufferStatus,
    ConditionType,
    LocalObjectRef,
    Reason,
)
from karpy.apis.meta import ConditionStatus
from karpy.kube.client import KubeClient
from karpy.kube.kinds import CAPACITYBUFFERS, DEPLOYMENTS, PODTEMPLATES, REPLICASETS, STATEFULSETS
from karpy.kube.watch import Event
from karpy.manager import Controller, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy.runtime.logging import bind
from karpy.runtime.reconciler import Result
from karpy.state.buffers import Lookup, Unresolved, key_of, replicas_of, resolve, view_lookup
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

READY_MESSAGE = "ready"
EMPTY_MESSAGE = "CapacityBuffer has zero replicas"
NOT_READY_MESSAGE = "CapacityBuffer is not ready for provisioning"


def buffer_status(buffer: CapacityBuffer, lookup: Lookup, *, clock: Clock) -> CapacityBufferStatus:
    """The status `buffer` should show (the current one when nothing changed). Pure but for
    the clock, read only when a condition changes."""
    now = clock.now()
    generation = buffer.metadata.generation
    status = buffer.status
    kept = status.conditions
    try:
        resolved = resolve(buffer, lookup)
        replicas = replicas_of(buffer, resolved)
    except Unresolved as e:
        kept = conditions.with_condition(
            kept,
            ConditionType.READY_FOR_PROVISIONING,
            ConditionStatus.FALSE,
            reason=e.reason,
            message=str(e),
            now=now,
            generation=generation,
        )
        kept = conditions.with_condition(
            kept,
            ConditionType.PROVISIONING,
            ConditionStatus.FALSE,
            reason=Reason.NOT_READY_FOR_PROVISIONING,
            message=NOT_READY_MESSAGE,
            now=now,
            generation=generation,
        )
        return attrs.evolve(
            status,
            pod_template_ref=None,
            replicas=None,
            pod_template_generation=None,
            provisioning_strategy=buffer.spec.provisioning_strategy,
            conditions=kept,
        )
    kept = conditions.with_condition(
        kept,
        ConditionType.READY_FOR_PROVISIONING,
        ConditionStatus.TRUE,
        reason=Reason.RESOLVED,
        message=READY_MESSAGE,
        now=now,
        generation=generation,
    )
    kept = conditions.with_condition(
        kept,
        ConditionType.PROVISIONING,
        ConditionStatus.TRUE if replicas else ConditionStatus.FALSE,
        reason=Reason.FAKE_PODS_INJECTED if replicas else Reason.BUFFER_IS_EMPTY,
        message="" if replicas else EMPTY_MESSAGE,
        now=now,
        generation=generation,
    )
    return attrs.evolve(
        status,
        pod_template_ref=(
            LocalObjectRef(name=resolved.pod_template) if resolved.pod_template else None
        ),
        replicas=replicas,
        pod_template_generation=resolved.generation,
        provisioning_strategy=buffer.spec.provisioning_strategy,
        conditions=kept,
    )


class CapacityBufferController:
    """Writes each CapacityBuffer's status from cluster state."""

    name: ClassVar[str] = "capacitybuffer"

    def __init__(self, client: KubeClient, view: ClusterView, *, clock: Clock) -> None:
        self._client = client
        self._view = view
        self._clock = clock
        self._lookup = view_lookup(view)

    def spec(self) -> Controller:
        """Keyed by `namespace/name`: the buffer's own changes and those of the PodTemplate or
        workload it names."""
        return object_controller(
            self.name,
            self.reconcile,
            watches=(
                Watch(kind=CAPACITYBUFFERS, keys=lambda e: (key_of(e.item.obj),)),
                Watch(kind=PODTEMPLATES, keys=self._naming),
                Watch(kind=DEPLOYMENTS, keys=self._naming),
                Watch(kind=REPLICASETS, keys=self._naming),
                Watch(kind=STATEFULSETS, keys=self._naming),
            ),
            reads=(),
        )

    def _naming(self, event: Event[Any]) -> Iterable[str]:
        """The buffers in the changed object's namespace that name it."""
        ref = event.item.ref
        found: list[str] = []
        for buffer in self._view.objects(CAPACITYBUFFERS):
            if (buffer.metadata.namespace or "default") != ref.namespace:
                continue
            spec = buffer.spec
            template = spec.pod_template_ref
            scalable = spec.scalable_ref
            if (
                ref.kind == "PodTemplate" and template is not None and template.name == ref.name
            ) or (scalable is not None and scalable.kind == ref.kind and scalable.name == ref.name):
                found.append(key_of(buffer))
        return found

    async def reconcile(self, key: str) -> Result:
        """Side effects: one status patch when anything changed."""
        namespace, _, name = key.partition("/")
        with bind(controller=self.name, capacitybuffer=key):
            buffer = self._view.get(CAPACITYBUFFERS, name, namespace=namespace)
            if buffer is None or buffer.metadata.deletion_timestamp is not None:
                return Result()
            status = buffer_status(buffer, self._lookup, clock=self._clock)
            if status == buffer.status:
                return Result()
            await self._client.patch_status(
                CAPACITYBUFFERS,
                name,
                status,
                previous=buffer.status,
                namespace=namespace,
                resource_version=buffer.metadata.resource_version,
            )
            log.info(
                "updated capacitybuffer status",
                extra={"replicas": status.replicas, "ready": _ready(status)},
            )
            return Result()


def _ready(status: CapacityBufferStatus) -> str:
    found = conditions.find(status.conditions, ConditionType.READY_FOR_PROVISIONING)
    return "" if found is None else str(found.status)
