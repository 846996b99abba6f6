"""MachineDeployments as instance types: what one of their machines offers, where, at what price,
and whether the MachineDeployment has room for another.

One instance type per selected MachineDeployment, named after it. Its shape comes from the
cluster-autoscaler's scale-from-zero annotations (``capacity.cluster-autoscaler.kubernetes.io/``
cpu, memory, ephemeral-disk, maxPods, gpu-count, labels, taints), which operators already put on
MachineDeployments for the cluster-autoscaler, and where an annotation is absent from its
infrastructure template's ``status.capacity`` and ``status.nodeInfo`` (Cluster API's
scale-from-zero contract for infrastructure providers); its zone is the template's failure
domain (or the ``default-zone`` setting); its one offering is on-demand, priced by the
MachineDeployment's ``karpenter.cluster.x-k8s.io/price`` annotation or else by the uniform cost
per vCPU and per GiB
of memory (settings), so packing minimises hardware and consolidation can prefer the cheaper
shape. The offering is unavailable while the MachineDeployment is at its
``cluster-api-autoscaler-node-group-max-size``.

Pure: parsing only; a MachineDeployment whose annotations do not parse is reported, by name and
annotation, instead of becoming a type with made-up numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import attrs

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources, parse_resource
from karpy_clusterapi.apis import labels as capi
from karpy_clusterapi.apis.nodeclass import Selector

GPU_RESOURCE: Final = "nvidia.com/gpu"
DEFAULT_MAX_PODS: Final = "110"
GIB: Final = 2**30


class MachineDeploymentError(ValueError):
    """A MachineDeployment's annotations cannot describe its machines (the message names the
    MachineDeployment and the annotation)."""


@attrs.frozen(kw_only=True)
class Pricing:
    """The uniform cost of hardware, for MachineDeployments without a price annotation."""

    per_vcpu: Decimal
    per_gib: Decimal


@attrs.frozen(kw_only=True)
class MachineDeployment:
    """What the provider reads of one MachineDeployment (management cluster)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    replicas: int
    cluster_name: str
    failure_domain: str | None
    template_hash: str
    """Digest of what a machine is made from: version, infrastructure and bootstrap."""
    infrastructure: tuple[str, str, str] | None = None
    """The template's infrastructure reference: (apiGroup, kind, name)."""
    template_capacity: Mapping[str, str] = attrs.field(factory=dict)
    """The infrastructure template's ``status.capacity``, when it was read."""
    template_arch: str | None = None
    """The infrastructure template's ``status.nodeInfo.architecture``, when it was read."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def max_size(self) -> int | None:
        return _size(self, capi.ANNOTATION_MAX_SIZE)

    @property
    def min_size(self) -> int:
        return _size(self, capi.ANNOTATION_MIN_SIZE) or 0

    @property
    def has_room(self) -> bool:
        limit = self.max_size
        return limit is None or self.replicas < limit

    def scale_ups(self) -> dict[str, str]:
        """NodeClaim UID -> when karpy added a replica for it (not yet claimed)."""
        return _ledger(self.annotations, capi.ANNOTATION_SCALE_UP_PREFIX)

    def releases(self) -> dict[str, str]:
        """Machine UID -> Machine name karpy removed a replica for."""
        return _ledger(self.annotations, capi.ANNOTATION_RELEASE_PREFIX)


def _ledger(annotations: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k.removeprefix(prefix): v for k, v in annotations.items() if k.startswith(prefix)}


def _size(md: MachineDeployment, annotation: str) -> int | None:
    value = md.annotations.get(annotation)
    if value is None:
        return None
    try:
        size = int(value)
    except ValueError:
        size = -1
    if size < 0:
        msg = f"machinedeployment {md.key}: annotation {annotation}={value!r} is not a count"
        raise MachineDeploymentError(msg)
    return size


def parse(raw: Mapping[str, Any]) -> MachineDeployment:
    """A v1beta2 MachineDeployment's JSON as the provider reads it."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    infra = template.get("infrastructureRef") or {}
    return MachineDeployment(
        infrastructure=(
            (str(infra.get("apiGroup") or ""), str(infra["kind"]), str(infra["name"]))
            if infra.get("kind") and infra.get("name")
            else None
        ),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        replicas=int(spec.get("replicas") or 0),
        cluster_name=str(spec.get("clusterName") or ""),
        failure_domain=template.get("failureDomain") or None,
        template_hash=template_hash(template),
    )


def template_hash(template_spec: Mapping[str, Any]) -> str:
    """Digest of the machine template's version, infrastructure and bootstrap: what, changed,
    makes machines made earlier drift (Cluster API rolls them out itself on such a change)."""
    bootstrap = template_spec.get("bootstrap") or {}
    infra = template_spec.get("infrastructureRef") or {}
    parts = (
        str(template_spec.get("version") or ""),
        str(infra.get("apiGroup") or ""),
        str(infra.get("kind") or ""),
        str(infra.get("name") or ""),
        str((bootstrap.get("configRef") or {}).get("kind") or ""),
        str((bootstrap.get("configRef") or {}).get("name") or ""),
        str(bootstrap.get("dataSecretName") or ""),
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def selects(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics; an empty selector selects everything."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for expression in selector.match_expressions:
        present = expression.key in labels
        value = labels.get(expression.key)
        match expression.operator:
            case "In":
                ok = present and value in expression.values
            case "NotIn":
                ok = not present or value not in expression.values
            case "Exists":
                ok = present
            case _:
                ok = not present
        if not ok:
            return False
    return True


def node_labels(md: MachineDeployment) -> dict[str, str]:
    """The labels the MachineDeployment's scale-from-zero annotation says its nodes carry."""
    text = md.annotations.get(capi.ANNOTATION_LABELS, "")
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            msg = (
                f"machinedeployment {md.key}: annotation {capi.ANNOTATION_LABELS}: "
                f"{part.strip()!r} is not key=value"
            )
            raise MachineDeploymentError(msg)
        out[key.strip()] = value.strip()
    return out


def node_taints(md: MachineDeployment) -> tuple[Taint, ...]:
    """The taints the MachineDeployment's scale-from-zero annotation says its nodes carry."""
    text = md.annotations.get(capi.ANNOTATION_TAINTS, "")
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        head, sep, effect = part.rpartition(":")
        key, _, value = head.partition("=")
        if not sep or not key or effect not in set(TaintEffect):
            msg = (
                f"machinedeployment {md.key}: annotation {capi.ANNOTATION_TAINTS}: {part!r} is "
                "not key[=value]:NoSchedule|PreferNoSchedule|NoExecute"
            )
            raise MachineDeploymentError(msg)
        out.append(Taint(key=key, value=value or None, effect=TaintEffect(effect)))
    return tuple(out)


def with_template_status(md: MachineDeployment, template: Mapping[str, Any]) -> MachineDeployment:
    """`md` with what its infrastructure template's status says of one machine."""
    status = template.get("status") or {}
    found = status.get("capacity") or {}
    return attrs.evolve(
        md,
        template_capacity={str(k): str(v) for k, v in found.items()},
        template_arch=(status.get("nodeInfo") or {}).get("architecture") or None,
    )


def needs_template(md: MachineDeployment) -> bool:
    """Whether an annotation the shape needs is missing, so the template's status is read."""
    return any(a not in md.annotations for a in (capi.ANNOTATION_CPU, capi.ANNOTATION_MEMORY))


def capacity(md: MachineDeployment) -> Resources:
    """One machine's capacity from the scale-from-zero annotations, else its infrastructure
    template's status.capacity (cpu and memory required from one or the other)."""
    values: dict[str, str] = {}
    for annotation, resource, default in (
        (capi.ANNOTATION_CPU, CPU, None),
        (capi.ANNOTATION_MEMORY, MEMORY, None),
        (capi.ANNOTATION_MAX_PODS, PODS, DEFAULT_MAX_PODS),
        (capi.ANNOTATION_EPHEMERAL_DISK, EPHEMERAL_STORAGE, ""),
        (capi.ANNOTATION_GPU_COUNT, GPU_RESOURCE, ""),
    ):
        value = md.annotations.get(annotation, md.template_capacity.get(resource, default))
        if value is None:
            msg = (
                f"machinedeployment {md.key}: annotation {annotation} (or its infrastructure "
                f"template's status.capacity.{resource}) is required to know its machines' "
                "capacity before one exists"
            )
            raise MachineDeploymentError(msg)
        if not value:
            continue
        try:
            parse_resource(resource, value)
        except ValueError as error:
            msg = f"machinedeployment {md.key}: annotation {annotation}: {error}"
            raise MachineDeploymentError(msg) from error
        values[resource] = value
    return Resources.of(values)


def price(md: MachineDeployment, pricing: Pricing) -> float:
    """The hourly price of one machine: the price annotation, else the uniform cost of its
    vCPUs and GiB of memory."""
    annotated = md.annotations.get(capi.ANNOTATION_PRICE)
    if annotated is not None:
        try:
            value = Decimal(annotated)
        except InvalidOperation:
            value = Decimal(-1)
        if not value.is_finite() or value < 0:
            msg = (
                f"machinedeployment {md.key}: annotation {capi.ANNOTATION_PRICE}={annotated!r} "
                "is not a non-negative number"
            )
            raise MachineDeploymentError(msg)
        return float(value)
    shape = capacity(md)
    vcpus = Decimal(shape.get_amount(CPU)) / 1000
    gib = Decimal(shape.get_amount(MEMORY)) / 1000 / GIB
    return float(vcpus * pricing.per_vcpu + gib * pricing.per_gib)


def instance_type(md: MachineDeployment, *, pricing: Pricing, default_zone: str) -> InstanceType:
    """The instance type a MachineDeployment stands for (MachineDeploymentError when its
    annotations do not say)."""
    announced = node_labels(md)
    owned = sorted(_TYPE_OWNED & set(announced))
    if owned:
        msg = (
            f"machinedeployment {md.key}: annotation {capi.ANNOTATION_LABELS} names {owned[0]}, "
            "which karpy sets itself (the MachineDeployment's name, failure domain, on-demand)"
        )
        raise MachineDeploymentError(msg)
    labels = {
        wk.LABEL_ARCH: md.template_arch or wk.ARCH_AMD64,
        wk.LABEL_OS: wk.OS_LINUX,
        **announced,
        capi.LABEL_MACHINEDEPLOYMENT: md.name,
        capi.LABEL_MACHINEDEPLOYMENT_NAMESPACE: md.namespace,
    }
    shape = capacity(md)
    offering = Offering(
        md.failure_domain or default_zone,
        wk.CAPACITY_TYPE_ON_DEMAND,
        price(md, pricing),
        available=md.has_room,
    )
    return InstanceType.make(md.name, shape, (offering,), labels=labels)


_TYPE_OWNED: Final = frozenset(
    {wk.LABEL_INSTANCE_TYPE, wk.LABEL_TOPOLOGY_ZONE, wk.LABEL_CAPACITY_TYPE}
)
"""Labels the instance type itself decides; a labels annotation may not name them."""
