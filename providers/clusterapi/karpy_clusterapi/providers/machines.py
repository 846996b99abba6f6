"""Machines and MachineDeployments in the management cluster: reading them, and the writes that
grow and shrink a MachineDeployment by exactly the Machines karpy chose.

Reads come from karpy's informers over the two kinds (a list and a watch each, not a list per
call: at rest the provider asks the management cluster for nothing). A cache may be a few
milliseconds behind a write, so each write returns the object as the apiserver wrote it for the
caller to go on from, a guarded write reads again from the apiserver after a conflict, and a
wait for Cluster API's own writes (the Machine a MachineSet makes) waits on the watch's events.

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

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from karpy.apis.kube.common import LabelSelectorOperator
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError, UnreachableError
from karpy.runtime.options import WatchingOptions
from karpy.state.informed import InformedKinds
from karpy.state.view import ClusterView
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
SYNC_TIMEOUT: Final = 30.0
"""Seconds a read waits for the informers' first lists of MachineDeployments and Machines."""


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

    `namespace` limits it to one namespace (None: every namespace the client may read). Reads
    come from karpy's informers over the two kinds (`karpy.state.informed`), started on the
    first read (or by `start`) and stopped by `aclose`; the writes go to the apiserver and
    return what it wrote, so a caller never reads its own write back from a cache still behind.
    """

    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str | None,
        watching: WatchingOptions | None = None,
        sync_timeout: float = SYNC_TIMEOUT,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._paths: dict[tuple[str, str], str] = {}
        self._templates: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self._sync_timeout = sync_timeout
        self._informed = InformedKinds(
            kube, (MACHINEDEPLOYMENTS, MACHINES), namespace=namespace, settings=watching
        )

    def start(self) -> None:
        """Start the informers (reads start them too)."""
        self._informed.start()

    async def aclose(self) -> None:
        await self._informed.aclose()

    async def _cache(self) -> ClusterView:
        """The informed MachineDeployments and Machines, once both have been listed."""
        if not self._informed.synced:
            try:
                await self._informed.wait_synced(self._sync_timeout)
            except TimeoutError:
                msg = (
                    f"the management cluster's MachineDeployments and Machines were not listed "
                    f"within {self._sync_timeout:g}s (unreachable, or list/watch not allowed)"
                )
                raise UnreachableError(msg) from None
        return self._informed.view

    @property
    def changes(self) -> int:
        """How many changes the informers have seen: pass it to `wait_changed`."""
        return self._informed.changes

    async def wait_changed(self, since: int, within: float) -> bool:
        """Wait, at most `within` seconds, for a MachineDeployment or Machine to change after
        `since` (a value of `changes`); whether one did."""
        return await self._informed.wait_changed(since, within)

    async def deployments(self) -> list[MachineDeployment]:
        cache = await self._cache()
        return [await self._described(parse(raw)) for raw in cache.objects(MACHINEDEPLOYMENTS)]

    async def deployment(self, namespace: str, name: str) -> MachineDeployment | None:
        cache = await self._cache()
        raw = cache.get(MACHINEDEPLOYMENTS, name, namespace=namespace)
        return None if raw is None else await self._described(parse(raw))

    async def _read_deployment(self, namespace: str, name: str) -> MachineDeployment | None:
        """The MachineDeployment as the apiserver has it now: a guarded write read again after
        a conflict must not retry from a cache that has not caught up yet."""
        try:
            raw = await self._kube.get(MACHINEDEPLOYMENTS, name, namespace=namespace)
        except NotFoundError:
            return None
        return await self._described(parse(raw))

    async def _described(self, md: MachineDeployment) -> MachineDeployment:
        """`md` with its infrastructure template's status, when its annotations leave its
        shape open (a template that cannot be read leaves it so: the shape is then reported
        missing by name). A template whose status gave a capacity is kept: Cluster API's
        templates do not change (a new shape is a new template, and a template change drift)."""
        if md.infrastructure is None or not needs_template(md):
            return md
        group, kind, name = md.infrastructure
        key = (md.namespace, f"{kind}.{group}", name)
        template = self._templates.get(key)
        if template is None:
            collection = await self._collection(group, kind)
            if collection is None:
                return md
            try:
                template = await self._kube.request(
                    "GET", f"{collection.format(namespace=md.namespace)}/{name}"
                )
            except NotFoundError:
                return md
            if (template.get("status") or {}).get("capacity"):
                self._templates[key] = template
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
        cache = await self._cache()
        return [parse_machine(raw) for raw in cache.objects(MACHINES)]

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
        cache = await self._cache()
        raw = cache.get(MACHINES, name, namespace=namespace)
        return None if raw is None else parse_machine(raw)

    async def _write_guarded(
        self,
        md: MachineDeployment | None,
        patch_for: Callable[[MachineDeployment], Mapping[str, Any] | None],
        *,
        doing: str,
    ) -> tuple[MachineDeployment | None, bool]:
        """Merge `patch_for(md)` into the MachineDeployment at the resourceVersion it was read
        at, reading it again after each conflict and asking `patch_for` again of what it reads
        (None: nothing to write); reads after a conflict go to the apiserver. Returns the
        MachineDeployment as written when the write went through, else as last read (None once
        it is gone), and whether it went through; ConflictError after ATTEMPTS conflicts."""
        key = md.key if md is not None else ""
        for _ in range(ATTEMPTS):
            if md is None:
                return None, False
            patch = patch_for(md)
            if patch is None:
                return md, False
            try:
                written = await self._kube.merge_patch(
                    MACHINEDEPLOYMENTS,
                    md.name,
                    patch,
                    namespace=md.namespace,
                    resource_version=md.resource_version,
                )
            except ConflictError:
                md = await self._read_deployment(md.namespace, md.name)
                continue
            return await self._described(parse(written)), True
        msg = f"machinedeployment {key}: replicas kept changing while karpy {doing}"
        raise ConflictError(409, "Conflict", msg)

    async def grow(
        self, md: MachineDeployment, *, nodeclaim_uid: str, when: str
    ) -> MachineDeployment | None:
        """Add one replica for the NodeClaim, recorded on the MachineDeployment: the
        MachineDeployment as written; None when it is at its max size (read again on each
        conflict)."""

        def one_more(md: MachineDeployment) -> Mapping[str, Any] | None:
            if not md.has_room:
                return None
            return {
                "metadata": {
                    "annotations": {f"{capi.ANNOTATION_SCALE_UP_PREFIX}{nodeclaim_uid}": when}
                },
                "spec": {"replicas": md.replicas + 1},
            }

        grown, written = await self._write_guarded(md, one_more, doing="scaled it up")
        return grown if written else None

    async def settle_grow(self, md: MachineDeployment, *, nodeclaim_uid: str) -> None:
        """Drop the scale-up record once its Machine is claimed (or its NodeClaim is gone).
        Written whether or not the copy at hand shows the record: a cache a few milliseconds
        behind the write that made it must not leave the record behind."""
        key = f"{capi.ANNOTATION_SCALE_UP_PREFIX}{nodeclaim_uid}"
        with contextlib.suppress(NotFoundError):
            await self._kube.merge_patch(
                MACHINEDEPLOYMENTS,
                md.name,
                {"metadata": {"annotations": {key: None}}},
                namespace=md.namespace,
            )

    async def shrink_unclaimed(
        self, md: MachineDeployment, *, nodeclaim_uid: str
    ) -> MachineDeployment | None:
        """Take back the replica grown for a NodeClaim that never claimed its Machine, with its
        record, in one write (read again on each conflict); nothing when the record is gone.
        The MachineDeployment as written, or as last read (None once it is gone)."""
        key = f"{capi.ANNOTATION_SCALE_UP_PREFIX}{nodeclaim_uid}"

        def one_less(md: MachineDeployment) -> Mapping[str, Any] | None:
            if key not in md.annotations:
                return None
            return {
                "metadata": {"annotations": {key: None}},
                "spec": {"replicas": max(md.replicas - 1, md.min_size, 0)},
            }

        shrunk, _ = await self._write_guarded(md, one_less, doing="scaled it down")
        return shrunk

    async def claim(
        self, machine: Machine, *, nodeclaim: str, nodeclaim_uid: str, nodeclass: str
    ) -> Machine | None:
        """Label the Machine as the NodeClaim's, at the version read: the Machine as written;
        None when another writer changed it first (claimed it, most likely)."""
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
            written = await self._kube.merge_patch(
                MACHINES,
                machine.name,
                patch,
                namespace=machine.namespace,
                resource_version=machine.resource_version,
            )
        except (ConflictError, NotFoundError):
            return None
        return parse_machine(written)

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
                    "replicas": md.replicas,
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
