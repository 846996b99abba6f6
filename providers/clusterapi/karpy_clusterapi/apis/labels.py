"""Label and annotation names: the provider's own (karpenter.cluster.x-k8s.io) and the Cluster API
and cluster-autoscaler ones it reads or writes.

Wire contract. karpy learns the ones it must know (its CRDs' label rules, the scheduler's
well-known labels) from `LABELS`.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.labels import ProviderLabels

GROUP: Final = "karpenter.cluster.x-k8s.io"

LABEL_NODECLASS: Final = f"{GROUP}/clusterapinodeclass"
"""The NodeClass a NodeClaim launched from (the provisioner puts it on NodeClaims)."""
LABEL_MACHINEDEPLOYMENT: Final = f"{GROUP}/machinedeployment"
"""The MachineDeployment an instance type stands for (its name; a well-known label)."""
LABEL_MACHINEDEPLOYMENT_NAMESPACE: Final = f"{GROUP}/machinedeployment-namespace"

WELL_KNOWN_LABELS: Final = frozenset({LABEL_MACHINEDEPLOYMENT, LABEL_MACHINEDEPLOYMENT_NAMESPACE})

LABELS: Final = ProviderLabels(
    domains=frozenset({GROUP}),
    well_known=WELL_KNOWN_LABELS,
    nodeclaim_keys=frozenset({LABEL_NODECLASS}),
)

# --- what karpy writes on Cluster API objects (management cluster)

LABEL_CLAIMED_BY: Final = f"{GROUP}/nodeclaim"
"""On a Machine karpy claimed: the name of the NodeClaim it serves."""
ANNOTATION_CLAIMED_UID: Final = f"{GROUP}/nodeclaim-uid"
"""On a Machine karpy claimed: the UID of the NodeClaim it serves."""
ANNOTATION_SCALE_UP_PREFIX: Final = f"{GROUP}/scale-up-"
"""On a MachineDeployment, ``<prefix><nodeclaim-uid>: <RFC 3339 time>``: karpy added a replica for
that NodeClaim and has not yet claimed its Machine (written with the replica, atomically)."""
ANNOTATION_RELEASE_PREFIX: Final = f"{GROUP}/release-"
"""On a MachineDeployment, ``<prefix><machine-uid>: <machine-name>``: karpy removed a replica for
that Machine, which it marked for deletion (written with the replica, atomically)."""
ANNOTATION_MACHINE: Final = f"{GROUP}/machine"
"""On a NodeClaim: ``<namespace>/<name>`` of the Machine it was given."""
ANNOTATION_TEMPLATE_HASH: Final = f"{GROUP}/machinedeployment-template-hash"
"""On a NodeClaim: the digest of the MachineDeployment template (version, infrastructure and
bootstrap references) it launched from; a different digest now is drift."""
ANNOTATION_PRICE: Final = f"{GROUP}/price"
"""On a MachineDeployment: the hourly price of one of its machines (a decimal number)."""

# --- Cluster API's own

CAPI_GROUP: Final = "cluster.x-k8s.io"
LABEL_CLUSTER_NAME: Final = f"{CAPI_GROUP}/cluster-name"
LABEL_DEPLOYMENT_NAME: Final = f"{CAPI_GROUP}/deployment-name"
ANNOTATION_DELETE_MACHINE: Final = f"{CAPI_GROUP}/delete-machine"
ANNOTATION_MIN_SIZE: Final = f"{CAPI_GROUP}/cluster-api-autoscaler-node-group-min-size"
ANNOTATION_MAX_SIZE: Final = f"{CAPI_GROUP}/cluster-api-autoscaler-node-group-max-size"

# --- cluster-autoscaler's scale-from-zero annotations on a MachineDeployment

_CAPACITY: Final = "capacity.cluster-autoscaler.kubernetes.io"
ANNOTATION_CPU: Final = f"{_CAPACITY}/cpu"
ANNOTATION_MEMORY: Final = f"{_CAPACITY}/memory"
ANNOTATION_EPHEMERAL_DISK: Final = f"{_CAPACITY}/ephemeral-disk"
ANNOTATION_MAX_PODS: Final = f"{_CAPACITY}/maxPods"
ANNOTATION_GPU_COUNT: Final = f"{_CAPACITY}/gpu-count"
ANNOTATION_GPU_TYPE: Final = f"{_CAPACITY}/gpu-type"
ANNOTATION_LABELS: Final = f"{_CAPACITY}/labels"
ANNOTATION_TAINTS: Final = f"{_CAPACITY}/taints"
