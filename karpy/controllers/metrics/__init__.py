"""Karpenter's state metrics (nodes, pods, NodePools) and what the cluster costs, observed from
cluster state at scrape time."""
