"""karpy's Cluster API provider: nodes are Machines of MachineDeployments, on any infrastructure
Cluster API drives (vSphere, Proxmox, Metal3, OpenStack, Nutanix, ...).

Registered under the entry-point group ``karpy.providers`` as ``clusterapi`` by its own
distribution, ``karpy-clusterapi``; it uses only karpy's provider API (docs/cloudprovider.md).
Settings are in ``karpy_clusterapi.operator``. Arranged by noun, as karpy's own providers are:

* ``operator``: the entry point's factory and its settings;
* ``cloudprovider``: ClusterAPICloudProvider itself;
* ``controllers``: the loops it declares (NodeClass status, garbage collection);
* ``providers``: the management cluster: MachineDeployments as instance types, the writes that
  scale them by exactly karpy's Machines, NodeClasses and what they select;
* ``apis``: the ClusterAPINodeClass, its CRD, and the labels and annotations it reads and writes.
"""

from __future__ import annotations

from karpy_clusterapi.cloudprovider.provider import ClusterAPICloudProvider, ClusterAPIOptions
from karpy_clusterapi.operator import build, options_from_settings

__all__ = ["ClusterAPICloudProvider", "ClusterAPIOptions", "build", "options_from_settings"]
