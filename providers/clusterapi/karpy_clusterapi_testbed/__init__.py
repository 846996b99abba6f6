"""A Cluster API management setup on one local cluster: Cluster API's real core controller
manager, and a small infrastructure stand-in that provisions its Machines and registers a kwok
Node for each.

``karpy demo --provider clusterapi`` and the tests start it as a subprocess,
``python -m karpy_clusterapi_testbed`` (karpy may not import a provider), and the provider's own
tests use its pieces directly. It ships beside the provider, not in it
(``karpy_clusterapi`` never imports it): an operator's fleet brings real infrastructure.

* ``manager``: Cluster API's CRDs and webhooks installed with a certificate made by openssl
  (no cert-manager), and its manager run against the cluster;
* ``infrastructure``: the stand-in's kinds and its loop (why a stand-in, and what it does);
* ``fleet``: manifests of a Cluster and of MachineDeployments on the stand-in, and the demo's
  fleet.
"""
