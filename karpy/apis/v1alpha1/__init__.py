"""karpenter.kwok.sh/v1alpha1: the NodeClass of the kwok provider (simulated nodes)."""
