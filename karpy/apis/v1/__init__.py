"""Karpenter v1 API (karpenter.sh/v1, karpenter.k8s.aws/v1) as frozen attrs models."""
