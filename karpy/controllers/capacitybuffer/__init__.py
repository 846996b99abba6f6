"""CapacityBuffers: resolve each and write its status as Cluster Autoscaler does."""
