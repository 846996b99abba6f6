"""Fields whose wire names are not plain camelCase keep Kubernetes' spelling."""

from __future__ import annotations

from karpy.apis.codec import from_dict, to_dict
from karpy.apis.kube.pod import ContainerPort


def test_container_port_host_ip_uses_kubernetes_spelling() -> None:
    wire = {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1", "protocol": "TCP"}
    port = from_dict(ContainerPort, wire)
    assert port.host_ip == "10.0.0.1"
    assert to_dict(port) == wire
