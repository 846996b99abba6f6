"""The subset of core Kubernetes kinds karpy reads, as frozen attrs models.

Pods, Nodes, DaemonSets, PodDisruptionBudgets, volumes and Leases are decoded at the kube
adapter boundary with `karpy.apis.codec`, so the rest of karpy never sees a raw dict.
"""
