"""Node bootstrap user data per AMI family: AL2 (bootstrap.sh), AL2023 (nodeadm), Bottlerocket.

A node joins the cluster only if its user data tells it the endpoint, the CA, its labels and
taints — above all ``karpenter.sh/unregistered:NoExecute``, which keeps pods off the node until
karpy has registered it — and the kubelet settings the scheduler assumed (maxPods, reservations,
eviction). The output is deterministic (fixed MIME boundary, sorted keys) because it is part of
the launch template's hash-based name. Custom user data from the NodeClass is merged in: MIME
parts or a shell script go before karpy's part; Bottlerocket TOML is merged with karpy's settings
winning. Pure: no I/O.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import json
import re
import shlex
import tomllib
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
import yaml

from karpy.apis.v1.labels import TAINT_UNREGISTERED_KEY
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.selectors import Tags, freeze_tags

MIME_BOUNDARY: Final = "//"
BOTTLEROCKET_RAID0_COMMAND: Final = "000-mount-instance-storage"
"""The bootstrap command that puts a Bottlerocket node's instance storage into one array."""
BOTTLEROCKET_RAID0_DIRS: Final = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")
"""What moves onto that array: images, pod volumes and logs (the node's ephemeral storage)."""
Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


@attrs.frozen(kw_only=True)
class Taint:
    """A node taint."""

    key: str
    effect: Effect
    value: str = ""


UNREGISTERED_TAINT: Final = Taint(key=TAINT_UNREGISTERED_KEY, effect="NoExecute")


@attrs.frozen(kw_only=True)
class KubeletConfig:
    """The kubelet settings written into user data (quantities as Kubernetes strings)."""

    max_pods: int
    cluster_dns: tuple[str, ...] = ()
    system_reserved: Tags = attrs.field(default=(), converter=freeze_tags)
    kube_reserved: Tags = attrs.field(default=(), converter=freeze_tags)
    eviction_hard: Tags = attrs.field(default=(), converter=freeze_tags)
    eviction_soft: Tags = attrs.field(default=(), converter=freeze_tags)
    eviction_soft_grace_period: Tags = attrs.field(default=(), converter=freeze_tags)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None


@attrs.frozen(kw_only=True)
class BootstrapOptions:
    """Everything user data needs to join one node to the cluster."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str  # base64 PEM, as EKS DescribeCluster returns it
    kubelet: KubeletConfig
    cluster_cidr: str | None = None  # service CIDR (AL2023 nodeadm wants it)
    ip_family: Literal["ipv4", "ipv6"] = "ipv4"
    """The cluster's family: AL2's bootstrap.sh must be told an IPv6 one and its service CIDR
    (it would otherwise configure IPv4 and guess an IPv4 DNS address)."""
    labels: Tags = attrs.field(default=(), converter=freeze_tags)
    taints: tuple[Taint, ...] = ()
    custom_user_data: str | None = None
    instance_store_raid0: bool = False  # local NVMe disks as one RAID0 array for ephemeral data

    def all_taints(self) -> tuple[Taint, ...]:
        """The taints plus the unregistered taint, de-duplicated, in a stable order."""
        unique = {(t.key, t.value, t.effect): t for t in (*self.taints, UNREGISTERED_TAINT)}
        return tuple(unique[k] for k in sorted(unique))


def render_user_data(family: AMIFamily, options: BootstrapOptions) -> str:
    """The user data (plain text; the launch template stores it base64-encoded)."""
    if family is AMIFamily.AL2:
        return _mime(_al2_script(options), "text/x-shellscript", custom=options.custom_user_data)
    if family is AMIFamily.AL2023:
        return _mime(
            _nodeconfig(options), "application/node.eks.aws", custom=options.custom_user_data
        )
    if family is AMIFamily.BOTTLEROCKET:
        return _bottlerocket(options)
    if family is AMIFamily.CUSTOM:
        return options.custom_user_data or ""
    raise ConfigurationError(
        f"amiFamily {family.value}: generated user data is not available for Windows yet"
    )


# ------------------------------------------------------------------ MIME (AL2, AL2023)


def _custom_parts(custom: str | None) -> list[tuple[str, str]]:
    if not custom:
        return []
    if not custom.lstrip().startswith("MIME-Version"):
        return [("text/x-shellscript", custom)]
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(custom)
    if not message.is_multipart():
        raise ConfigurationError("userData: a MIME document must be multipart/mixed")
    parts = []
    for part in message.get_payload():
        payload = part.get_payload() if isinstance(part, email.message.Message) else None
        if not isinstance(part, email.message.Message) or not isinstance(payload, str):
            raise ConfigurationError("userData: nested multipart documents are not supported")
        parts.append((part.get_content_type(), payload))
    return parts


def _mime(body: str, content_type: str, *, custom: str | None) -> str:
    lines = [
        "MIME-Version: 1.0",
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"',
        "",
    ]
    for kind, payload in [*_custom_parts(custom), (content_type, body)]:
        lines += [f"--{MIME_BOUNDARY}", f'Content-Type: {kind}; charset="us-ascii"', ""]
        lines.append(payload.rstrip("\n"))
        lines.append("")
    lines.append(f"--{MIME_BOUNDARY}--")
    return "\n".join(lines) + "\n"


def _pairs(pairs: Tags, sep: str = "=") -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in pairs)


def _taint_flag(taints: tuple[Taint, ...]) -> str:
    return ",".join(f"{t.key}={t.value}:{t.effect}" for t in taints)


def _al2_script(options: BootstrapOptions) -> str:
    k = options.kubelet
    extra = [f"--node-labels={_pairs(options.labels)}"] if options.labels else []
    extra.append(f"--register-with-taints={_taint_flag(options.all_taints())}")
    extra.append(f"--max-pods={k.max_pods}")
    for flag, pairs, sep in (
        ("--system-reserved", k.system_reserved, "="),
        ("--kube-reserved", k.kube_reserved, "="),
        ("--eviction-hard", k.eviction_hard, "<"),
        ("--eviction-soft", k.eviction_soft, "<"),
        ("--eviction-soft-grace-period", k.eviction_soft_grace_period, "="),
    ):
        if pairs:
            extra.append(f"{flag}={_pairs(pairs, sep)}")
    for flag, value in (
        ("--eviction-max-pod-grace-period", k.eviction_max_pod_grace_period),
        ("--image-gc-high-threshold", k.image_gc_high_threshold_percent),
        ("--image-gc-low-threshold", k.image_gc_low_threshold_percent),
    ):
        if value is not None:
            extra.append(f"{flag}={value}")
    if k.cpu_cfs_quota is not None:
        extra.append(f"--cpu-cfs-quota={str(k.cpu_cfs_quota).lower()}")
    lines = [
        f"/etc/eks/bootstrap.sh {shlex.quote(options.cluster_name)}",
        f"--apiserver-endpoint {shlex.quote(options.cluster_endpoint)}",
        f"--b64-cluster-ca {shlex.quote(options.ca_bundle)}",
    ]
    if options.ip_family == "ipv6":
        lines.append("--ip-family ipv6")
        if options.cluster_cidr:
            lines.append(f"--service-ipv6-cidr {shlex.quote(options.cluster_cidr)}")
    if k.cluster_dns:
        lines.append(f"--dns-cluster-ip {shlex.quote(k.cluster_dns[0])}")
    lines.append("--use-max-pods false")
    if options.instance_store_raid0:
        lines.append("--local-disks raid0")
    lines.append(f"--kubelet-extra-args {shlex.quote(' '.join(extra))}")
    return "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
            " \\\n".join(lines),
        ]
    )


def _kubelet_config(k: KubeletConfig) -> dict[str, Any]:
    config: dict[str, Any] = {"maxPods": k.max_pods}
    if k.cluster_dns:
        config["clusterDNS"] = list(k.cluster_dns)
    for key, pairs in (
        ("systemReserved", k.system_reserved),
        ("kubeReserved", k.kube_reserved),
        ("evictionHard", k.eviction_hard),
        ("evictionSoft", k.eviction_soft),
        ("evictionSoftGracePeriod", k.eviction_soft_grace_period),
    ):
        if pairs:
            config[key] = dict(pairs)
    for key, value in (
        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period),
        ("imageGCHighThresholdPercent", k.image_gc_high_threshold_percent),
        ("imageGCLowThresholdPercent", k.image_gc_low_threshold_percent),
        ("cpuCFSQuota", k.cpu_cfs_quota),
    ):
        if value is not None:
            config[key] = value
    return config


def _nodeconfig(options: BootstrapOptions) -> str:
    cluster: dict[str, Any] = {
        "name": options.cluster_name,
        "apiServerEndpoint": options.cluster_endpoint,
        "certificateAuthority": options.ca_bundle,
    }
    if options.cluster_cidr:
        cluster["cidr"] = options.cluster_cidr
    config = _kubelet_config(options.kubelet)
    config["registerWithTaints"] = [
        {"key": t.key, "value": t.value, "effect": t.effect} if t.value else
        {"key": t.key, "effect": t.effect}
        for t in options.all_taints()
    ]  # fmt: skip
    kubelet: dict[str, Any] = {"config": config}
    if options.labels:
        kubelet["flags"] = [f"--node-labels={_pairs(options.labels)}"]
    spec: dict[str, Any] = {"cluster": cluster, "kubelet": kubelet}
    if options.instance_store_raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    document = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    return "---\n" + yaml.safe_dump(document, sort_keys=True, default_flow_style=False)


# ------------------------------------------------------------------ Bottlerocket (TOML)


def _bottlerocket(options: BootstrapOptions) -> str:
    try:
        doc: dict[str, Any] = tomllib.loads(options.custom_user_data or "")
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"userData: not valid TOML for Bottlerocket: {e}") from e
    k = options.kubelet
    kube = doc.setdefault("settings", {}).setdefault("kubernetes", {})
    kube.update(
        {
            "api-server": options.cluster_endpoint,
            "cluster-certificate": options.ca_bundle,
            "cluster-name": options.cluster_name,
            "max-pods": k.max_pods,
        }
    )
    if k.cluster_dns:
        kube["cluster-dns-ip"] = list(k.cluster_dns)
    kube.setdefault("node-labels", {}).update(dict(options.labels))
    taints: dict[str, list[str]] = kube.setdefault("node-taints", {})
    for t in options.all_taints():
        values = taints.setdefault(t.key, [])
        if f"{t.value}:{t.effect}" not in values:
            values.append(f"{t.value}:{t.effect}")
    for key, pairs in (
        ("system-reserved", k.system_reserved),
        ("kube-reserved", k.kube_reserved),
        ("eviction-hard", k.eviction_hard),
        ("eviction-soft", k.eviction_soft),
        ("eviction-soft-grace-period", k.eviction_soft_grace_period),
    ):
        if pairs:
            kube.setdefault(key, {}).update(dict(pairs))
    for key, value in (
        ("eviction-max-pod-grace-period", k.eviction_max_pod_grace_period),
        ("image-gc-high-threshold-percent", k.image_gc_high_threshold_percent),
        ("image-gc-low-threshold-percent", k.image_gc_low_threshold_percent),
        ("cpu-cfs-quota-enforced", k.cpu_cfs_quota),
    ):
        if value is not None:
            kube[key] = value
    if options.instance_store_raid0:
        commands = doc["settings"].setdefault("bootstrap-commands", {})
        commands[BOTTLEROCKET_RAID0_COMMAND] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                ["apiclient", "ephemeral-storage", "bind", "--dirs", *BOTTLEROCKET_RAID0_DIRS],
            ],
            "mode": "always",
            "essential": True,
        }
    return dump_toml(doc)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise ConfigurationError(f"userData: cannot write {type(value).__name__} values to TOML")


def dump_toml(doc: Mapping[str, Any], path: tuple[str, ...] = ()) -> str:
    """Write nested tables of scalars and lists as TOML, keys sorted (pure)."""
    scalars = [(k, v) for k, v in sorted(doc.items()) if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in sorted(doc.items()) if isinstance(v, Mapping)]
    out = []
    if path and (scalars or not tables):
        out.append("[" + ".".join(_key(p) for p in path) + "]")
    out += [f"{_key(k)} = {_value(v)}" for k, v in scalars]
    text = "\n".join(out) + ("\n" if out else "")
    for k, v in tables:
        text += ("\n" if text else "") + dump_toml(v, (*path, k))
    return text
