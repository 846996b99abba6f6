"""karpenter.cluster.x-k8s.io/v1alpha1: the ClusterAPINodeClass, as the Karpenter community's
Cluster API provider spells it, and the Cluster API labels and annotations the provider reads
and writes.

karpy finds the CRD through the ``karpy.apis`` entry point (:mod:`karpy_clusterapi.apis.crds`).
"""
