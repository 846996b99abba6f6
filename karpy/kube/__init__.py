"""The Kubernetes adapter: the only package that imports kubernetes_asyncio.

Everything that crosses this package's boundary is a typed value (decoded by a per-kind decoder) or
a karpy exception; raw JSON dicts and SDK objects stay inside.
"""
