"""The in-memory view of the cluster that controllers decide from, fed by informers."""
