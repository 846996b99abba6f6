"""`karpy convert`: Karpenter v0.x manifests to v1, offline (docs/migration.md)."""
