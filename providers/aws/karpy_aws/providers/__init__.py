"""The resolvers and caches the cloud provider and the controllers draw on, one noun each.

Each module answers one question about AWS and remembers the answer as long as it stays true:
AMIs and user data (``amifamily``), instance types with their offerings, prices and refused
capacity (``instancetype``, ``pricing``), instances, instance profiles, launch templates,
subnets and security groups (``network``, ``subnets``, ``selectors``), the EKS cluster and its
Kubernetes version. None of them runs a loop: the controllers in ``karpy_aws.controllers`` do.
"""
