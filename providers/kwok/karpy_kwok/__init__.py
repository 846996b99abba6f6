"""karpy's embedded simulated provider: "launches" kwok-managed Node objects from a catalog.

Registered under the entry-point group ``karpy.providers``; karpy itself never imports it.
"""
