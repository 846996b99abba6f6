"""Test helpers shipped with karpy so that providers, benchmarks and scenarios can reuse them."""
