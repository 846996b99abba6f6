"""Why an instance no longer matches its EC2NodeClass: Karpenter's provider drift reasons. Pure.

Disruption replaces drifted nodes, so the reasons must be the ones Karpenter gives, checked in
its order: the NodeClass's static fields changed (its hash differs from the one the NodeClaim
was launched with), then the instance's AMI, security groups and subnet are no longer among
what the NodeClass's status resolves to. Selector terms are not part of the hash: a changed
selector drifts a node only if what it resolves to no longer includes the node's resources.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider import DriftReason
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.providers.instance import Instance
from karpy_aws.providers.nodeclass import NODECLASS_HASH_VERSION, static_hash

AMI_DRIFT: Final = DriftReason("AMIDrift")
SUBNET_DRIFT: Final = DriftReason("SubnetDrift")
SECURITY_GROUP_DRIFT: Final = DriftReason("SecurityGroupDrift")
NODECLASS_DRIFT: Final = DriftReason("NodeClassDrift")
CAPACITY_RESERVATION_DRIFT: Final = DriftReason("CapacityReservationDrift")


def reservation_drift(nodeclaim: NodeClaim, nodeclass: EC2NodeClass) -> DriftReason | None:
    """CapacityReservationDrift when the NodeClaim was launched into a reservation the
    NodeClass's status no longer lists (its terms changed, or it ended or was cancelled)."""
    reservation = nodeclaim.metadata.labels.get(awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID)
    if reservation is None:
        return None
    if reservation in {r.id for r in nodeclass.status.capacity_reservations}:
        return None
    return CAPACITY_RESERVATION_DRIFT


def static_drift(nodeclaim: NodeClaim, nodeclass: EC2NodeClass) -> DriftReason | None:
    """NodeClassDrift when the NodeClaim's recorded hash (of the same hash version) differs
    from the NodeClass's current one."""
    annotations = nodeclaim.metadata.annotations
    recorded = annotations.get(awslabels.ANNOTATION_EC2NODECLASS_HASH)
    same_version = (
        annotations.get(awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION) == NODECLASS_HASH_VERSION
    )
    if recorded and same_version and recorded != static_hash(nodeclass.spec):
        return NODECLASS_DRIFT
    return None


def resource_drift(instance: Instance, nodeclass: EC2NodeClass) -> DriftReason | None:
    """AMIDrift, SecurityGroupDrift or SubnetDrift (in that order) against the NodeClass's
    status; a status list that is empty (not resolved) is not compared."""
    status = nodeclass.status
    if status.amis and instance.image_id not in {a.id for a in status.amis}:
        return AMI_DRIFT
    groups = {g.id for g in status.security_groups}
    if groups and set(instance.security_group_ids) != groups:
        return SECURITY_GROUP_DRIFT
    if status.subnets and instance.subnet_id not in {s.id for s in status.subnets}:
        return SUBNET_DRIFT
    return None
