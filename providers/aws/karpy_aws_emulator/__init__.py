"""AWS without AWS: moto on 127.0.0.1, seeded for a cluster, and a bridge that joins its nodes.

karpy's AWS provider is proven end to end, and shown by ``karpy demo --provider aws``, against
moto's server instead of EC2. This package holds what those runs share:

* :mod:`~karpy_aws_emulator.world`: the seeded account (VPC, subnets, security groups, EKS AMIs
  and their alias parameters), also used by the aws test tier;
* :mod:`~karpy_aws_emulator.server`: moto on loopback only, with fake credentials;
* :mod:`~karpy_aws_emulator.join` (pure) and :mod:`~karpy_aws_emulator.bridge`: the kubelet's
  and the cloud controller's part, a Node for each running instance, deleted when it ends;
* ``python -m karpy_aws_emulator``: all of it in one process, for callers that may not import
  karpy_aws (karpy's demo) or want moto's state apart from their own (the e2e walkthrough).

moto is a development dependency and is imported lazily; without it the server says how to
install it.
"""
