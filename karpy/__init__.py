"""karpy: a group-less Kubernetes node autoscaler, wire-compatible with Karpenter v1.

karpy watches pods the scheduler cannot place, packs them onto the cheapest instance types
that fit, launches that capacity through a cloud provider, and removes nodes that are empty,
expired, drifted, unhealthy (with the NodeRepair gate) or replaceable by cheaper ones, within
the NodePools' disruption budgets. This package holds the daemon, its pure scheduling core and
the tools that run a real local control plane for demos and tests; docs/architecture.md maps
its loops.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
