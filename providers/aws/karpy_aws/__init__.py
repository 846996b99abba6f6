"""karpy's AWS cloud provider: CreateFleet, launch templates, SSM AMI discovery, SQS interruption.

Registered under the entry-point group ``karpy.providers`` as ``aws = "karpy_aws:build"``;
karpy itself never imports it. :func:`build` (in :mod:`karpy_aws.operator`) turns the operator's
ProviderContext into an AWSCloudProvider that owns its AWS session until ``aclose()``.

Arranged by noun, as Karpenter's AWS provider is, in layers import-linter keeps:

* ``operator``: the entry point's factory, the only place the pieces are put together;
* ``controllers``: the loops the provider declares for the operator to run (EC2NodeClass
  status, interruption, leaked-instance garbage collection, tagging);
* ``cloudprovider``: AWSCloudProvider itself, its upkeep, NodeClaims in and out of EC2, drift;
* ``providers``: the resolvers and caches (AMIs and user data, instance types, offerings and
  prices, instances, instance profiles, launch templates and plans, subnets and security
  groups, the EKS cluster and its version);
* ``apis``: the EC2NodeClass models and their CRD;
* ``session`` and ``errors``: the one boundary every AWS call passes, and its typed errors.

The AWS emulator that tests and ``karpy demo --provider aws`` use is a separate package,
``karpy_aws_emulator``, so the provider never ships moto.
"""

from __future__ import annotations

from karpy_aws.cloudprovider.provider import AWSCloudProvider, NodeClassSource
from karpy_aws.operator import AWSProviderOptions, ViewNodeClasses, build
from karpy_aws.providers.cluster import ClusterInfo

__all__ = [
    "AWSCloudProvider",
    "AWSProviderOptions",
    "ClusterInfo",
    "NodeClassSource",
    "ViewNodeClasses",
    "build",
]
