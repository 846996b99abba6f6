"""The disruption singleton: voluntary removal of nodes (Emptiness so far) within budgets."""
