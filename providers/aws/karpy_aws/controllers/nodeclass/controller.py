"""The EC2NodeClass controller: keep each NodeClass's status resolved, and clean up after it.

Launching reads a NodeClass's status (subnets, security groups, AMIs, instance profile, Ready),
never its selectors, so something must keep that status current. This controller resolves it
(:func:`karpy_aws.controllers.nodeclass.status.resolve_status`) when a NodeClass appears or its spec
changes, and again every resync period, because AWS changes underneath (new AMI releases, subnets
filling up, groups deleted). It writes the status only when it changed. Bad input ends as a False
condition whose message names the field; AWS failing (throttling, an outage) raises, so the key
backs off and the last written status stands. The controller is declared (`spec()`), not run by the
provider: the operator feeds it from its informer of EC2NodeClasses and runs its workers with the
other controllers.

A NodeClaim records the NodeClass's static hash at launch (NodeClassDrift compares it). When a
karpy release changes what that hash covers it bumps the hash version, and this controller
re-stamps every NodeClaim of the NodeClass still on an older version with the current version
and hash, so an upgrade does not replace every node and later edits drift them again.

NodeClasses carry the finalizer ``karpenter.k8s.aws/termination``. Once one is deleted and no
NodeClaim refers to it any more, its launch templates and the instance profile made for its
``role`` are deleted and the finalizer is removed, as Karpenter's NodeClass termination does.
The NodeClaims still using it are read from the operator's cluster view.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, ClassVar, Final

import attrs

from karpy.apis.meta import ConditionStatus, with_annotations
from karpy.apis.v1.nodeclaim import ConditionType as NodeClaimConditionType
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.events import Recorder
from karpy.kube.kinds import NODECLAIMS
from karpy.kube.watch import Event as WatchEvent
from karpy.kube.watch import EventType as WatchEventType
from karpy.manager import Controller, Watch
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import KeyDescription, Result
from karpy.state.view import ClusterView
from karpy_aws import errors as aws
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.ec2nodeclass_status import ConditionType, EC2NodeClassStatus
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.controllers.nodeclass import events
from karpy_aws.controllers.nodeclass.status import resolve_status
from karpy_aws.providers.amifamily.amis import DEFAULT_SSM_PREFIX
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.nodeclass import NODECLASS_HASH_VERSION, rehash_annotations, static_hash
from karpy_aws.providers.version import KubernetesVersion
from karpy_aws.session import AWSClient

FINALIZER: Final = f"{awslabels.AWS_GROUP}/termination"
"""Karpenter's EC2NodeClass finalizer: held until the NodeClass's AWS resources are gone."""
RESYNC_PERIOD: Final = 60.0
"""Seconds between resolutions of one NodeClass (Karpenter re-reads subnets and security groups
every minute, AMIs every five; one period covers them all)."""
TERMINATION_POLL: Final = 10.0
"""Seconds between checks for NodeClaims still using a deleted NodeClass."""

log = logging.getLogger(__name__)


def describe(name: str) -> KeyDescription:
    """Span attributes and log fields for one NodeClass key."""
    return KeyDescription(
        span_attributes={"k8s.object.kind": EC2NodeClass.KIND, "k8s.object.name": name},
        log_fields={"ec2nodeclass": name},
    )


def _drifted(claim: NodeClaim) -> bool:
    return any(
        c.type == NodeClaimConditionType.DRIFTED and c.status is ConditionStatus.TRUE
        for c in claim.status.conditions
    )


def _ready(status: EC2NodeClassStatus) -> tuple[bool | None, str]:
    """Whether the Ready condition is True (None: no Ready condition yet), and its message."""
    for condition in status.conditions:
        if condition.type == ConditionType.READY:
            return condition.status == ConditionStatus.TRUE, condition.message
    return None, ""


class NodeClassController:
    """Resolves EC2NodeClass status and finalizes deleted NodeClasses, one key at a time.

    Keyed by NodeClass name: serial per NodeClass, parallel across ``workers``, with per-key
    backoff; `spec()` declares it for the operator to run.
    """

    name: ClassVar[str] = "nodeclass"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        *,
        ec2: AWSClient,
        ssm: AWSClient,
        profiles: InstanceProfiles,
        templates: LaunchTemplates,
        version: KubernetesVersion,
        clock: Clock,
        cluster_name: str,
        ssm_prefix: str = DEFAULT_SSM_PREFIX,
        resync_period: float = RESYNC_PERIOD,
        termination_poll: float = TERMINATION_POLL,
        workers: int = 2,
    ) -> None:
        if resync_period <= 0 or termination_poll <= 0:
            msg = "NodeClassController: resync_period and termination_poll must be > 0 seconds"
            raise ValueError(msg)
        self._kube = kube
        self._view = view
        self._ec2 = ec2
        self._ssm = ssm
        self._profiles = profiles
        self._templates = templates
        self._version = version
        self._clock = clock
        self._cluster_name = cluster_name
        self._ssm_prefix = ssm_prefix
        self._resync = resync_period
        self._termination_poll = termination_poll
        self._workers = workers
        self._recorder = Recorder(kube, clock)
        self._seen: dict[str, tuple[int | None, bool]] = {}

    def spec(self) -> Controller:
        """The controller, declared: fed by the operator's informer of EC2NodeClasses."""
        return Controller(
            name=self.name,
            reconcile=self.reconcile,
            watches=(Watch(kind=EC2NODECLASSES, keys=self.keys),),
            workers=self._workers,
            describe=describe,
            done_on=(NotFoundError,),
            requeue_on=(ConflictError,),
        )

    def keys(self, event: WatchEvent[Any]) -> Iterable[str]:
        """Queue a NodeClass that appeared, whose spec changed or that is being deleted; our own
        status writes change neither, so they do not requeue it (the resync period does)."""
        name = event.item.ref.name
        if event.type is WatchEventType.DELETED:
            self._seen.pop(name, None)
            return ()
        if not isinstance(event.item.obj, EC2NodeClass):
            return ()
        metadata = event.item.obj.metadata
        seen = (metadata.generation, metadata.deletion_timestamp is not None)
        if self._seen.get(name) == seen:
            return ()
        self._seen[name] = seen
        return (name,)

    async def reconcile(self, name: str) -> Result:
        """Resolve and write one NodeClass's status, or finalize it when it is being deleted.

        Raises karpy_aws.errors.AWSError (back off), karpy.kube errors (NotFound: done;
        Conflict: requeue).
        """
        nodeclass = await self._kube.get(EC2NODECLASSES, name)
        if nodeclass.metadata.deletion_timestamp is not None:
            return await self._finalize(nodeclass)
        if FINALIZER not in nodeclass.metadata.finalizers:
            nodeclass = await self._kube.add_finalizer(EC2NODECLASSES, nodeclass, FINALIZER)
        status = await resolve_status(
            nodeclass,
            ec2=self._ec2,
            ssm=self._ssm,
            profiles=self._profiles,
            k8s_version=await self._version.get(),
            clock=self._clock,
            ssm_prefix=self._ssm_prefix,
        )
        await self._rehash_nodeclaims(nodeclass)
        if status != nodeclass.status:
            await self._kube.patch_status(
                EC2NODECLASSES,
                name,
                status,
                previous=nodeclass.status,
                resource_version=nodeclass.metadata.resource_version,
            )
            ready, message = _ready(status)
            fields: dict[str, object] = {"ready": bool(ready)}
            if not ready:
                fields["reason"] = message
            if ready != _ready(nodeclass.status)[0]:
                log.info("ec2nodeclass readiness changed", extra=fields)
            else:
                log.debug("updated ec2nodeclass status", extra=fields)
        return Result(requeue_after=self._resync)

    def _nodeclaims(self, name: str) -> list[NodeClaim]:
        return [
            claim
            for claim in self._view.nodeclaims()
            if claim.spec.node_class_ref.group == awslabels.AWS_GROUP
            and claim.spec.node_class_ref.kind == EC2NodeClass.KIND
            and claim.spec.node_class_ref.name == name
        ]

    async def _rehash_nodeclaims(self, nodeclass: EC2NodeClass) -> None:
        current = static_hash(nodeclass.spec)
        for claim in self._nodeclaims(nodeclass.metadata.name or ""):
            update = rehash_annotations(
                claim.metadata.annotations, current_hash=current, drifted=_drifted(claim)
            )
            if update is None:
                continue
            rehashed = attrs.evolve(claim, metadata=with_annotations(claim.metadata, update))
            try:
                await self._kube.patch(NODECLAIMS, claim, rehashed)
            except NotFoundError:
                continue
            log.info(
                "updated nodeclaim ec2nodeclass hash version",
                extra={"nodeclaim": claim.metadata.name, "hash-version": NODECLASS_HASH_VERSION},
            )

    async def _finalize(self, nodeclass: EC2NodeClass) -> Result:
        name = nodeclass.metadata.name or ""
        if FINALIZER not in nodeclass.metadata.finalizers:
            return Result()
        claims = sorted(claim.metadata.name or "" for claim in self._nodeclaims(name))
        if claims:
            await self._recorder.publish(
                events.waiting_on_nodeclaims(nodeclass, claims),
                now=asyncio.get_running_loop().time(),
            )
            log.debug("waiting on nodeclaim termination", extra={"nodeclaims": claims})
            return Result(requeue_after=self._termination_poll)
        role = nodeclass.spec.role
        if role:
            try:
                if await self._profiles.delete_for_role(nodeclass=name, role=role):
                    log.info("deleted instance profile", extra={"role": role})
            except aws.ConfigurationError:  # a role name karpy never made a profile for
                pass
        deleted = await self._templates.delete_for_nodeclass(self._cluster_name, name)
        for template in deleted:
            log.info("deleted launch template", extra={"launch_template": template})
        await self._kube.remove_finalizer(EC2NODECLASSES, nodeclass, FINALIZER)
        return Result()
