"""The emulator's kubelet: the Node an instance registers, read back from karpy's own user data.

The bridge must register what a real kubelet would, or karpy's registration and the scheduler
would disagree with it: the labels and taints karpy wrote into user data (the unregistered taint
above all), the instance's providerID, and the allocatable karpy's catalog computed for the type.
Pure: no moto.
"""

from __future__ import annotations

import pytest

from karpy.apis.kube.common import Taint as NodeTaint
from karpy.apis.kube.common import TaintEffect
from karpy.apis.v1 import labels as wk
from karpy.core.resources import CPU, MEMORY, PODS, parse_resource
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.amifamily.userdata import (
    BootstrapOptions,
    KubeletConfig,
    Taint,
    render_user_data,
)
from karpy_aws.providers.instancetype.instancetypes import KubeletSettings, parse_instance_type
from karpy_aws_emulator.join import (
    ANNOTATION_CLUSTER,
    Boot,
    EmulatedInstance,
    by_instance_id,
    kubelet_node,
    read_user_data,
)

pytestmark = pytest.mark.aws

M5_LARGE = parse_instance_type(
    {
        "InstanceType": "m5.large",
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
        "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
        "SupportedUsageClasses": ["on-demand", "spot"],
        "Hypervisor": "nitro",
    }
)
INSTANCE = EmulatedInstance(
    id="i-0123456789abcdef0",
    instance_type="m5.large",
    zone="us-west-2b",
    state="running",
    private_dns_name="ip-10-0-2-7.us-west-2.compute.internal",
    private_ip="10.0.2.7",
)
LABELS = {wk.LABEL_NODEPOOL: "default", "team": "blue"}
UNREGISTERED = NodeTaint(key=wk.TAINT_UNREGISTERED_KEY, effect=TaintEffect.NO_EXECUTE)
DEDICATED = NodeTaint(key="dedicated", value="gpu", effect=TaintEffect.NO_SCHEDULE)


def _user_data(family: AMIFamily) -> str:
    return render_user_data(
        family,
        BootstrapOptions(
            cluster_name="c",
            cluster_endpoint="https://example.test",
            ca_bundle="Q0E=",
            cluster_cidr="172.20.0.0/16",
            labels=LABELS,
            taints=(Taint(key="dedicated", value="gpu", effect="NoSchedule"),),
            kubelet=KubeletConfig(
                max_pods=29,
                system_reserved={"cpu": "100m"},
                eviction_hard={"memory.available": "200Mi"},
            ),
        ),
    )


@pytest.mark.parametrize(
    "family",
    [
        pytest.param(AMIFamily.AL2023, id="al2023-nodeadm"),
        pytest.param(AMIFamily.AL2, id="al2-bootstrap-sh"),
        pytest.param(AMIFamily.BOTTLEROCKET, id="bottlerocket-toml"),
    ],
)
def test_user_data_round_trips_labels_taints_and_kubelet(family: AMIFamily) -> None:
    boot = read_user_data(_user_data(family))
    assert dict(boot.labels) == LABELS
    assert set(boot.taints) == {UNREGISTERED, DEDICATED}
    assert boot.kubelet.max_pods == 29
    assert dict(boot.kubelet.system_reserved) == {"cpu": "100m"}
    assert dict(boot.kubelet.eviction_hard) == {"memory.available": "200Mi"}


def test_custom_user_data_boots_a_default_kubelet() -> None:
    assert read_user_data("#!/bin/bash\necho hello\n") == Boot()


def test_the_node_is_what_the_kubelet_and_cloud_controller_register() -> None:
    boot = read_user_data(_user_data(AMIFamily.AL2023))
    node = kubelet_node(INSTANCE, M5_LARGE, boot, region="us-west-2", cluster_name="c")
    assert node.metadata.name == INSTANCE.private_dns_name
    assert node.spec.provider_id == "aws:///us-west-2b/i-0123456789abcdef0"
    assert set(node.spec.taints) == {UNREGISTERED, DEDICATED}
    assert node.metadata.labels == {
        **LABELS,
        wk.LABEL_HOSTNAME: INSTANCE.private_dns_name,
        wk.LABEL_ARCH: wk.ARCH_AMD64,
        wk.LABEL_OS: wk.OS_LINUX,
        wk.LABEL_INSTANCE_TYPE: "m5.large",
        wk.LABEL_TOPOLOGY_ZONE: "us-west-2b",
        wk.LABEL_TOPOLOGY_REGION: "us-west-2",
    }
    assert node.metadata.annotations[wk.ANNOTATION_KWOK_NODE] == wk.KWOK_NODE_VALUE
    assert node.metadata.annotations[ANNOTATION_CLUSTER] == "c"


def test_allocatable_is_what_the_catalog_promised_the_scheduler() -> None:
    # test_aws_instancetypes: m5.large on AL2023 has 29 pods, 1930m and 8192-615-574-100 MiB.
    node = kubelet_node(
        INSTANCE, M5_LARGE, Boot(kubelet=KubeletSettings(max_pods=29)), region="r", cluster_name="c"
    )
    allocatable = {k: parse_resource(k, v) for k, v in node.status.allocatable.items()}
    assert allocatable[CPU] == 1930
    assert allocatable[MEMORY] == (8192 - 615 - 574 - 100) * 2**20 * 1000
    assert allocatable[PODS] == 29 * 1000
    capacity = {k: parse_resource(k, v) for k, v in node.status.capacity.items()}
    assert capacity[CPU] == 2000


def test_only_the_clusters_own_nodes_are_the_bridges() -> None:
    ours = kubelet_node(INSTANCE, M5_LARGE, Boot(), region="r", cluster_name="c")
    theirs = kubelet_node(INSTANCE, M5_LARGE, Boot(), region="r", cluster_name="other")
    assert by_instance_id([ours, theirs], cluster_name="c") == {INSTANCE.id: ours}
