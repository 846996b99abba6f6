"""The legacy controller: every v1alpha5 Provisioner (and the provider's legacy node templates)
kept as owned v1 objects, and the v1 readiness mirrored back.

Keyed by Provisioner name (a template key is ``template/<name>``). Each reconcile reads the
legacy object through the ClusterView, runs the pure translation (`karpy.apis.v1alpha5.translate`,
the same one `karpy convert` runs), creates or patches the NodePool and NodeClasses it yields
(owned by the legacy object, so deleting a Provisioner deletes its pool through the garbage
collector), and writes the legacy status: Ready as the NodePool's Ready, Translated naming every
field carried differently, and the pool's resources. A translation that fails leaves the v1
objects as they were and says why on the legacy object (condition and Warning event).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from karpy.apis.codec import to_dict
from karpy.apis.meta import Condition, ConditionStatus, OwnerReference
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.apis.v1alpha5.translate import (
    LegacyNodeClasses,
    LegacySettings,
    TranslationError,
    translate,
)
from karpy.controllers.legacy import events
from karpy.kube.client import KubeClient
from karpy.kube.events import Event, Recorder
from karpy.kube.kinds import NODEPOOLS, PROVISIONERS, cluster_kind
from karpy.kube.resources import ResourceKind
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView

logger = logging.getLogger(__name__)

TEMPLATE_KEY_PREFIX: Final = "template/"
CONDITION_TRANSLATED: Final = "Translated"
CONDITION_READY: Final = "Ready"


def _owner(obj: Any) -> OwnerReference:
    return OwnerReference(
        api_version=f"{obj.GROUP}/{obj.VERSION}",
        kind=obj.KIND,
        name=obj.metadata.name or "",
        uid=obj.metadata.uid or "",
        controller=True,
        block_owner_deletion=True,
    )


def _condition(
    current: Sequence[Condition],
    kind: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> Condition:
    old = next((c for c in current if c.type == kind), None)
    since = old.last_transition_time if old is not None and old.status is status else now
    return Condition(
        type=kind, status=status, reason=reason, message=message, last_transition_time=since
    )


class LegacyController:
    """Provisioner / legacy template -> owned NodePool / NodeClass, readiness mirrored back."""

    name = "legacy.translation"

    def __init__(
        self,
        client: KubeClient,
        view: ClusterView,
        *,
        node_classes: LegacyNodeClasses,
        settings: LegacySettings,
        recorder: Recorder,
        clock: Clock,
    ) -> None:
        self._client = client
        self._view = view
        self._node_classes = node_classes
        self._settings = settings
        self._recorder = recorder
        self._clock = clock
        self.template_kinds: tuple[ResourceKind[Any], ...] = tuple(
            cluster_kind(model) for model in node_classes.template_models
        )

    def _templates(self) -> dict[str, Any]:
        return {
            t.metadata.name: t
            for kind in self.template_kinds
            if self._view.informs(kind)
            for t in self._view.objects(kind)
        }

    async def reconcile(self, key: str) -> Result:
        if key.startswith(TEMPLATE_KEY_PREFIX):
            return await self._reconcile_template(key.removeprefix(TEMPLATE_KEY_PREFIX))
        provisioner = self._view.get(PROVISIONERS, key)
        if provisioner is None or provisioner.metadata.deletion_timestamp is not None:
            return Result()  # the garbage collector removes what it owned
        now = self._clock.now()
        try:
            translation = translate(
                provisioner, self._node_classes, self._templates(), settings=self._settings
            )
        except TranslationError as error:
            await self._refused(PROVISIONERS, provisioner, str(error), now)
            return Result()
        owner = _owner(provisioner)
        for obj in translation.node_classes:
            await self._apply(cluster_kind(type(obj)), obj, owner)
        await self._apply(NODEPOOLS, translation.nodepool, owner)
        nodepool = self._view.nodepool(key)
        ready = next(
            (c for c in (nodepool.status.conditions if nodepool else ()) if c.type == "Ready"),
            None,
        )
        warnings = "; ".join(str(w) for w in translation.warnings)
        conditions = provisioner.status.conditions
        status = attrs.evolve(
            provisioner.status,
            resources=dict(nodepool.status.resources) if nodepool else {},
            conditions=(
                _condition(
                    conditions,
                    CONDITION_TRANSLATED,
                    ConditionStatus.TRUE,
                    "Translated",
                    f"NodePool {key!r}" + (f"; {warnings}" if warnings else ""),
                    now,
                ),
                _condition(
                    conditions,
                    CONDITION_READY,
                    ready.status if ready else ConditionStatus.UNKNOWN,
                    ready.reason if ready else "AwaitingNodePool",
                    ready.message if ready else f"NodePool {key!r} has no Ready condition yet",
                    now,
                ),
            ),
        )
        if status != provisioner.status:
            await self._client.patch_status(PROVISIONERS, key, status, previous=provisioner.status)
            if warnings and CONDITION_TRANSLATED not in {c.type for c in conditions}:
                await self._event(events.translation_warnings(PROVISIONERS, provisioner, warnings))
        return Result()

    async def _reconcile_template(self, name: str) -> Result:
        kind = next((k for k in self.template_kinds if self._view.get(k, name) is not None), None)
        template = None if kind is None else self._view.get(kind, name)
        if kind is None or template is None or template.metadata.deletion_timestamp is not None:
            return Result()
        now = self._clock.now()
        try:
            translated = self._node_classes.for_template(template, settings=self._settings)
        except TranslationError as error:
            await self._refused(kind, template, str(error), now)
            return Result()
        node_class_kind = cluster_kind(type(translated.node_class))
        await self._apply(node_class_kind, translated.node_class, _owner(template))
        built = (
            self._view.get(node_class_kind, name) if self._view.informs(node_class_kind) else None
        )
        ready = next(
            (c for c in (built.status.conditions if built else ()) if c.type == "Ready"), None
        )
        warnings = "; ".join(str(w) for w in translated.warnings)
        conditions = template.status.conditions
        status = attrs.evolve(
            template.status,
            conditions=(
                _condition(
                    conditions,
                    CONDITION_TRANSLATED,
                    ConditionStatus.TRUE,
                    "Translated",
                    f"{node_class_kind.kind} {name!r}" + (f"; {warnings}" if warnings else ""),
                    now,
                ),
                _condition(
                    conditions,
                    CONDITION_READY,
                    ready.status if ready else ConditionStatus.UNKNOWN,
                    ready.reason if ready else "AwaitingNodeClass",
                    ready.message if ready else f"{node_class_kind.kind} {name!r} is not Ready yet",
                    now,
                ),
            ),
        )
        if status != template.status:
            await self._client.patch_status(kind, name, status, previous=template.status)
        return Result()

    async def _apply(self, kind: ResourceKind[Any], obj: Any, owner: OwnerReference) -> None:
        """Create `obj` owned by `owner`, or patch the existing one's spec to match."""
        name = obj.metadata.name
        current = self._view.get(kind, name) if self._view.informs(kind) else None
        if current is None:
            owned = attrs.evolve(
                obj, metadata=attrs.evolve(obj.metadata, owner_references=(owner,))
            )
            await self._client.create(kind, attrs.evolve(owned, status=type(obj.status)()))
            logger.info("created", extra={"kind": kind.kind, "object": name, "owner": owner.name})
            return
        if not any(ref.uid == owner.uid for ref in current.metadata.owner_references):
            logger.warning(
                "not owned, leaving it as it is",
                extra={"kind": kind.kind, "object": name, "owner": owner.name},
            )
            return
        wanted = attrs.evolve(current, spec=obj.spec)
        if to_dict(wanted.spec) != to_dict(current.spec):
            await self._client.patch(kind, current, wanted, optimistic=True)
            logger.info("updated", extra={"kind": kind.kind, "object": name, "owner": owner.name})

    async def _refused(
        self, kind: ResourceKind[Any], obj: Any, message: str, now: datetime
    ) -> None:
        conditions = obj.status.conditions
        status = attrs.evolve(
            obj.status,
            conditions=(
                _condition(
                    conditions,
                    CONDITION_TRANSLATED,
                    ConditionStatus.FALSE,
                    "TranslationFailed",
                    message,
                    now,
                ),
                _condition(
                    conditions,
                    CONDITION_READY,
                    ConditionStatus.FALSE,
                    "TranslationFailed",
                    message,
                    now,
                ),
            ),
        )
        if status != obj.status:
            await self._client.patch_status(kind, obj.metadata.name, status, previous=obj.status)
            await self._event(events.translation_failed(kind, obj, message))

    async def _event(self, event: Event) -> None:
        await self._recorder.publish(event, now=self._clock.now().timestamp())


def provisioner_keys(name: str, *, deleted: bool) -> list[str]:
    """Keys for a Provisioner event (its own name)."""
    del deleted
    return [name]


def nodepool_keys(nodepool: Any) -> list[str]:
    """Keys for a NodePool event: the Provisioner owning it, to mirror its readiness."""
    return [
        ref.name
        for ref in nodepool.metadata.owner_references
        if ref.kind == Provisioner.KIND and ref.api_version.startswith("karpenter.sh/")
    ]


def template_keys(template: Any, view: ClusterView) -> list[str]:
    """Keys for a template event: the template, and every Provisioner referring to it (a
    Provisioner copies its template when it has kubelet settings)."""
    name = template.metadata.name or ""
    return [TEMPLATE_KEY_PREFIX + name] + [
        p.metadata.name or ""
        for p in view.objects(PROVISIONERS)
        if p.spec.provider_ref is not None and p.spec.provider_ref.name == name
    ]


def node_class_keys(node_class: Any) -> list[str]:
    """Keys for a NodeClass event: the legacy objects owning it."""
    out: list[str] = []
    for ref in node_class.metadata.owner_references:
        if ref.kind == Provisioner.KIND:
            out.append(ref.name)
        elif ref.api_version.endswith("/v1alpha1"):
            out.append(TEMPLATE_KEY_PREFIX + ref.name)
    return out
