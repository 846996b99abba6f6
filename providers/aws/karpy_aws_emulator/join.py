"""What a kubelet would register for an instance: its Node, from the instance and its user data.

On EC2 an instance boots, reads its user data (nodeadm's NodeConfig on AL2023, bootstrap.sh's
flags on AL2, TOML settings on Bottlerocket) and its kubelet registers a Node: named after the
instance's private DNS name, with providerID ``aws:///<zone>/<instance-id>``, the labels the
kubelet and the cloud controller set (hostname, arch, os, instance type, zone, region) plus the
user data's labels, the user data's taints (karpy always includes
``karpenter.sh/unregistered:NoExecute``), and capacity and allocatable from the hardware and the
kubelet's reservations. moto runs no kubelet, so the emulator's bridge builds that Node here and
kwok (which manages Nodes carrying its annotation) then keeps it Ready. Pure: no I/O.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs
import yaml

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeAddress, NodeSpec, NodeStatus, NodeSystemInfo
from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.cloudprovider.requirements import quantities_from_resources
from karpy_aws.providers.instance import instance_id_of, provider_id
from karpy_aws.providers.instance import parse_instance as parse_ec2_instance
from karpy_aws.providers.instancetype.coretypes import to_resources
from karpy_aws.providers.instancetype.instancetypes import (
    DEFAULT_MAX_PODS,
    InstanceTypeInfo,
    KubeletSettings,
    allocatable,
    capacity,
    overhead,
)

ANNOTATION_CLUSTER: Final = "karpy-emulator/cluster"
"""Marks a Node the bridge made, with the cluster whose instance it stands for."""
_FLAG: Final = re.compile(r"^--(?P<name>[a-z-]+)=(?P<value>.*)$")


@attrs.frozen(kw_only=True)
class Boot:
    """What the user data tells the kubelet that shapes its Node."""

    labels: Mapping[str, str] = attrs.field(factory=dict)
    taints: tuple[Taint, ...] = ()
    kubelet: KubeletSettings = attrs.field(factory=KubeletSettings)


@attrs.frozen(kw_only=True)
class EmulatedInstance:
    """The DescribeInstances facts a kubelet and the cloud controller would use."""

    id: str
    instance_type: str
    zone: str
    state: str
    private_dns_name: str
    private_ip: str
    capacity_type: str = wk.CAPACITY_TYPE_ON_DEMAND


def parse_instance(raw: Mapping[str, Any]) -> EmulatedInstance:
    """One DescribeInstances instance (pure): what the provider reads of it
    (karpy_aws.providers.instance), plus the private DNS name and address its kubelet registers
    with."""
    seen = parse_ec2_instance(raw)
    return EmulatedInstance(
        id=seen.id,
        instance_type=seen.instance_type,
        zone=seen.zone,
        state=seen.state,
        private_dns_name=str(raw.get("PrivateDnsName") or ""),
        private_ip=str(raw.get("PrivateIpAddress") or ""),
        capacity_type=seen.capacity_type,
    )


# ------------------------------------------------------------------ user data


def read_user_data(text: str) -> Boot:
    """The labels, taints and kubelet settings in user data karpy generates (AL2023, AL2 or
    Bottlerocket). Anything else (custom user data) boots a kubelet with its defaults."""
    if text.lstrip().startswith("MIME-Version"):
        message = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
        payload = message.get_payload()
        parts = list(payload) if isinstance(payload, list) else [message]
        for part in reversed(parts):  # karpy's part comes last
            if not isinstance(part, email.message.Message):
                continue
            body = part.get_payload()
            if not isinstance(body, str):
                continue
            if part.get_content_type() == "application/node.eks.aws":
                return _nodeadm(body)
            if "/etc/eks/bootstrap.sh" in body:
                return _bootstrap_sh(body)
        return Boot()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return Boot()
    return _bottlerocket(doc.get("settings", {}).get("kubernetes", {}))


def _nodeadm(payload: str) -> Boot:
    for doc in yaml.safe_load_all(payload):
        if isinstance(doc, Mapping) and doc.get("kind") == "NodeConfig":
            kubelet = doc.get("spec", {}).get("kubelet", {})
            config = kubelet.get("config", {})
            labels: dict[str, str] = {}
            for flag in kubelet.get("flags", []):
                match = _FLAG.match(str(flag))
                if match and match["name"] == "node-labels":
                    labels.update(_pairs(match["value"], "="))
            return Boot(
                labels=labels,
                taints=tuple(
                    _taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"]))
                    for t in config.get("registerWithTaints", [])
                ),
                kubelet=_settings(
                    config.get("maxPods"),
                    kube_reserved=config.get("kubeReserved", {}),
                    system_reserved=config.get("systemReserved", {}),
                    eviction_hard=config.get("evictionHard", {}),
                    eviction_soft=config.get("evictionSoft", {}),
                ),
            )
    return Boot()


def _bootstrap_sh(script: str) -> Boot:
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    extra = (
        words[words.index("--kubelet-extra-args") + 1] if "--kubelet-extra-args" in words else ""
    )
    flags: dict[str, str] = {}
    for word in shlex.split(extra):
        match = _FLAG.match(word)
        if match:
            flags[match["name"]] = match["value"]
    taints = []
    for item in filter(None, flags.get("register-with-taints", "").split(",")):
        key_value, _, effect = item.rpartition(":")
        key, _, value = key_value.partition("=")
        taints.append(_taint(key, value, effect))
    return Boot(
        labels=_pairs(flags.get("node-labels", ""), "="),
        taints=tuple(taints),
        kubelet=_settings(
            flags.get("max-pods"),
            kube_reserved=_pairs(flags.get("kube-reserved", ""), "="),
            system_reserved=_pairs(flags.get("system-reserved", ""), "="),
            eviction_hard=_pairs(flags.get("eviction-hard", ""), "<"),
            eviction_soft=_pairs(flags.get("eviction-soft", ""), "<"),
        ),
    )


def _bottlerocket(kube: Mapping[str, Any]) -> Boot:
    taints = [
        _taint(key, value, effect)
        for key, entries in kube.get("node-taints", {}).items()
        for value, _, effect in (str(e).rpartition(":") for e in entries)
    ]
    return Boot(
        labels={str(k): str(v) for k, v in kube.get("node-labels", {}).items()},
        taints=tuple(taints),
        kubelet=_settings(
            kube.get("max-pods"),
            kube_reserved=kube.get("kube-reserved", {}),
            system_reserved=kube.get("system-reserved", {}),
            eviction_hard=kube.get("eviction-hard", {}),
            eviction_soft=kube.get("eviction-soft", {}),
        ),
    )


def _pairs(text: str, sep: str) -> dict[str, str]:
    return dict(item.split(sep, 1) for item in text.split(",") if sep in item)


def _taint(key: str, value: str, effect: str) -> Taint:
    return Taint(key=key, value=value or None, effect=TaintEffect(effect))


def _settings(
    max_pods: object,
    *,
    kube_reserved: Mapping[str, Any],
    system_reserved: Mapping[str, Any],
    eviction_hard: Mapping[str, Any],
    eviction_soft: Mapping[str, Any],
) -> KubeletSettings:
    def strings(values: Mapping[str, Any]) -> dict[str, str]:
        return {str(k): str(v) for k, v in values.items()}

    return KubeletSettings(
        max_pods=int(str(max_pods)) if max_pods is not None else None,
        kube_reserved=strings(kube_reserved),
        system_reserved=strings(system_reserved),
        eviction_hard=strings(eviction_hard),
        eviction_soft=strings(eviction_soft),
    )


# ------------------------------------------------------------------ the Node


def node_name(instance: EmulatedInstance) -> str:
    """The private DNS name, as EKS nodes are named (the instance id when moto gave none)."""
    return instance.private_dns_name or instance.id


def kubelet_node(
    instance: EmulatedInstance,
    info: InstanceTypeInfo,
    boot: Boot,
    *,
    region: str,
    cluster_name: str,
) -> Node:
    """The Node the instance's kubelet registers, annotated for kwok to run it."""
    name = node_name(instance)
    arch = info.architectures[0] if info.architectures else wk.ARCH_AMD64
    labels = {
        **boot.labels,
        wk.LABEL_HOSTNAME: name,
        wk.LABEL_ARCH: arch,
        wk.LABEL_OS: wk.OS_LINUX,
        wk.LABEL_INSTANCE_TYPE: instance.instance_type,
        wk.LABEL_TOPOLOGY_ZONE: instance.zone,
        wk.LABEL_TOPOLOGY_REGION: region,
    }
    pods = boot.kubelet.max_pods or DEFAULT_MAX_PODS
    cap = capacity(info, pods=pods)
    alloc = allocatable(cap, overhead(cap, kubelet=boot.kubelet))
    addresses = [NodeAddress(type="Hostname", address=name)]
    if instance.private_ip:
        addresses.insert(0, NodeAddress(type="InternalIP", address=instance.private_ip))
    return Node(
        metadata=ObjectMeta(
            name=name,
            labels=labels,
            annotations={
                wk.ANNOTATION_KWOK_NODE: wk.KWOK_NODE_VALUE,
                ANNOTATION_CLUSTER: cluster_name,
            },
        ),
        spec=NodeSpec(provider_id=provider_id(instance.zone, instance.id), taints=boot.taints),
        status=NodeStatus(
            capacity=_quantities(cap),
            allocatable=_quantities(alloc),
            addresses=tuple(addresses),
            node_info=NodeSystemInfo(architecture=arch, operating_system=wk.OS_LINUX),
        ),
    )


def _quantities(values: Mapping[str, int]) -> dict[str, Quantity]:
    return quantities_from_resources(to_resources({k: v for k, v in values.items() if v}))


def by_instance_id(nodes: Iterable[Node], *, cluster_name: str) -> dict[str, Node]:
    """The Nodes the bridge made for ``cluster_name``, by the instance id in their providerID."""
    out: dict[str, Node] = {}
    for node in nodes:
        if node.metadata.annotations.get(ANNOTATION_CLUSTER) != cluster_name:
            continue
        instance_id = instance_id_of(node.spec.provider_id)
        if instance_id is not None:
            out[instance_id] = node
    return out
