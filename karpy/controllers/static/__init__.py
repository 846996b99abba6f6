"""Static NodePools (`spec.replicas`, the StaticCapacity gate): NodeClaims held at a count."""
