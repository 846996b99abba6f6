"""Karpenter v0.x API (karpenter.sh/v1alpha5), served for migration; see docs/migration.md."""
