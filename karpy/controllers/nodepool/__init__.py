"""Controllers that keep NodePools' derived state: the template hash annotations and status."""
