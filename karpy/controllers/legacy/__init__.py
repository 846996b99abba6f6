"""Karpenter v0.x kinds kept as owned v1 objects (docs/migration.md)."""
