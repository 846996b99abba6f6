"""Controllers that act on Nodes karpy manages: draining and terminating them."""
