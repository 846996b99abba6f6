"""karpenter.kwok.sh/v1alpha1: the KWOKNodeClass, the kwok provider's NodeClass (simulated nodes).

The model lives with the provider that owns the kind; karpy finds it, for its CRDs and API
reference, through the ``karpy.apis`` entry point (:mod:`karpy_kwok.apis.crds`).
"""
