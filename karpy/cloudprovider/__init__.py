"""The contract between karpy and a cloud: the CloudProvider Protocol and its typed errors.

Controllers speak only this contract; AWS, kwok, an on-prem or Azure provider implement it in
their own distribution and are found through the ``karpy.providers`` entry-point group.
"""

from karpy.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy.cloudprovider.protocol import (
    CloudProvider,
    DriftReason,
    NodeClassKind,
    RepairPolicy,
)

__all__ = [
    "CloudProvider",
    "CloudProviderError",
    "CreateError",
    "DriftReason",
    "InsufficientCapacityError",
    "NodeClaimNotFoundError",
    "NodeClassKind",
    "NodeClassNotReadyError",
    "RepairPolicy",
]
