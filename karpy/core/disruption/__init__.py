"""Pure disruption decisions: which NodeClaims a voluntary disruption method may remove now.

Kept in the core so budgets and candidate rules can be tested exhaustively without a cluster.
"""
