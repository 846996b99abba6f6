"""The learning controller: take each instance type's real memory from its registered nodes.

Every pass (declared as a `karpy.manager.Singleton`) reads, from the operator's cluster view,
the NodeClaims that are Registered and the capacity their Nodes report, and records the memory
per instance type and AMI family of the NodeClaim's EC2NodeClass
(`karpy_aws.providers.instancetype.learned`). The instance-type catalog uses it over the
``VM_MEMORY_OVERHEAD_PERCENT`` guess from then on. Only reads: no AWS or apiserver calls.
"""

from __future__ import annotations

import logging
from typing import ClassVar, Final

from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType, NodeClaim
from karpy.core.resources import MEMORY, QuantityError, parse_resource
from karpy.manager import Singleton
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.instancetype.learned import LearnedMemory
from karpy_aws.providers.nodeclass import ami_family

LEARNING_PERIOD: Final = 30.0
"""Seconds between passes."""

log = logging.getLogger(__name__)


def _registered(claim: NodeClaim) -> bool:
    return claim.metadata.deletion_timestamp is None and any(
        c.type == ConditionType.REGISTERED and c.status == ConditionStatus.TRUE
        for c in claim.status.conditions
    )


class LearningController:
    """Record the memory each registered node of an EC2NodeClass reports."""

    name: ClassVar[str] = "instancetype.capacity"

    def __init__(
        self, view: ClusterView, learned: LearnedMemory, *, period: float = LEARNING_PERIOD
    ) -> None:
        self._view = view
        self._learned = learned
        self._period = period

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One pass, then the next a period later."""
        self.learn()
        return Result(requeue_after=self._period)

    def learn(self) -> int:
        """Record what the registered nodes report; return how many figures changed."""
        changed = 0
        for claim in self._view.nodeclaims():
            ref = claim.spec.node_class_ref
            if ref.group != awslabels.AWS_GROUP or not _registered(claim):
                continue
            node = self._view.node(claim.status.node_name or "")
            nodeclass = self._view.get(EC2NODECLASSES, ref.name)
            instance_type = claim.metadata.labels.get(wk.LABEL_INSTANCE_TYPE)
            if node is None or not isinstance(nodeclass, EC2NodeClass) or not instance_type:
                continue
            reported = node.status.capacity.get(MEMORY)
            if reported is None:
                continue
            try:
                family = ami_family(nodeclass.spec)
                memory = parse_resource(MEMORY, str(reported)) // 1000
            except (ConfigurationError, QuantityError):
                continue
            if self._learned.record(instance_type, family, memory):
                changed += 1
                log.info(
                    "learned instance type memory",
                    extra={
                        "instance_type": instance_type,
                        "ami_family": family.value,
                        "memory_bytes": memory,
                        "node": node.metadata.name,
                    },
                )
        return changed
