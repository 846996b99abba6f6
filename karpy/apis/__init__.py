"""The data karpy exchanges with Kubernetes: frozen attrs models, constants and the codec.

Nothing here performs I/O; every other layer may import it.
"""
