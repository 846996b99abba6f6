"""The region karpy runs in, when no setting names it: the instance metadata service's answer.

Karpenter's AWS SDK takes the region from ``AWS_REGION``, then the SDK's own configuration
(``AWS_DEFAULT_REGION``, the shared config file's profile) and, without any, from the instance
it runs on (IMDS), so a Karpenter chart needs only the cluster name. karpy does the same: the
operator hands ``AWS_REGION`` in as the ``region`` setting; without it ``configured_region``
reads botocore's configuration, and without that this module asks IMDS (IMDSv2: a session
token, then the placement availability zone, less its letter) through botocore's own fetcher,
which honours ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` and the rest of the SDK's metadata
configuration as Karpenter's SDK does.
"""

from __future__ import annotations

import asyncio
import re
from typing import Final

from aiobotocore.session import get_session
from aiobotocore.utils import AioInstanceMetadataRegionFetcher

from karpy_aws.errors import ConfigurationError

IMDS_DEADLINE: Final = 10.0
"""Seconds the whole metadata exchange may take (botocore's own per-request timeout is 1 s)."""
DEFAULT_IMDS_ENDPOINT: Final = "http://169.254.169.254/"
_REGION: Final = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")


def configured_region() -> str | None:
    """The region botocore's configuration names (``AWS_DEFAULT_REGION``, the profile's
    ``region``), if any."""
    configured = get_session().get_config_variable("region")
    return str(configured) if configured else None


def imds_endpoint() -> str:
    """The endpoint botocore's configuration names (``AWS_EC2_METADATA_SERVICE_ENDPOINT`` or
    the shared config file), else the link-local default."""
    configured = get_session().get_config_variable("ec2_metadata_service_endpoint")
    return str(configured) if configured else DEFAULT_IMDS_ENDPOINT


async def region_from_imds(*, endpoint: str, deadline: float = IMDS_DEADLINE) -> str:
    """The region of the instance this process runs on.

    Raises ConfigurationError saying how to give the region when the metadata service does not
    answer (not on EC2, or a hop limit of 1 behind a pod network) or answers nonsense.
    """
    fetcher = AioInstanceMetadataRegionFetcher(
        timeout=1.0,
        num_attempts=2,
        config={"ec2_metadata_service_endpoint": endpoint},
    )
    try:
        async with asyncio.timeout(deadline):
            region = await fetcher.retrieve_region()
    except TimeoutError:
        region = None
    if not region or not _REGION.fullmatch(str(region)):
        raise ConfigurationError(
            f"the region is not set and the instance metadata service at {endpoint} "
            f"{'answered ' + repr(region) if region else 'did not answer'}; set AWS_REGION "
            "(the chart's settings.aws.region)"
        )
    return str(region)
