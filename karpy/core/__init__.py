"""The pure scheduling core: values in, values out.

Nothing here performs I/O, reads a clock, logs, traces or draws unseeded random numbers, so every
decision the core makes can be replayed from its inputs, tested without a cluster and benchmarked.
"""
