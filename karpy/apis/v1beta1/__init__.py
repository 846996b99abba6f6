"""Karpenter v0.32-v0.37 API (karpenter.sh/v1beta1), served beside v1 and converted both ways."""
