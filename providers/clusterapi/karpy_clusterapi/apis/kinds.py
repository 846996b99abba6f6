"""REST coordinates of the kinds the provider reads and writes.

The ClusterAPINodeClass is decoded into its model; Cluster API's kinds (management cluster) are
kept as their JSON and read by `karpy_clusterapi.providers`, which take only the fields they need,
so a newer Cluster API with more fields decodes as well.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from karpy.apis.codec import from_dict
from karpy.kube.resources import ResourceKind
from karpy_clusterapi.apis.labels import CAPI_GROUP
from karpy_clusterapi.apis.nodeclass import ClusterAPINodeClass

NODECLASSES: Final = ResourceKind[ClusterAPINodeClass](
    kind=ClusterAPINodeClass.KIND,
    plural=ClusterAPINodeClass.PLURAL,
    group=ClusterAPINodeClass.GROUP,
    version=ClusterAPINodeClass.VERSION,
    namespaced=False,
    decode=functools.partial(from_dict, ClusterAPINodeClass),
)

CAPI_VERSION: Final = "v1beta2"


def _raw(data: Mapping[str, Any]) -> Mapping[str, Any]:
    return data


MACHINEDEPLOYMENTS: Final = ResourceKind[Mapping[str, Any]](
    kind="MachineDeployment",
    plural="machinedeployments",
    group=CAPI_GROUP,
    version=CAPI_VERSION,
    namespaced=True,
    decode=_raw,
)
MACHINES: Final = ResourceKind[Mapping[str, Any]](
    kind="Machine",
    plural="machines",
    group=CAPI_GROUP,
    version=CAPI_VERSION,
    namespaced=True,
    decode=_raw,
)
MACHINEHEALTHCHECKS: Final = ResourceKind[Mapping[str, Any]](
    kind="MachineHealthCheck",
    plural="machinehealthchecks",
    group=CAPI_GROUP,
    version=CAPI_VERSION,
    namespaced=True,
    decode=_raw,
)
