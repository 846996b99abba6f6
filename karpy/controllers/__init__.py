"""Reconcile loops: each reads ClusterState, decides with the pure core, writes via karpy.kube."""
