"""The disruption singleton and its orchestration queue: voluntary removal of nodes (Emptiness,
Drift, multi- and single-node Consolidation, in Karpenter's order) within the NodePools'
disruption budgets, replacing before deleting."""
