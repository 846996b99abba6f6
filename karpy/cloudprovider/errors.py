"""The errors a CloudProvider may raise; each one means a different action to the controllers.

    CloudProviderError
    ├── NodeClaimNotFoundError     the instance is gone: Delete is done, Get has nothing, GC may act
    ├── InsufficientCapacityError  no offering could be launched: delete the NodeClaim, re-provision
    ├── NodeClassNotReadyError     the NodeClass is not resolved yet: delete the NodeClaim, retry
    └── CreateError                launch failed otherwise: Launched=Unknown with reason + message

Providers translate their SDK's errors at their own boundary with ``raise X(...) from error``;
no SDK type ever crosses into karpy.
"""

from __future__ import annotations


class CloudProviderError(Exception):
    """Base of every error in the CloudProvider contract."""


class NodeClaimNotFoundError(CloudProviderError):
    """The instance behind a NodeClaim does not exist (any more)."""


class InsufficientCapacityError(CloudProviderError):
    """None of the NodeClaim's offerings could be launched right now."""


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClass the NodeClaim names is missing or not Ready."""


class CreateError(CloudProviderError):
    """A launch failed for a reason the NodeClaim's Launched condition should show."""

    def __init__(self, message: str, *, condition_reason: str, condition_message: str) -> None:
        super().__init__(message)
        self.condition_reason = condition_reason
        self.condition_message = condition_message
