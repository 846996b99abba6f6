"""``karpy simulate`` / ``karpy explain``: scenario files in, plans and explanations out.

This package reads files and prints; it sits above the pure core, which it only calls.
"""
