"""The codec's wire rules, one test per rule in karpy.apis.codec's docstring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from karpy.apis.codec import DecodeError, decode, encode, format_time, to_dict, unknown_fields
from karpy.apis.duration import parse_duration
from karpy.apis.kube.coordination import Lease, LeaseSpec
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import PodDisruptionBudget
from karpy.apis.meta import ObjectMeta
from karpy.apis.registry import decode_object
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimStatus
from karpy.apis.v1.nodepool import ConsolidationPolicy, NodePool
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default", "creationTimestamp": "2024-08-01T10:00:00Z"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                ],
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
            }
        },
        "limits": {"cpu": 1000, "memory": "1000Gi"},
    },
}


def test_missing_fields_take_karpenters_defaults() -> None:
    pool = decode(NodePool, NODEPOOL)
    assert (
        pool.spec.disruption.consolidation_policy is ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    )
    assert pool.spec.disruption.consolidate_after == "0s"
    assert [b.nodes for b in pool.spec.disruption.budgets] == ["10%"]
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.spec.weight is None


def test_wire_names_are_camel_case_with_declared_exceptions() -> None:
    claim = NodeClaimStatus(provider_id="aws:///us-west-2a/i-0abc", image_id="ami-1", node_name="n")
    assert to_dict(claim) == {
        "providerID": "aws:///us-west-2a/i-0abc",
        "imageID": "ami-1",
        "nodeName": "n",
    }
    node = decode(Node, {"spec": {"providerID": "kwok://n1"}})
    assert node.spec.provider_id == "kwok://n1"


def test_none_and_empty_collections_are_omitted_but_empty_objects_kept() -> None:
    out = to_dict(decode(NodePool, NODEPOOL))
    template = out["spec"]["template"]
    assert "taints" not in template["spec"]
    assert "terminationGracePeriod" not in template["spec"]
    assert "weight" not in out["spec"]
    assert "status" not in out  # empty, like its default


def test_times_are_rfc3339_utc_with_z() -> None:
    assert format_time(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2024-01-02T03:04:05Z"
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2024, 1, 2, 5, 4, 5, tzinfo=plus_two)) == "2024-01-02T03:04:05Z"
    micro = datetime(2024, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)
    assert format_time(micro) == "2024-01-02T03:04:05.120000Z"
    pool = decode(NodePool, NODEPOOL)
    assert pool.metadata.creation_timestamp == datetime(2024, 8, 1, 10, 0, tzinfo=UTC)


def test_micro_times_round_trip() -> None:
    renew = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    lease = Lease(spec=LeaseSpec(holder_identity="karpy-0", renew_time=renew))
    assert orjson.loads(encode(lease))["spec"]["renewTime"] == "2024-01-02T03:04:05.123456Z"
    assert decode(Lease, encode(lease)) == lease


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="no timezone"):
        format_time(datetime(2024, 1, 1))  # noqa: DTZ001 - the naive value under test
    with pytest.raises(DecodeError, match="creationTimestamp"):
        decode(Pod, {"metadata": {"creationTimestamp": "2024-01-01T00:00:00"}})


def test_quantities_keep_their_exact_string_and_accept_numbers() -> None:
    pool = decode(NodePool, NODEPOOL)
    assert pool.spec.limits == {"cpu": "1000", "memory": "1000Gi"}
    assert to_dict(pool)["spec"]["limits"] == {"cpu": "1000", "memory": "1000Gi"}


def test_int_or_string_is_kept_as_given() -> None:
    pdb = decode(PodDisruptionBudget, {"spec": {"minAvailable": 2, "maxUnavailable": "50%"}})
    assert pdb.spec.min_available == 2
    assert pdb.spec.max_unavailable == "50%"
    assert to_dict(pdb)["spec"] == {"minAvailable": 2, "maxUnavailable": "50%"}
    with pytest.raises(DecodeError, match=r"minAvailable"):
        decode(PodDisruptionBudget, {"spec": {"minAvailable": 1.5}})


def test_unknown_fields_are_ignored() -> None:
    data = {**NODEPOOL, "spec": {**NODEPOOL["spec"], "futureField": {"x": 1}}}
    assert decode(NodePool, data) == decode(NodePool, NODEPOOL)


def test_sequences_decode_to_tuples_and_models_are_frozen() -> None:
    pool = decode(NodePool, NODEPOOL)
    assert isinstance(pool.spec.template.spec.requirements, tuple)
    with pytest.raises(AttributeError):
        pool.spec.weight = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        pytest.param({"spec": {"template": {}}}, "$.spec.template.spec", id="missing-required"),
        pytest.param(
            {"spec": {**NODEPOOL["spec"], "weight": "10"}}, "$.spec.weight", id="wrong-type"
        ),
        pytest.param(
            {
                "spec": {
                    "template": {
                        "spec": {
                            **NODEPOOL["spec"]["template"]["spec"],
                            "nodeClassRef": {"group": "g", "kind": "k"},
                        }
                    }
                }
            },
            "$.spec.template.spec.nodeClassRef.name",
            id="wire-name-in-path",
        ),
        pytest.param(
            {"spec": {**NODEPOOL["spec"], "disruption": {"consolidationPolicy": "Sometimes"}}},
            "$.spec.disruption.consolidationPolicy",
            id="bad-enum",
        ),
    ],
)
def test_decode_errors_name_the_kind_and_wire_path(data: dict[str, object], path: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(NodePool, data)
    assert info.value.kind == "NodePool"
    assert any(p.endswith("@ " + path) for p in info.value.problems), info.value.problems


def test_decode_refuses_non_objects() -> None:
    with pytest.raises(DecodeError, match="expected an object"):
        decode(NodePool, b"[1, 2]")


def test_decode_object_dispatches_on_api_version_and_kind() -> None:
    assert isinstance(decode_object(NODEPOOL), NodePool)
    assert isinstance(decode_object({"apiVersion": "v1", "kind": "Node"}), Node)
    with pytest.raises(KeyError, match="v1alpha9"):
        decode_object({"apiVersion": "karpenter.sh/v1alpha9", "kind": "NodePool"})
    with pytest.raises(DecodeError, match="apiVersion and kind"):
        decode_object({"kind": "Node"})


def test_ec2nodeclass_defaults_and_irregular_wire_names() -> None:
    nc = decode(
        EC2NodeClass,
        {
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                "securityGroupSelectorTerms": [{"id": "sg-123"}],
                "role": "KarpenterNodeRole",
                "associatePublicIPAddress": False,
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "kmsKeyID": "k"}}
                ],
                "kubelet": {"clusterDNS": ["10.0.0.10"], "cpuCFSQuota": True},
            }
        },
    )
    assert nc.spec.metadata_options.http_put_response_hop_limit == 1
    assert nc.spec.metadata_options.http_tokens == "required"
    assert nc.spec.associate_public_ip_address is False
    ebs = nc.spec.block_device_mappings[0].ebs
    assert ebs is not None
    assert ebs.kms_key_id == "k"
    out = to_dict(nc)["spec"]
    assert out["kubelet"] == {"clusterDNS": ["10.0.0.10"], "cpuCFSQuota": True}
    assert out["metadataOptions"]["httpProtocolIPv6"] == "disabled"


def test_object_meta_and_nodeclaim_round_trip_through_bytes() -> None:
    claim = decode(
        NodeClaim,
        {
            "metadata": {"name": "default-abcde", "finalizers": ["karpenter.sh/termination"]},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}
                ],
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "d",
                },
            },
        },
    )
    assert claim.metadata == ObjectMeta(
        name="default-abcde", finalizers=("karpenter.sh/termination",)
    )
    assert decode(NodeClaim, encode(claim)) == claim


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0), ("720h", 720 * 3600), ("1h30m", 5400), ("90s", 90), ("Never", None)],
)
def test_parse_duration(text: str, seconds: int | None) -> None:
    parsed = parse_duration(text, field_name="expireAfter")
    assert (parsed.total_seconds() if parsed is not None else None) == seconds


@pytest.mark.parametrize("text", ["", "5", "1d", "h", "1h 2m", "never", "-5m"])
def test_parse_duration_names_the_field(text: str) -> None:
    with pytest.raises(ValueError, match=r"^expireAfter: "):
        parse_duration(text, field_name="expireAfter")


def test_unknown_fields_are_listed_with_their_wire_path_but_not_refused() -> None:
    data = {
        "metadata": {"name": "p", "labls": {}},
        "spec": {
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPot": 8080}]}],
            "affinity": {"nodeAffinty": {}},
        },
    }
    assert unknown_fields(Pod, data) == [
        "$.metadata.labls",
        "$.spec.containers[0].ports[0].hostPot",
        "$.spec.affinity.nodeAffinty",
    ]
    assert decode(Pod, data).metadata.name == "p"
