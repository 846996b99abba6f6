"""The AWS account moto starts with: a VPC, subnets, security groups, EKS AMIs and their aliases.

moto knows none of what a cluster's nodes need — no EKS AMIs, no SSM alias parameters, no
subnets or security groups tagged for discovery — so every run against it (the aws test tier,
the end-to-end walkthrough and ``karpy demo --provider aws``) seeds the same world from here.
AMIs reach moto through ``MOTO_AMIS_PATH`` (read once, when moto's EC2 models are imported; see
:mod:`karpy_aws_emulator.server`); everything else is created through the ordinary API, except
alias parameters under ``/aws/``, which moto refuses to write and which are therefore put into
the in-process backend directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs
import botocore.session

REGION: Final = "us-west-2"
ACCOUNT: Final = "123456789012"
"""moto's one account."""
AMAZON_OWNER: Final = "137112412989"

AMI_IDS: Final = {
    "al2023x86old": "ami-00000000000000001",
    "al2023x86new": "ami-00000000000000002",
    "al2023arm": "ami-00000000000000003",
    "al2023gpu": "ami-00000000000000004",
    "al2023neuron": "ami-00000000000000005",
    "al2x86": "ami-00000000000000006",
    "al2arm": "ami-00000000000000007",
    "al2gpu": "ami-00000000000000008",
    "brx86": "ami-00000000000000009",
    "brarm": "ami-0000000000000000a",
    "brnvidia": "ami-0000000000000000b",
    "custom1": "ami-0000000000000000c",
    "custom2": "ami-0000000000000000d",
    "customarm": "ami-0000000000000000e",
}

_FEB: Final = "2026-02-01T00:00:00.000Z"
_EC2_TRUST: Final = (
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow",'
    '"Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}'
)


def _ami(ami_id: str, name: str, arch: str, created: str, owner: str = "amazon") -> dict[str, Any]:
    return {
        "ami_id": ami_id,
        "name": name,
        "description": name,
        "architecture": arch,
        "owner_id": ACCOUNT if owner == "self" else AMAZON_OWNER,
        "root_device_name": "/dev/xvda",
        "root_device_type": "ebs",
        "virtualization_type": "hvm",
        "hypervisor": "xen",
        "state": "available",
        "creation_date": created,
        "public": owner != "self",
    }


AMIS: Final = (
    _ami(
        AMI_IDS["al2023x86old"],
        "amazon-eks-node-al2023-x86_64-standard-1.31-v20260101",
        "x86_64",
        "2026-01-01T00:00:00.000Z",
    ),
    _ami(
        AMI_IDS["al2023x86new"],
        "amazon-eks-node-al2023-x86_64-standard-1.31-v20260201",
        "x86_64",
        _FEB,
    ),
    _ami(
        AMI_IDS["al2023arm"], "amazon-eks-node-al2023-arm64-standard-1.31-v20260201", "arm64", _FEB
    ),
    _ami(
        AMI_IDS["al2023gpu"], "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20260201", "x86_64", _FEB
    ),
    _ami(
        AMI_IDS["al2023neuron"],
        "amazon-eks-node-al2023-x86_64-neuron-1.31-v20260201",
        "x86_64",
        _FEB,
    ),
    _ami(AMI_IDS["al2x86"], "amazon-eks-node-1.31-v20260201", "x86_64", _FEB),
    _ami(AMI_IDS["al2arm"], "amazon-eks-arm64-node-1.31-v20260201", "arm64", _FEB),
    _ami(AMI_IDS["al2gpu"], "amazon-eks-gpu-node-1.31-v20260201", "x86_64", _FEB),
    _ami(AMI_IDS["brx86"], "bottlerocket-aws-k8s-1.31-x86_64-v1.30.0", "x86_64", _FEB),
    _ami(AMI_IDS["brarm"], "bottlerocket-aws-k8s-1.31-aarch64-v1.30.0", "arm64", _FEB),
    _ami(AMI_IDS["brnvidia"], "bottlerocket-aws-k8s-1.31-nvidia-x86_64-v1.30.0", "x86_64", _FEB),
    _ami(AMI_IDS["custom1"], "team-node-v1", "x86_64", "2026-01-10T00:00:00.000Z", owner="self"),
    _ami(AMI_IDS["custom2"], "team-node-v2", "x86_64", "2026-01-20T00:00:00.000Z", owner="self"),
    _ami(
        AMI_IDS["customarm"], "team-node-arm-v1", "arm64", "2026-01-15T00:00:00.000Z", owner="self"
    ),
)
"""Records in moto's ``MOTO_AMIS_PATH`` format: EKS AL2023/AL2/Bottlerocket images (an older
AL2023 x86 one among them) and three of the account's own."""


def alias_parameters(kubernetes_version: str) -> dict[str, str]:
    """SSM parameter names (without the ``/aws/service`` prefix) -> AMI id, for the AMI aliases
    of one Kubernetes ``<major>.<minor>``."""
    eks = f"eks/optimized-ami/{kubernetes_version}"
    al2023 = f"{eks}/amazon-linux-2023"
    rocket = f"bottlerocket/aws-k8s-{kubernetes_version}"
    return {
        f"{al2023}/x86_64/standard/recommended/image_id": AMI_IDS["al2023x86new"],
        f"{al2023}/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-"
        f"{kubernetes_version}-v20260101/image_id": AMI_IDS["al2023x86old"],
        f"{al2023}/arm64/standard/recommended/image_id": AMI_IDS["al2023arm"],
        f"{al2023}/x86_64/nvidia/recommended/image_id": AMI_IDS["al2023gpu"],
        f"{al2023}/x86_64/neuron/recommended/image_id": AMI_IDS["al2023neuron"],
        f"{eks}/amazon-linux-2/recommended/image_id": AMI_IDS["al2x86"],
        f"{eks}/amazon-linux-2-arm64/recommended/image_id": AMI_IDS["al2arm"],
        f"{eks}/amazon-linux-2-gpu/recommended/image_id": AMI_IDS["al2gpu"],
        f"{rocket}/x86_64/latest/image_id": AMI_IDS["brx86"],
        f"{rocket}/arm64/latest/image_id": AMI_IDS["brarm"],
        f"{rocket}-nvidia/x86_64/latest/image_id": AMI_IDS["brnvidia"],
    }


@attrs.frozen
class World:
    """What was seeded: the endpoint it lives at and the ids moto gave it."""

    endpoint: str
    vpc_id: str
    subnets: Mapping[str, str]
    """Seed name -> subnet id: ``a``, ``a-small``, ``b``, ``c`` (discovered), ``d`` and
    ``public`` (not discovered)."""
    security_groups: Mapping[str, str]
    """Seed name -> group id: ``nodes`` (discovered), ``extra`` and ``other``."""


def _tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def seed(
    endpoint: str,
    *,
    discovery: Mapping[str, str],
    kubernetes_versions: Iterable[str],
    ssm_prefix: str = "/aws/service",
    node_role: str | None = None,
) -> World:
    """Create the world in the moto server at ``endpoint`` (running in this process when
    ``ssm_prefix`` is under ``/aws/``). Subnets in us-west-2a/b/c and the ``nodes`` security
    group carry the ``discovery`` tags; alias parameters are written for every version; the IAM
    role ``node_role`` (for EC2NodeClass ``role``) is created when given."""
    # botocore's synchronous client is the simplest tool for one-off seeding.
    kw: dict[str, Any] = {"region_name": REGION, "endpoint_url": endpoint}
    sdk = botocore.session.get_session()
    ec2 = sdk.create_client("ec2", **kw)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    layout = [
        ("a", "us-west-2a", "10.0.1.0/24", {**discovery, "Name": "private-a"}),
        ("a-small", "us-west-2a", "10.0.9.0/26", {**discovery, "Name": "private-a-small"}),
        ("b", "us-west-2b", "10.0.2.0/24", {**discovery, "Name": "private-b", "tier": "x"}),
        ("c", "us-west-2c", "10.0.3.0/24", {**discovery, "Name": "private-c"}),
        # Not discovered: only NodeClasses that name it launch in us-west-2d.
        ("d", "us-west-2d", "10.0.4.0/24", {"karpy-test/extra": "d", "Name": "private-d"}),
        ("public", "us-west-2a", "10.0.100.0/24", {"Name": "public-a", "tier": "public"}),
    ]
    subnets = {}
    for name, zone, cidr, tags in layout:
        created = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)
        subnets[name] = created["Subnet"]["SubnetId"]
        ec2.create_tags(Resources=[subnets[name]], Tags=_tags(tags))
    groups = {}
    for name, tags in [
        ("nodes", {**discovery, "Name": "nodes"}),
        ("extra", {"team": "blue"}),
        ("other", {"team": "red"}),
    ]:
        created = ec2.create_security_group(GroupName=f"sg-{name}", Description=name, VpcId=vpc)
        groups[name] = created["GroupId"]
        ec2.create_tags(Resources=[groups[name]], Tags=_tags(tags))
    ec2.create_tags(
        Resources=[AMI_IDS["custom1"], AMI_IDS["custom2"]],
        Tags=_tags({"team": "blue", "os": "linux"}),
    )
    ec2.create_tags(Resources=[AMI_IDS["customarm"]], Tags=_tags({"team": "blue"}))
    parameters = {
        f"{ssm_prefix}/{suffix}": value
        for version in kubernetes_versions
        for suffix, value in alias_parameters(version).items()
    }
    if ssm_prefix.lower().startswith("/aws/"):
        _put_reserved(parameters)
    else:
        ssm = sdk.create_client("ssm", **kw)
        for name, value in parameters.items():
            ssm.put_parameter(Name=name, Value=value, Type="String")
    if node_role is not None:
        sdk.create_client("iam", **kw).create_role(
            RoleName=node_role, AssumeRolePolicyDocument=_EC2_TRUST
        )
    return World(endpoint=endpoint, vpc_id=vpc, subnets=subnets, security_groups=groups)


def _put_reserved(parameters: Mapping[str, str]) -> None:
    """Write parameters under ``/aws/`` into moto's in-process SSM backend, as AWS publishes
    them; PutParameter refuses those names (moto-notes: "ssm PutParameter under /aws/")."""
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    store = ssm_backends[ACCOUNT][REGION]._parameters  # private: there is no public way in
    make: Any = Parameter  # a CloudFormation model; mypy sees its abstract hooks
    for name, value in parameters.items():
        store[name].append(
            make(
                account_id=ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=len(store[name]) + 1,
                data_type="aws:ec2:image",
                tier="Standard",
            )
        )
