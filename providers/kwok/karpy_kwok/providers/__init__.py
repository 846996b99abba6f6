"""The simulated cloud the kwok provider and its loops draw on, one noun each.

kwok's "instances" are Node objects (``instance``: launching, reading and deleting them, and
the launches still waiting out their registration delay), converted to and from NodeClaims by
``nodes``; ``nodeclass`` reads the KWOKNodeClass a launch needs. None of them runs a loop: the
passes in ``karpy_kwok.controllers`` do.
"""
