"""The tagging controller: name an instance after its node once the node has registered.

At launch the Node's name is not known yet, so Karpenter's AWS provider tags each instance a
second time once its NodeClaim is Registered: ``Name`` (the node), ``karpenter.sh/nodeclaim``
and ``eks:eks-cluster-name``, the only keys the controller's IAM policy lets it add to a running
instance of the cluster — each only where the instance lacks it, so a ``Name`` the user set in
the EC2NodeClass's tags (carried to the instance at launch) is never overwritten. It then sets
the annotation ``karpenter.k8s.aws/tagged: "true"`` on the NodeClaim, so an instance is tagged
once, and NodeClaims Karpenter itself tagged are not tagged again.

Each pass (declared as a `karpy.manager.Singleton`: a span per pass, a failing pass backs off)
reads the NodeClaims from the operator's cluster view and tags the instances of those that need
it, at most ``concurrency`` at a time. An instance is
read first (DescribeInstances), because EC2 still accepts tags for a terminated instance: one
that no longer exists, an AWS error or a failed annotation is logged and fails the pass once
every NodeClaim has had its turn, so the others are not held back. A NodeClaim deleted before
its annotation is written is skipped. The annotation patch carries the read object's UID, so
a NodeClaim recreated under the same name in between is not marked (the apiserver refuses to
change a UID).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import ClassVar, Final

import attrs
from opentelemetry import trace

from karpy.apis.meta import ConditionStatus, with_annotations
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError, NotFoundError
from karpy.kube.kinds import NODECLAIMS
from karpy.manager import Singleton
from karpy.runtime.bounded import count_failures
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_aws.errors import AWSError
from karpy_aws.providers.instance import Instances, instance_id_of

ANNOTATION_TAGGED: Final = "karpenter.k8s.aws/tagged"
"""Karpenter's annotation (``v1.AnnotationInstanceTagged``) marking a NodeClaim whose instance
has its registration tags; the value is ``"true"``."""
TAGGING_PERIOD: Final = 30.0
"""Seconds between passes: a node is named in EC2 within half a minute of registering, at the
cost of one pass over the cached NodeClaims per period when nothing needs tagging."""
CONCURRENCY: Final = 10
"""NodeClaims tagged at once, so a burst of registrations neither waits in line nor floods EC2."""
TAG_TIMEOUT: Final = 60.0
"""Deadline in seconds for one NodeClaim: DescribeInstances, CreateTags and the annotation."""

log = logging.getLogger(__name__)


def instance_to_tag(claim: NodeClaim) -> str | None:
    """The EC2 instance id to tag for ``claim``, or None when it needs no tagging: not
    Registered=True, no node name, being deleted, already annotated, or no AWS providerID.
    Pure."""
    status = claim.status
    if claim.metadata.annotations.get(ANNOTATION_TAGGED) == "true":
        return None
    if claim.metadata.deletion_timestamp is not None or not status.node_name:
        return None
    if not any(
        c.type == ConditionType.REGISTERED and c.status == ConditionStatus.TRUE
        for c in status.conditions
    ):
        return None
    return instance_id_of(status.provider_id)


class TaggingError(Exception):
    """Some NodeClaims' instances could not be tagged this pass (the message says how many)."""


class TaggingController:
    """Tag registered NodeClaims' instances and mark the NodeClaims, one pass at a time."""

    name: ClassVar[str] = "nodeclaim.tagging"

    def __init__(
        self,
        kube: KubeClient,
        view: ClusterView,
        instances: Instances,
        *,
        period: float = TAGGING_PERIOD,
        concurrency: int = CONCURRENCY,
    ) -> None:
        if period <= 0 or concurrency < 1:
            msg = (
                f"TaggingController: period must be > 0 seconds and concurrency >= 1, got "
                f"{period} and {concurrency}"
            )
            raise ValueError(msg)
        self._kube = kube
        self._view = view
        self._instances = instances
        self._period = period
        self._concurrency = concurrency

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One pass over every NodeClaim in the view. Raises TaggingError when some instances
        could not be tagged or their NodeClaims not annotated (the runner backs off); otherwise
        waits a period."""
        work = [
            (claim, instance_id)
            for claim in self._view.nodeclaims()
            if (instance_id := instance_to_tag(claim)) is not None
        ]
        trace.get_current_span().set_attribute("karpy.tagging.nodeclaims", len(work))
        failed = await self._tag_all(work)
        if failed:
            msg = f"{failed} of {len(work)} nodeclaims could not be tagged"
            raise TaggingError(msg)
        return Result(requeue_after=self._period)

    async def _tag_all(self, work: Sequence[tuple[NodeClaim, str]]) -> int:
        """Tag each NodeClaim's instance, ``concurrency`` at a time; return how many failed."""
        return await count_failures(
            [
                (
                    f"{self.name}-{instance_id}",
                    functools.partial(self._tag_guarded, claim, instance_id),
                )
                for claim, instance_id in work
            ],
            limit=self._concurrency,
        )

    async def _tag_guarded(self, claim: NodeClaim, instance_id: str) -> bool:
        """Tag one NodeClaim's instance within its deadline; False (logged) if that failed."""
        try:
            async with asyncio.timeout(TAG_TIMEOUT):
                await self._tag(claim, instance_id)
        except (AWSError, KubeError, TimeoutError) as error:
            log.warning(
                "failed tagging nodeclaim",
                extra={
                    "nodeclaim": claim.metadata.name,
                    "provider_id": claim.status.provider_id,
                    "error": str(error) or type(error).__name__,
                },
            )
            return False
        return True

    async def _tag(self, claim: NodeClaim, instance_id: str) -> None:
        name = claim.metadata.name or ""
        node = claim.status.node_name or ""
        # Raises NotFoundError for a terminated instance, which CreateTags would still accept.
        instance = await self._instances.get(instance_id)
        added = await self._instances.tag_registered(instance, nodeclaim=name, node_name=node)
        tagged = attrs.evolve(
            claim, metadata=with_annotations(claim.metadata, {ANNOTATION_TAGGED: "true"})
        )
        try:
            await self._kube.patch(NODECLAIMS, claim, tagged, same_uid=True)
        except NotFoundError:
            log.debug("nodeclaim deleted before it was marked tagged", extra={"nodeclaim": name})
            return
        log.info(
            "tagged nodeclaim",
            extra={
                "nodeclaim": name,
                "node": node,
                "provider_id": claim.status.provider_id,
                "tags": list(added),
            },
        )
