"""Karpenter's alpha API (karpenter.sh/v1alpha1): NodeOverlay, behind the NodeOverlay gate."""
