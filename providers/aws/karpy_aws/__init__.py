"""karpy's AWS cloud provider: CreateFleet, launch templates, SSM AMI discovery, SQS interruption.

Registered under the entry-point group ``karpy.providers`` as ``aws = "karpy_aws:build"``;
karpy itself never imports it. :func:`build` (in :mod:`karpy_aws.factory`) turns the operator's
ProviderContext into an AWSCloudProvider that owns its AWS session until ``aclose()``.
"""

from __future__ import annotations

from karpy_aws.factory import AWSProviderOptions, ViewNodeClasses, build
from karpy_aws.nodeclaims import ClusterInfo
from karpy_aws.provider import AWSCloudProvider, NodeClassSource

__all__ = [
    "AWSCloudProvider",
    "AWSProviderOptions",
    "ClusterInfo",
    "NodeClassSource",
    "ViewNodeClasses",
    "build",
]
