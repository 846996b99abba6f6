"""Machines and MachineDeployments in the management cluster: reading them, and the writes that
grow and shrink a MachineDeployment by exactly the Machines karpy chose.

Every write that changes a MachineDeployment's replicas also records why, in the same optimistic
merge patch (at the resourceVersion read), so a crash between two writes never loses track:

* growing writes ``replicas + 1`` with ``karpenter.cluster.x-k8s.io/scale-up-<nodeclaim uid>``
  (when). A create retried after a crash finds that record and does not grow again; it claims one
  Machine made since, then drops the record.
* a Machine is claimed by labelling it ``karpenter.cluster.x-k8s.io/nodeclaim=<name>`` with the
  NodeClaim's UID in an annotation, at the Machine's resourceVersion, so two creates never claim
  the same Machine.
* shrinking first marks the Machine ``cluster.x-k8s.io/delete-machine`` (Cluster API's MachineSet
  removes marked Machines first), then writes ``replicas - 1`` with
  ``karpenter.cluster.x-k8s.io/release-<machine uid>``. A delete retried finds the record and
  does not shrink again; the record goes once the Machine has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from karpy.apis.kube.common import LabelSelectorOperator
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy_clusterapi.apis import labels as capi
from karpy_clusterapi.apis.kinds import MACHINEDEPLOYMENTS, MACHINEHEALTHCHECKS, MACHINES
from karpy_clusterapi.apis.nodeclass import Selector, SelectorRequirement
from karpy_clusterapi.providers.machinedeployments import (
    MachineDeployment,
    needs_template,
    parse,
    selects,
    with_template_status,
)

log = logging.getLogger(__name__)

ATTEMPTS: Final = 5
"""Optimistic writes retried this often on a conflict before the caller's next reconcile."""


@attrs.frozen(kw_only=True)
class Machine:
    """What the provider reads of one Machine."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    deployment: str | None
    provider_id: str | None
    failure_domain: str | None
    created: datetime | None
    deleting: bool
    phase: str
    failure: str | None
    """Why the Machine failed, when Cluster API says it did."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def claimed_by(self) -> str | None:
        """The UID of the NodeClaim that claimed it, if karpy did."""
        if capi.LABEL_CLAIMED_BY not in self.labels:
            return None
        return self.annotations.get(capi.ANNOTATION_CLAIMED_UID)


def parse_machine(raw: Mapping[str, Any]) -> Machine:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels = dict(meta.get("labels") or {})
    created = meta.get("creationTimestamp")
    return Machine(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=labels,
        annotations=dict(meta.get("annotations") or {}),
        deployment=labels.get(capi.LABEL_DEPLOYMENT_NAME),
        provider_id=spec.get("providerID") or None,
        failure_domain=spec.get("failureDomain") or None,
        created=datetime.fromisoformat(created) if created else None,
        deleting=bool(meta.get("deletionTimestamp")),
        phase=str(status.get("phase") or ""),
        failure=_failure(status),
    )


def _selector(raw: Mapping[str, Any]) -> Selector | None:
    """A label selector as Kubernetes writes it (a MachineHealthCheck's spec.selector); None
    when an operator is not one of Kubernetes' four (the apiserver refuses those)."""
    try:
        expressions = tuple(
            SelectorRequirement(
                key=str(e.get("key") or ""),
                operator=LabelSelectorOperator(e.get("operator")),
                values=tuple(str(v) for v in e.get("values") or ()),
            )
            for e in raw.get("matchExpressions") or ()
        )
    except ValueError:
        return None
    return Selector(
        match_labels={str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()},
        match_expressions=expressions,
    )


def _failure(status: Mapping[str, Any]) -> str | None:
    """Cluster API's terminal failure of a Machine: phase Failed, with its message."""
    if status.get("phase") != "Failed":
        return None
    deprecated = ((status.get("deprecated") or {}).get("v1beta1") or {}).get("failureMessage")
    return str(deprecated or "the Machine's phase is Failed")


class Fleet:
    """The management cluster's MachineDeployments and Machines (see the module docstring).

    `namespace` limits it to one namespace (None: every namespace the client may read).
    """

    def __init__(self, kube: KubeClient, *, namespace: str | None) -> None:
        self._kube = kube
        self._namespace = namespace
        self._paths: dict[tuple[str, str], str] = {}

    async def deployments(self) -> list[MachineDeployment]:
        raws, _ = await self._kube.list_raw(MACHINEDEPLOYMENTS, namespace=self._namespace)
        return [await self._described(parse(raw)) for raw in raws]

    async def deployment(self, namespace: str, name: str) -> MachineDeployment | None:
        try:
            raw = await self._kube.get(MACHINEDEPLOYMENTS, name, namespace=namespace)
        except NotFoundError:
            return None
        return await self._described(parse(raw))

    async def _described(self, md: MachineDeployment) -> MachineDeployment:
        """`md` with its infrastructure template's status, when its annotations leave its
        shape open (a template that cannot be read leaves it so: the shape is then reported
        missing by name)."""
        if md.infrastructure is None or not needs_template(md):
            return md
        group, kind, name = md.infrastructure
        collection = await self._collection(group, kind)
        if collection is None:
            return md
        try:
            template = await self._kube.request(
                "GET", f"{collection.format(namespace=md.namespace)}/{name}"
            )
        except NotFoundError:
            return md
        return with_template_status(md, template)

    async def _collection(self, group: str, kind: str) -> str | None:
        """The REST collection of an infrastructure kind, from discovery (cached)."""
        key = (group, kind)
        if self._paths.get(key) is None:
            try:
                found = await self._kube.request("GET", f"/apis/{group}")
                version = (found.get("preferredVersion") or {}).get("groupVersion")
                resources = await self._kube.request("GET", f"/apis/{version}")
            except NotFoundError:
                return None
            for resource in resources.get("resources") or []:
                if resource.get("kind") == kind and "/" not in str(resource.get("name")):
                    self._paths[key] = (
                        f"/apis/{version}/namespaces/{{namespace}}/{resource['name']}"
                    )
        return self._paths.get(key)

    async def machines(self) -> list[Machine]:
        raws, _ = await self._kube.list_raw(MACHINES, namespace=self._namespace)
        return [parse_machine(raw) for raw in raws]

    async def claimed(self) -> list[Machine]:
        """The Machines karpy claimed."""
        return [m for m in await self.machines() if m.claimed_by is not None]

    async def health_check_covering(self, machine: Machine) -> str | None:
        """The MachineHealthCheck that selects the Machine (same Cluster, its selector over the
        Machine's labels), as ``MachineHealthCheck <namespace>/<name>``; None when none does."""
        raws, _ = await self._kube.list_raw(MACHINEHEALTHCHECKS, namespace=machine.namespace)
        cluster = machine.labels.get(capi.LABEL_CLUSTER_NAME)
        for raw in sorted(raws, key=lambda r: str((r.get("metadata") or {}).get("name"))):
            spec = raw.get("spec") or {}
            if cluster is not None and spec.get("clusterName") not in (None, cluster):
                continue
            selector = _selector(spec.get("selector") or {})
            if selector is not None and selects(selector, machine.labels):
                name = (raw.get("metadata") or {}).get("name")
                return f"MachineHealthCheck {machine.namespace}/{name}"
        return None

    async def machine(self, namespace: str, name: str) -> Machine | None:
        try:
            raw = await self._kube.get(MACHINES, name, namespace=namespace)
        except NotFoundError:
            return None
        return parse_machine(raw)

    async def _write_guarded(
        self,
        md: MachineDeployment | None,
        patch_for: Callable[[MachineDeployment], Mapping[str, Any] | None],
        *,
        doing: str,
    ) -> tuple[MachineDeployment | None, bool]:
        """Merge `patch_for(md)` into the MachineDeployment at the resourceVersion it was read
        at, reading it again after each conflict and asking `patch_for` again of what it reads
        (None: nothing to write). Returns the MachineDeployment as last read (None once it is
        gone) and whether the write went through; ConflictError after ATTEMPTS conflicts."""
        key = md.key if md is not None else ""
        for _ in range(ATTEMPTS):
            if md is None:
                return None, False
            patch = patch_for(md)
            if patch is None:
                return md, False
            try:
                await self._kube.merge_patch(
                    MACHINEDEPLOYMENTS,
                    md.name,
                    patch,
                    namespace=md.namespace,
                    resource_version=md.resource_version,
                )
            except ConflictError:
                md = await self.deployment(md.namespace, md.name)
                continue
            return md, True
        msg = f"machinedeployment {key}: replicas kept changing while karpy {doing}"
        raise ConflictError(409, "Conflict", msg)

    async def grow(self, md: MachineDeployment, *, nodeclaim_uid: str, when: str) -> bool:
        """Add one replica for the NodeClaim, recorded on the MachineDeployment; False when the
        MachineDeployment is at its max size (read again on each conflict)."""

        def one_more(md: MachineDeployment) -> Mapping[str, Any] | None:
            if not md.has_room:
                return None
            return {
                "metadata": {
                    "annotations": {f"{capi.ANNOTATION_SCALE_UP_PREFIX}{nodeclaim_uid}": when}
                },
                "spec": {"replicas": md.replicas + 1},
            }

        _, written = await self._write_guarded(md, one_more, doing="scaled it up")
        return written

    async def settle_grow(self, md: MachineDeployment, *, nodeclaim_uid: str) -> None:
        """Drop the scale-up record once its Machine is claimed (or its NodeClaim is gone)."""
        key = f"{capi.ANNOTATION_SCALE_UP_PREFIX}{nodeclaim_uid}"
        if key in md.annotations:
            await self._kube.merge_patch(
                MACHINEDEPLOYMENTS,
                md.name,
                {"metadata": {"annotations": {key: None}}},
                namespace=md.namespace,
            )

    async def shrink_unclaimed(self, md: MachineDeployment, *, nodeclaim_uid: str) -> None:
        """Take back the replica grown for a NodeClaim that never claimed its Machine, with its
        record, in one write (read again on each conflict); nothing when the record is gone."""
        key = f"{capi.ANNOTATION_SCALE_UP_PREFIX}{nodeclaim_uid}"

        def one_less(md: MachineDeployment) -> Mapping[str, Any] | None:
            if key not in md.annotations:
                return None
            return {
                "metadata": {"annotations": {key: None}},
                "spec": {"replicas": max(md.replicas - 1, md.min_size, 0)},
            }

        await self._write_guarded(md, one_less, doing="scaled it down")

    async def claim(
        self, machine: Machine, *, nodeclaim: str, nodeclaim_uid: str, nodeclass: str
    ) -> bool:
        """Label the Machine as the NodeClaim's, at the version read; False when another writer
        changed it first (claimed it, most likely)."""
        patch = {
            "metadata": {
                "labels": {capi.LABEL_CLAIMED_BY: nodeclaim},
                "annotations": {
                    capi.ANNOTATION_CLAIMED_UID: nodeclaim_uid,
                    capi.LABEL_NODECLASS: nodeclass,
                },
            }
        }
        try:
            await self._kube.merge_patch(
                MACHINES,
                machine.name,
                patch,
                namespace=machine.namespace,
                resource_version=machine.resource_version,
            )
        except (ConflictError, NotFoundError):
            return False
        return True

    async def release(self, machine: Machine) -> None:
        """Remove exactly this Machine: mark it for Cluster API, then take one replica off its
        MachineDeployment (recorded, so a retry does not take another). A MachineDeployment at
        its min size keeps its replicas: the marked Machine is deleted and its MachineSet makes
        a new one, which karpy does not claim."""
        if capi.ANNOTATION_DELETE_MACHINE not in machine.annotations:
            await self._kube.merge_patch(
                MACHINES,
                machine.name,
                {"metadata": {"annotations": {capi.ANNOTATION_DELETE_MACHINE: "karpy"}}},
                namespace=machine.namespace,
            )
        if machine.deployment is None:
            await self._delete_machine(machine)
            return

        def released(md: MachineDeployment) -> Mapping[str, Any] | None:
            if machine.uid in md.releases() or md.replicas <= md.min_size:
                return None
            return {
                "metadata": {
                    "annotations": {f"{capi.ANNOTATION_RELEASE_PREFIX}{machine.uid}": machine.name}
                },
                "spec": {"replicas": md.replicas - 1},
            }

        md, written = await self._write_guarded(
            await self.deployment(machine.namespace, machine.deployment),
            released,
            doing="scaled it down",
        )
        if written and md is not None:
            log.info(
                "scaled machinedeployment down",
                extra={
                    "machinedeployment": md.key,
                    "machine": machine.key,
                    "replicas": md.replicas - 1,
                },
            )
        elif md is None or machine.uid not in md.releases():
            # Gone, or at its min size: Cluster API removes the marked Machine only if deleted.
            await self._delete_machine(machine)

    async def _delete_machine(self, machine: Machine) -> None:
        try:
            await self._kube.delete(MACHINES, machine.name, namespace=machine.namespace)
        except NotFoundError:
            return

    async def tidy_releases(self) -> None:
        """Drop every release record whose Machine is gone (a delete that ends learns it here)."""
        deployments = [md for md in await self.deployments() if md.releases()]
        if not deployments:
            return
        alive = {m.uid for m in await self.machines()}
        for md in deployments:
            await self.forget_releases(md, [uid for uid in md.releases() if uid not in alive])

    async def forget_releases(self, md: MachineDeployment, gone: Sequence[str]) -> None:
        """Drop the release records of Machines that no longer exist."""
        if gone:
            patch = {
                "metadata": {
                    "annotations": {f"{capi.ANNOTATION_RELEASE_PREFIX}{uid}": None for uid in gone}
                }
            }
            await self._kube.merge_patch(MACHINEDEPLOYMENTS, md.name, patch, namespace=md.namespace)
