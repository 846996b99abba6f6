"""Well-known labels, annotations, taints and finalizers, exactly as Karpenter v1 spells them.

Users' manifests and nodeSelectors name these strings, so they are wire contract: they live in
one module, are never built by string concatenation elsewhere, and never change once shipped.
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------- groups
GROUP: Final = "karpenter.sh"
AWS_GROUP: Final = "karpenter.k8s.aws"
KWOK_GROUP: Final = "karpenter.kwok.sh"

# --------------------------------------------------------------------------- upstream labels
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION: Final = "topology.kubernetes.io/region"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"
LABEL_EXCLUDE_FROM_LB: Final = "node.kubernetes.io/exclude-from-external-load-balancers"
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"
# kubelet marks the API copy of a static pod with this annotation (and a Node owner).
ANNOTATION_MIRROR_POD: Final = "kubernetes.io/config.mirror"

# Deprecated spellings that Karpenter normalises to the stable keys above.
NORMALIZED_LABELS: Final[dict[str, str]] = {
    "failure-domain.beta.kubernetes.io/zone": LABEL_TOPOLOGY_ZONE,
    "failure-domain.beta.kubernetes.io/region": LABEL_TOPOLOGY_REGION,
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
}

# --------------------------------------------------------------------------- karpenter.sh labels
LABEL_NODEPOOL: Final = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
LABEL_NODE_REGISTERED: Final = "karpenter.sh/registered"
LABEL_NODE_INITIALIZED: Final = "karpenter.sh/initialized"
LABEL_DO_NOT_SYNC_TAINTS: Final = "karpenter.sh/do-not-sync-taints"
# v1alpha5 (Karpenter <= v0.31) names that old manifests and nodeSelectors still use.
LABEL_PROVISIONER_NAME: Final = "karpenter.sh/provisioner-name"
ANNOTATION_DO_NOT_EVICT: Final = "karpenter.sh/do-not-evict"
ANNOTATION_DO_NOT_CONSOLIDATE: Final = "karpenter.sh/do-not-consolidate"

CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_RESERVED: Final = "reserved"

ARCH_AMD64: Final = "amd64"
ARCH_ARM64: Final = "arm64"
OS_LINUX: Final = "linux"
OS_WINDOWS: Final = "windows"

# --------------------------------------------------------------------------- AWS labels
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

# --------------------------------------------------------------------------- kwok
LABEL_KWOK_NODECLASS: Final = "karpenter.kwok.sh/kwoknodeclass"
ANNOTATION_KWOK_NODE: Final = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE: Final = "fake"

# --------------------------------------------------------------------------- annotations
ANNOTATION_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
ANNOTATION_NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"
ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: Final = "karpenter.sh/nodeclaim-min-values-relaxed"
ANNOTATION_EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
ANNOTATION_EC2NODECLASS_HASH_VERSION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"

# --------------------------------------------------------------------------- taints
TAINT_DISRUPTED_KEY: Final = "karpenter.sh/disrupted"

# karpy's record of a disruption command in flight, kept on the objects themselves so that a
# restarted (or newly elected) process finishes or rolls back every command it finds: the
# candidates carry the command's id, how many replacements it creates and when it started; each
# replacement carries the id of the command it was created for.
ANNOTATION_DISRUPTION_COMMAND: Final = "karpy.sh/disruption-command"
ANNOTATION_DISRUPTION_REPLACEMENTS: Final = "karpy.sh/disruption-replacements"
ANNOTATION_DISRUPTION_STARTED: Final = "karpy.sh/disruption-started"
ANNOTATION_REPLACEMENT_FOR: Final = "karpy.sh/replacement-for"
ANNOTATION_DISRUPTION_TRACEPARENT: Final = "karpy.sh/disruption-traceparent"
"""W3C traceparent of a disruption command's span, on its candidates while it is in flight."""
ANNOTATION_TRACEPARENT: Final = "karpy.sh/traceparent"
"""W3C traceparent of the span that created a NodeClaim (a provisioning batch's or a disruption
command's), so its later lifecycle spans join or link to that trace (docs/tracing.md)."""
TAINT_UNREGISTERED_KEY: Final = "karpenter.sh/unregistered"
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_CLOUD_PROVIDER_UNINITIALIZED: Final = "node.cloudprovider.kubernetes.io/uninitialized"

# --------------------------------------------------------------------------- finalizers
FINALIZER_TERMINATION: Final = "karpenter.sh/termination"

# --------------------------------------------------------------------------- restrictions
# Label domains users may not set in a NodePool template: karpy owns them. Labels that are
# well known (listed in WELL_KNOWN_LABELS) stay allowed as requirement keys.
RESTRICTED_LABEL_DOMAINS: Final = frozenset(
    {"kubernetes.io", "k8s.io", GROUP, AWS_GROUP, KWOK_GROUP}
)
# Sub-domains of the restricted ones that users may still label with.
LABEL_DOMAIN_EXCEPTIONS: Final = frozenset(
    {"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}
)

WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_TOPOLOGY_ZONE,
        LABEL_TOPOLOGY_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_CAPACITY_TYPE,
        LABEL_WINDOWS_BUILD,
    }
)

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

# Taints that come and go on their own while a node boots; they never block provisioning
# decisions and never keep a NodeClaim from being Initialized.
EPHEMERAL_TAINT_KEYS: Final = frozenset(
    {
        TAINT_NODE_NOT_READY,
        TAINT_NODE_UNREACHABLE,
        TAINT_CLOUD_PROVIDER_UNINITIALIZED,
        TAINT_UNREGISTERED_KEY,
    }
)

# --------------------------------------------------------------------------- AWS tags
# Tags karpy puts on the EC2 resources it creates; EC2NodeClass.spec.tags may not set them.
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NODEPOOL: Final = LABEL_NODEPOOL
TAG_EC2NODECLASS: Final = LABEL_AWS_EC2NODECLASS
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"

# --------------------------------------------------------------------------- more well-known keys
# Placement-group labels of AWS nodes (usable in requirements and topology spread).
LABEL_AWS_PLACEMENT_GROUP_ID: Final = "karpenter.k8s.aws/placement-group-id"
LABEL_AWS_PLACEMENT_GROUP_PARTITION: Final = "karpenter.k8s.aws/placement-group-partition"
AWS_PLACEMENT_GROUP_LABELS: Final = frozenset(
    {LABEL_AWS_PLACEMENT_GROUP_ID, LABEL_AWS_PLACEMENT_GROUP_PARTITION}
)

# Instance-type labels the kwok provider puts on its simulated nodes.
LABEL_KWOK_INSTANCE_TYPE: Final = "karpenter.kwok.sh/instance-type"
LABEL_KWOK_INSTANCE_SIZE: Final = "karpenter.kwok.sh/instance-size"
LABEL_KWOK_INSTANCE_FAMILY: Final = "karpenter.kwok.sh/instance-family"
LABEL_KWOK_INSTANCE_MEMORY: Final = "karpenter.kwok.sh/instance-memory"
LABEL_KWOK_INSTANCE_CPU: Final = "karpenter.kwok.sh/instance-cpu"
KWOK_WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_KWOK_INSTANCE_TYPE,
        LABEL_KWOK_INSTANCE_SIZE,
        LABEL_KWOK_INSTANCE_FAMILY,
        LABEL_KWOK_INSTANCE_MEMORY,
        LABEL_KWOK_INSTANCE_CPU,
    }
)

# Effects of karpy's own taints (keys above).
TAINT_DISRUPTED_EFFECT: Final = "NoSchedule"
TAINT_UNREGISTERED_EFFECT: Final = "NoExecute"
