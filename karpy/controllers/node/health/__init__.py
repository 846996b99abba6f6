"""The node health controller: node repair behind the NodeRepair feature gate."""
