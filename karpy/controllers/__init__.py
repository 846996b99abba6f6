"""Reconcile loops: each reads cluster state through a ClusterView, decides with the pure core,
writes via karpy.kube."""
