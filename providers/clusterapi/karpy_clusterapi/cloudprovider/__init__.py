"""ClusterAPICloudProvider (`provider`)."""
