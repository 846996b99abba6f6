"""AWS without AWS: moto on 127.0.0.1, seeded for a cluster, and a bridge that joins its nodes.

karpy's AWS provider is proven end to end, and shown by ``karpy demo --provider aws``, against
moto's server instead of EC2. This package holds what those runs share: the seeded account
(:mod:`~karpy_aws.emulator.world`), the loopback-only server (:mod:`~karpy_aws.emulator.server`)
and, for instances moto launches, the kubelet's part: a Node joins the cluster for each one and
leaves when it is terminated. moto is a development dependency and is imported lazily.
"""
