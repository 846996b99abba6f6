"""The Events the EC2NodeClass controller records, one constructor each (as the AWS
provider's nodeclass/events.go)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from karpy.kube.events import Event, normal
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.kinds import EC2NODECLASSES

WAITING_ON_NODECLAIMS: Final = "WaitingOnNodeClaimTermination"


def waiting_on_nodeclaims(nodeclass: EC2NodeClass, claims: Sequence[str]) -> Event:
    """The deleted NodeClass stays until the NodeClaims named `claims` that use it are gone."""
    return normal(
        EC2NODECLASSES,
        nodeclass,
        WAITING_ON_NODECLAIMS,
        f"Waiting on NodeClaim termination for {', '.join(claims)}",
    )
