"""The kinds karpy reads and writes (Kubernetes' and karpenter.sh's): REST coordinates, decoders.

Each `ResourceKind` binds a model from karpy.apis to the path it is listed and watched at, and
decodes through the shared codec, so an informer needs nothing but the kind. A provider binds
the kinds it owns (its NodeClass) in its own package and declares them to the operator.
"""

from __future__ import annotations

import functools
from typing import Any, Final, TypeVar

from karpy.apis.codec import from_dict
from karpy.apis.kube.configmap import ConfigMap
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from karpy.apis.kube.workloads import DaemonSet, Deployment, PodDisruptionBudget
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.kube.resources import ResourceKind

T = TypeVar("T")

NODES: Final = ResourceKind[Node](
    kind="Node",
    plural="nodes",
    version="v1",
    namespaced=False,
    decode=functools.partial(from_dict, Node),
)
PODS: Final = ResourceKind[Pod](
    kind="Pod",
    plural="pods",
    version="v1",
    namespaced=True,
    decode=functools.partial(from_dict, Pod),
)
NODECLAIMS: Final = ResourceKind[NodeClaim](
    kind=NodeClaim.KIND,
    plural=NodeClaim.PLURAL,
    group=NodeClaim.GROUP,
    version=NodeClaim.VERSION,
    namespaced=False,
    decode=functools.partial(from_dict, NodeClaim),
)
NODEPOOLS: Final = ResourceKind[NodePool](
    kind=NodePool.KIND,
    plural=NodePool.PLURAL,
    group=NodePool.GROUP,
    version=NodePool.VERSION,
    namespaced=False,
    decode=functools.partial(from_dict, NodePool),
)
DAEMONSETS: Final = ResourceKind[DaemonSet](
    kind=DaemonSet.KIND,
    plural="daemonsets",
    group="apps",
    version="v1",
    namespaced=True,
    decode=functools.partial(from_dict, DaemonSet),
)
PERSISTENT_VOLUMES: Final = ResourceKind[PersistentVolume](
    kind=PersistentVolume.KIND,
    plural="persistentvolumes",
    version="v1",
    namespaced=False,
    decode=functools.partial(from_dict, PersistentVolume),
)
PERSISTENT_VOLUME_CLAIMS: Final = ResourceKind[PersistentVolumeClaim](
    kind=PersistentVolumeClaim.KIND,
    plural="persistentvolumeclaims",
    version="v1",
    namespaced=True,
    decode=functools.partial(from_dict, PersistentVolumeClaim),
)
STORAGE_CLASSES: Final = ResourceKind[StorageClass](
    kind=StorageClass.KIND,
    plural="storageclasses",
    group="storage.k8s.io",
    version="v1",
    namespaced=False,
    decode=functools.partial(from_dict, StorageClass),
)
PODDISRUPTIONBUDGETS: Final = ResourceKind[PodDisruptionBudget](
    kind=PodDisruptionBudget.KIND,
    plural="poddisruptionbudgets",
    group="policy",
    version="v1",
    namespaced=True,
    decode=functools.partial(from_dict, PodDisruptionBudget),
)


def cluster_kind(model: type[T]) -> ResourceKind[T]:
    """The ResourceKind of a cluster-scoped custom kind from its model's GROUP, VERSION, KIND and
    PLURAL (provider kinds the caller knows only as models, such as legacy NodeClasses)."""
    cls: Any = model
    return ResourceKind[T](
        kind=cls.KIND,
        plural=cls.PLURAL,
        group=cls.GROUP,
        version=cls.VERSION,
        namespaced=False,
        decode=functools.partial(from_dict, model),
    )


PROVISIONERS: Final = cluster_kind(Provisioner)

CONFIGMAPS: Final = ResourceKind[ConfigMap](
    kind=ConfigMap.KIND,
    plural="configmaps",
    version="v1",
    namespaced=True,
    decode=functools.partial(from_dict, ConfigMap),
)

DEPLOYMENTS: Final = ResourceKind[Deployment](
    kind=Deployment.KIND,
    plural="deployments",
    group="apps",
    version="v1",
    decode=functools.partial(from_dict, Deployment),
)
