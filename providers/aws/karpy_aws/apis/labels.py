"""The AWS provider's labels, annotations and tags, exactly as Karpenter's AWS provider spells them.

Wire contract, like karpy's own in `karpy.apis.v1.labels`: users' manifests and nodeSelectors
name these strings. karpy learns the ones it must know about (its CRDs' label rules, the
scheduler's well-known labels) from `LABELS`, which the provider hands over.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.labels import LABEL_NODEPOOL, ProviderLabels

AWS_GROUP: Final = "karpenter.k8s.aws"

# --------------------------------------------------------------------------- instance labels
LABEL_AWS_INSTANCE_CATEGORY: Final = "karpenter.k8s.aws/instance-category"
LABEL_AWS_INSTANCE_FAMILY: Final = "karpenter.k8s.aws/instance-family"
LABEL_AWS_INSTANCE_GENERATION: Final = "karpenter.k8s.aws/instance-generation"
LABEL_AWS_INSTANCE_SIZE: Final = "karpenter.k8s.aws/instance-size"
LABEL_AWS_INSTANCE_CPU: Final = "karpenter.k8s.aws/instance-cpu"
LABEL_AWS_INSTANCE_CPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-cpu-manufacturer"
LABEL_AWS_INSTANCE_CPU_CLOCK: Final = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
LABEL_AWS_INSTANCE_MEMORY: Final = "karpenter.k8s.aws/instance-memory"
LABEL_AWS_INSTANCE_EBS_BANDWIDTH: Final = "karpenter.k8s.aws/instance-ebs-bandwidth"
LABEL_AWS_INSTANCE_NETWORK_BANDWIDTH: Final = "karpenter.k8s.aws/instance-network-bandwidth"
LABEL_AWS_INSTANCE_GPU_NAME: Final = "karpenter.k8s.aws/instance-gpu-name"
LABEL_AWS_INSTANCE_GPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_AWS_INSTANCE_GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"
LABEL_AWS_INSTANCE_GPU_MEMORY: Final = "karpenter.k8s.aws/instance-gpu-memory"
LABEL_AWS_INSTANCE_ACCELERATOR_NAME: Final = "karpenter.k8s.aws/instance-accelerator-name"
LABEL_AWS_INSTANCE_ACCELERATOR_MANUFACTURER: Final = (
    "karpenter.k8s.aws/instance-accelerator-manufacturer"
)
LABEL_AWS_INSTANCE_ACCELERATOR_COUNT: Final = "karpenter.k8s.aws/instance-accelerator-count"
LABEL_AWS_INSTANCE_HYPERVISOR: Final = "karpenter.k8s.aws/instance-hypervisor"
LABEL_AWS_INSTANCE_ENCRYPTION_IN_TRANSIT: Final = (
    "karpenter.k8s.aws/instance-encryption-in-transit-supported"
)
LABEL_AWS_INSTANCE_LOCAL_NVME: Final = "karpenter.k8s.aws/instance-local-nvme"
LABEL_AWS_INSTANCE_CAPABILITY_FLEX: Final = "karpenter.k8s.aws/instance-capability-flex"
LABEL_AWS_INSTANCE_TENANCY: Final = "karpenter.k8s.aws/instance-tenancy"
LABEL_AWS_ZONE_ID: Final = "topology.k8s.aws/zone-id"
LABEL_AWS_CAPACITY_RESERVATION_ID: Final = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_AWS_CAPACITY_RESERVATION_TYPE: Final = "karpenter.k8s.aws/capacity-reservation-type"
LABEL_AWS_CAPACITY_RESERVATION_INTERRUPTIBLE: Final = (
    "karpenter.k8s.aws/capacity-reservation-interruptible"
)
LABEL_AWS_EC2NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"

AWS_WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_AWS_INSTANCE_CATEGORY,
        LABEL_AWS_INSTANCE_FAMILY,
        LABEL_AWS_INSTANCE_GENERATION,
        LABEL_AWS_INSTANCE_SIZE,
        LABEL_AWS_INSTANCE_CPU,
        LABEL_AWS_INSTANCE_CPU_MANUFACTURER,
        LABEL_AWS_INSTANCE_CPU_CLOCK,
        LABEL_AWS_INSTANCE_MEMORY,
        LABEL_AWS_INSTANCE_EBS_BANDWIDTH,
        LABEL_AWS_INSTANCE_NETWORK_BANDWIDTH,
        LABEL_AWS_INSTANCE_GPU_NAME,
        LABEL_AWS_INSTANCE_GPU_MANUFACTURER,
        LABEL_AWS_INSTANCE_GPU_COUNT,
        LABEL_AWS_INSTANCE_GPU_MEMORY,
        LABEL_AWS_INSTANCE_ACCELERATOR_NAME,
        LABEL_AWS_INSTANCE_ACCELERATOR_MANUFACTURER,
        LABEL_AWS_INSTANCE_ACCELERATOR_COUNT,
        LABEL_AWS_INSTANCE_HYPERVISOR,
        LABEL_AWS_INSTANCE_ENCRYPTION_IN_TRANSIT,
        LABEL_AWS_INSTANCE_LOCAL_NVME,
        LABEL_AWS_INSTANCE_CAPABILITY_FLEX,
        LABEL_AWS_INSTANCE_TENANCY,
        LABEL_AWS_ZONE_ID,
        LABEL_AWS_CAPACITY_RESERVATION_ID,
        LABEL_AWS_CAPACITY_RESERVATION_TYPE,
        LABEL_AWS_CAPACITY_RESERVATION_INTERRUPTIBLE,
    }
)

# Placement-group labels of AWS nodes (usable in requirements and topology spread).
LABEL_AWS_PLACEMENT_GROUP_ID: Final = "karpenter.k8s.aws/placement-group-id"
LABEL_AWS_PLACEMENT_GROUP_PARTITION: Final = "karpenter.k8s.aws/placement-group-partition"
AWS_PLACEMENT_GROUP_LABELS: Final = frozenset(
    {LABEL_AWS_PLACEMENT_GROUP_ID, LABEL_AWS_PLACEMENT_GROUP_PARTITION}
)

# --------------------------------------------------------------------------- annotations
ANNOTATION_EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
ANNOTATION_EC2NODECLASS_HASH_VERSION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"

# --------------------------------------------------------------------------- tags
# Tags karpy puts on the EC2 resources it creates; EC2NodeClass.spec.tags may not set them.
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NODEPOOL: Final = LABEL_NODEPOOL
TAG_EC2NODECLASS: Final = LABEL_AWS_EC2NODECLASS
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"

LABELS: Final = ProviderLabels(
    domains=frozenset({AWS_GROUP}),
    well_known=AWS_WELL_KNOWN_LABELS,
    requirement_keys=AWS_PLACEMENT_GROUP_LABELS,
    nodeclaim_keys=frozenset({LABEL_AWS_EC2NODECLASS}),
)
"""What karpy must know of the AWS provider's labels (see `ProviderLabels`)."""
