"""Well-known labels, annotations, taints and finalizers, exactly as Karpenter v1 spells them.

Users' manifests and nodeSelectors name these strings, so they are wire contract: they live in
one module, are never built by string concatenation elsewhere, and never change once shipped.
Only karpenter.sh's and Kubernetes' own live here: a provider's names live in its own labels
module (``karpy_aws.apis.labels``, ``karpy_kwok.apis.labels``), and the provider hands karpy
those karpy must know about as `ProviderLabels`.
"""

from __future__ import annotations

from typing import Final

import attrs

# --------------------------------------------------------------------------- groups
GROUP: Final = "karpenter.sh"

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

# --------------------------------------------------------------------------- kwok (the tool)
# kwok runs the Nodes annotated so; the local cluster configures it to, whatever the provider.
ANNOTATION_KWOK_NODE: Final = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE: Final = "fake"

# --------------------------------------------------------------------------- annotations
ANNOTATION_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
ANNOTATION_NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"
ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: Final = "karpenter.sh/nodeclaim-min-values-relaxed"

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
ANNOTATION_EXTENDED_RESOURCE_INITIALIZATION_TIMEOUT: Final = (
    "karpy.sh/extended-resource-initialization-timeout"
)
"""NodePool annotation: how long a registered node may go without reporting an extended
resource its NodeClaim requested before it is replaced (a duration, or Never)."""
LIMIT_COST_PER_HOUR: Final = "karpy.sh/cost-per-hour"
"""NodePool spec.limits key: a cap on the summed hourly price of the pool's nodes, in the cloud
provider's currency (e.g. "5" or "2.5"); karpy's only key in limits, which Karpenter reads as an
extended resource no node has and so never hits."""
TAINT_UNREGISTERED_KEY: Final = "karpenter.sh/unregistered"
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_CLOUD_PROVIDER_UNINITIALIZED: Final = "node.cloudprovider.kubernetes.io/uninitialized"

# --------------------------------------------------------------------------- finalizers
FINALIZER_TERMINATION: Final = "karpenter.sh/termination"

# --------------------------------------------------------------------------- restrictions
# Label domains users may not set in a NodePool template: karpy owns them (and each provider its
# own, `ProviderLabels.domains`). Labels that are well known (listed in WELL_KNOWN_LABELS or a
# provider's `ProviderLabels.well_known`) stay allowed as requirement keys.
RESTRICTED_LABEL_DOMAINS: Final = frozenset({"kubernetes.io", "k8s.io", GROUP})
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


@attrs.frozen(kw_only=True)
class ProviderLabels:
    """The label names a cloud provider owns, which karpy learns from the provider (its CRD
    declarations for the CRDs' label rules, `CloudProvider.well_known_labels` for the scheduler)
    instead of naming them itself.

    ``domains`` are label domains the provider owns, restricted in NodePool templates as
    karpy's are; ``well_known`` the labels its instance types define, which users may name in
    requirements and pods may select before a NodePool mentions them; ``requirement_keys``
    further keys of its domains users may name in requirements (AWS placement groups);
    ``nodeclaim_keys`` the keys the provisioner injects into NodeClaims (its NodeClass label).
    """

    domains: frozenset[str]
    well_known: frozenset[str]
    requirement_keys: frozenset[str] = frozenset()
    nodeclaim_keys: frozenset[str] = frozenset()


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

# Effects of karpy's own taints (keys above).
TAINT_DISRUPTED_EFFECT: Final = "NoSchedule"
TAINT_UNREGISTERED_EFFECT: Final = "NoExecute"
