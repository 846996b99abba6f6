"""Typed errors for everything karpy_aws does, translated from botocore at the package boundary.

Callers (the cloud-provider adapter, controllers) must react to *kinds* of failure — not found,
throttled, capacity exhausted, bad input — without importing botocore. This module is the single
place where AWS error codes are read; every public function of karpy_aws raises only these types,
chained to the original error with ``raise ... from``.
"""

from __future__ import annotations

from typing import Final

INSUFFICIENT_FREE_ADDRESSES_CODE: Final = "InsufficientFreeAddressesInSubnet"
# Codes that mean "this capacity cannot be had right now", as Karpenter treats them: an offering
# that fails with one of these is put in the unavailable-offerings cache for a while.
UNFULFILLABLE_CAPACITY_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        INSUFFICIENT_FREE_ADDRESSES_CODE,
        "ReservationCapacityExceeded",
    }
)
# Spot cannot be used at all in this account until the service-linked role exists.
SPOT_SERVICE_LINKED_ROLE_CODE: Final = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
LAUNCH_TEMPLATE_NOT_FOUND_CODE: Final = "InvalidLaunchTemplateName.NotFoundException"
# A client token seen before, with other parameters: the first call's instance exists.
IDEMPOTENT_MISMATCH_CODE: Final = "IdempotentParameterMismatch"

NOT_FOUND_CODES: Final = frozenset(
    {
        "InvalidInstanceID.NotFound",
        LAUNCH_TEMPLATE_NOT_FOUND_CODE,
        "InvalidLaunchTemplateId.NotFound",
        "InvalidSubnetID.NotFound",
        "InvalidGroup.NotFound",
        "InvalidAMIID.NotFound",
        "InvalidPlacementGroup.Unknown",
        "ParameterNotFound",
        "NoSuchEntity",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "ResourceNotFoundException",
    }
)
THROTTLING_CODES: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
ACCESS_DENIED_CODES: Final = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "AuthFailure",
        SPOT_SERVICE_LINKED_ROLE_CODE,
    }
)
ALREADY_EXISTS_CODES: Final = frozenset(
    {
        "InvalidLaunchTemplateName.AlreadyExistsException",
        "EntityAlreadyExists",
    }
)


class AWSError(Exception):
    """An AWS call failed. ``code`` is AWS's error code (or a karpy code for non-API failures)."""

    def __init__(self, *, service: str, operation: str, code: str, message: str) -> None:
        super().__init__(f"{service}.{operation} failed: {code}: {message}")
        self.service = service
        self.operation = operation
        self.code = code
        self.message = message


class NotFoundError(AWSError):
    """The named resource does not exist (instance, launch template, parameter, profile...)."""


class AlreadyExistsError(AWSError):
    """A create call raced with another creator; the resource is there now."""


class ThrottledError(AWSError):
    """AWS throttled the call and botocore's retries were used up."""


class AccessDeniedError(AWSError):
    """The controller's IAM identity may not make this call (see deploy/iam/)."""


class InsufficientCapacityError(AWSError):
    """The capacity asked for cannot be had right now (one of UNFULFILLABLE_CAPACITY_CODES)."""


class InvalidRequestError(AWSError):
    """AWS rejected the request's parameters (a 4xx that is none of the kinds above)."""


class ServiceUnavailableError(AWSError):
    """AWS (or the endpoint standing in for it) failed or could not be reached."""


class CallTimeoutError(AWSError):
    """The call did not finish within the configured deadline (retries included)."""


class ConfigurationError(ValueError):
    """Bad input to karpy_aws: a selector term, alias or option that cannot be used as given.

    The message always names the field and says what is wrong with it.
    """


def error_for_code(
    *, service: str, operation: str, code: str, message: str, status: int
) -> AWSError:
    """Return the typed error for an AWS error ``code`` (pure; the caller raises it)."""
    kind: type[AWSError]
    if code in UNFULFILLABLE_CAPACITY_CODES:
        kind = InsufficientCapacityError
    elif code in THROTTLING_CODES:
        kind = ThrottledError
    elif code in ACCESS_DENIED_CODES:
        kind = AccessDeniedError
    elif code in ALREADY_EXISTS_CODES:
        kind = AlreadyExistsError
    elif code in NOT_FOUND_CODES or code.endswith(".NotFound"):
        kind = NotFoundError
    elif status >= 500:
        kind = ServiceUnavailableError
    else:
        kind = InvalidRequestError
    return kind(service=service, operation=operation, code=code, message=message)
