"""The AWS half of the v1alpha5 -> v1 translation: inline `spec.provider`, AWSNodeTemplate and
kubeletConfiguration -> EC2NodeClass, as Karpenter's v1 migration guide maps them.

Pure functions (declared under the ``karpy.legacy`` entry point as `NODE_CLASSES`), used by the
legacy controller and by `karpy convert`. Selector maps with magic keys (`aws-ids`, `aws::ids`,
`aws::name`, `aws::owners`) become selector-term lists; an unset amiSelector becomes the
family's `@latest` alias; v0.x defaults that v1 changed (IMDS hop limit 2, subnets and security
groups discovered by the `kubernetes.io/cluster/<name>` tag) are written out explicitly, so a
translated node launches as the v0.x one did. What v1 cannot express (a user-managed launch
template, Ubuntu) is refused naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1alpha5.awsprovider import AWSNodeTemplateSpec, AWSSettings
from karpy.apis.v1alpha5.provisioner import KubeletConfiguration as LegacyKubelet
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.apis.v1alpha5.translate import (
    FieldWarning,
    LegacySettings,
    NodeClassTranslation,
    TemplateTranslation,
    TranslationError,
)
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import (
    WINDOWS_REFUSED,
    AMIFamily,
    AMISelectorTerm,
    BlockDevice,
    BlockDeviceMapping,
    EC2NodeClass,
    EC2NodeClassSpec,
    MetadataOptions,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
    VolumeType,
)
from karpy_aws.apis.kubelet import KubeletConfiguration
from karpy_aws.apis.v1alpha1 import AWSNodeTemplate

KUBELET_COPY_SUFFIX: Final = "-kubelet"
"""Appended to a Provisioner's own copy of its AWSNodeTemplate when the two share a name."""
_ALIASES: Final = {
    "AL2": "al2@latest",
    "AL2023": "al2023@latest",
    "Bottlerocket": "bottlerocket@latest",
}
_V0_HOP_LIMIT: Final = 2  # Karpenter v0.x's IMDS default; v1 defaults to 1


def _ids(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _discovery_tag(path: str, settings: LegacySettings) -> str:
    if not settings.cluster_name:
        problem = f"{path}: Required value: unset, and no cluster name to default it from"
        raise TranslationError(path, [problem])
    return f"{awslabels.TAG_CLUSTER_PREFIX}{settings.cluster_name}"


def _subnet_terms(
    path: str, selector: Mapping[str, str], settings: LegacySettings
) -> tuple[tuple[SubnetSelectorTerm, ...], list[FieldWarning]]:
    if not selector:
        tag = _discovery_tag(path, settings)
        return (SubnetSelectorTerm(tags={tag: "*"}),), [
            FieldWarning(path, f"unset: subnets discovered by the tag {tag}, as v0.x defaulted")
        ]
    selector = dict(selector)
    ids = _ids(selector.pop("aws-ids", "")) + _ids(selector.pop("aws::ids", ""))
    terms = [SubnetSelectorTerm(id=i) for i in ids]
    if selector:
        terms.append(SubnetSelectorTerm(tags=selector))
    return tuple(terms), []


def _security_group_terms(
    path: str, selector: Mapping[str, str], settings: LegacySettings
) -> tuple[tuple[SecurityGroupSelectorTerm, ...], list[FieldWarning]]:
    if not selector:
        tag = _discovery_tag(path, settings)
        return (SecurityGroupSelectorTerm(tags={tag: "*"}),), [
            FieldWarning(
                path, f"unset: security groups discovered by the tag {tag}, as v0.x defaulted"
            )
        ]
    selector = dict(selector)
    ids = _ids(selector.pop("aws-ids", "")) + _ids(selector.pop("aws::ids", ""))
    terms = [SecurityGroupSelectorTerm(id=i) for i in ids]
    name = selector.pop("aws::name", None)
    if name is not None:
        terms.append(SecurityGroupSelectorTerm(name=name))
    if selector:
        terms.append(SecurityGroupSelectorTerm(tags=selector))
    return tuple(terms), []


def _ami(
    path: str, family: str | None, selector: Mapping[str, str]
) -> tuple[AMIFamily | None, tuple[AMISelectorTerm, ...]]:
    family_path = f"{path}.amiFamily"
    if family == "Ubuntu":
        raise TranslationError(
            family_path, [f"{family_path}: Ubuntu is not an AMI family in v1; use AL2023 or Custom"]
        )
    if family is not None and family.startswith("Windows"):
        problem = f"{family_path}: {family}: {WINDOWS_REFUSED}"
        raise TranslationError(family_path, [problem])
    if not selector:
        alias = _ALIASES.get(family or "AL2")
        if alias is None:
            problem = f"{family_path}: {family} needs an amiSelector (v1 has no alias for it)"
            raise TranslationError(family_path, [problem])
        return None, (AMISelectorTerm(alias=alias),)
    selector = dict(selector)
    ids = _ids(selector.pop("aws-ids", "")) + _ids(selector.pop("aws::ids", ""))
    name = selector.pop("aws::name", None)
    owners = _ids(selector.pop("aws::owners", ""))
    terms = [AMISelectorTerm(id=i) for i in ids]
    if name is not None or selector:
        owner_choices: list[str | None] = [*owners] or [None]
        terms += [AMISelectorTerm(name=name, tags=selector, owner=o) for o in owner_choices]
    elif owners:
        problem = f"{path}.amiSelector: aws::owners needs aws::name or tags beside it in v1"
        raise TranslationError(f"{path}.amiSelector", [problem])
    return AMIFamily(family or "AL2"), tuple(terms)


def _block_devices(settings: AWSSettings) -> tuple[BlockDeviceMapping, ...]:
    out: list[BlockDeviceMapping] = []
    for mapping in settings.block_device_mappings:
        ebs = mapping.ebs
        out.append(
            BlockDeviceMapping(
                device_name=mapping.device_name,
                ebs=None
                if ebs is None
                else BlockDevice(
                    delete_on_termination=ebs.delete_on_termination,
                    encrypted=ebs.encrypted,
                    iops=ebs.iops,
                    kms_key_id=ebs.kms_key_id,
                    snapshot_id=ebs.snapshot_id,
                    throughput=ebs.throughput,
                    volume_size=ebs.volume_size,
                    volume_type=None if ebs.volume_type is None else VolumeType(ebs.volume_type),
                ),
            )
        )
    return tuple(out)


def _metadata_options(settings: AWSSettings) -> MetadataOptions:
    given = settings.metadata_options
    defaults = MetadataOptions()
    if given is None:
        return MetadataOptions(http_put_response_hop_limit=_V0_HOP_LIMIT)
    return MetadataOptions(
        http_endpoint=given.http_endpoint or defaults.http_endpoint,
        http_protocol_ipv6=given.http_protocol_ipv6 or defaults.http_protocol_ipv6,
        http_put_response_hop_limit=given.http_put_response_hop_limit or _V0_HOP_LIMIT,
        http_tokens=given.http_tokens or defaults.http_tokens,
    )


def kubelet_from_legacy(
    path: str, kubelet: LegacyKubelet
) -> tuple[KubeletConfiguration, list[FieldWarning]]:
    """v1alpha5 kubeletConfiguration -> EC2NodeClass.spec.kubelet; containerRuntime has no place
    in v1 (nodes run containerd), so it is warned about by name."""
    warnings: list[FieldWarning] = []
    if kubelet.container_runtime is not None:
        warnings.append(
            FieldWarning(
                f"{path}.containerRuntime",
                f"{kubelet.container_runtime}: not carried; v1 nodes always run containerd",
            )
        )
    reserved: dict[str, Mapping[str, Quantity]] = {
        "system_reserved": kubelet.system_reserved,
        "kube_reserved": kubelet.kube_reserved,
    }
    return (
        KubeletConfiguration(
            cluster_dns=kubelet.cluster_dns,
            max_pods=kubelet.max_pods,
            pods_per_core=kubelet.pods_per_core,
            eviction_hard=kubelet.eviction_hard,
            eviction_soft=kubelet.eviction_soft,
            eviction_soft_grace_period=kubelet.eviction_soft_grace_period,
            eviction_max_pod_grace_period=kubelet.eviction_max_pod_grace_period,
            image_gc_high_threshold_percent=kubelet.image_gc_high_threshold_percent,
            image_gc_low_threshold_percent=kubelet.image_gc_low_threshold_percent,
            cpu_cfs_quota=kubelet.cpu_cfs_quota,
            **reserved,
        ),
        warnings,
    )


def node_class(
    name: str,
    path: str,
    aws: AWSSettings,
    *,
    settings: LegacySettings,
    kubelet: LegacyKubelet | None = None,
    kubelet_path: str = "spec.kubeletConfiguration",
) -> tuple[EC2NodeClass, list[FieldWarning]]:
    """The EC2NodeClass for v0.x AWS settings (inline provider or AWSNodeTemplate spec) found
    at `path`. Raises TranslationError naming what v1 cannot express."""
    problems: list[str] = []
    if aws.launch_template is not None:
        problems.append(
            f"{path}.launchTemplate: not supported: v1 has no user-managed launch templates; "
            "express its settings as EC2NodeClass fields (userData, blockDeviceMappings, ...)"
        )
    instance_profile = aws.instance_profile or settings.default_instance_profile
    if instance_profile is None:
        problems.append(
            f"{path}.instanceProfile: Required value: v1 needs an instance profile (or role); "
            "v0.x took aws.defaultInstanceProfile from its settings"
        )
    if problems:
        raise TranslationError(path, problems)
    warnings: list[FieldWarning] = []
    subnets, found = _subnet_terms(f"{path}.subnetSelector", aws.subnet_selector, settings)
    warnings += found
    groups, found = _security_group_terms(
        f"{path}.securityGroupSelector", aws.security_group_selector, settings
    )
    warnings += found
    extras = aws if isinstance(aws, AWSNodeTemplateSpec) else None
    family_name = aws.ami_family
    if family_name is None and extras and (extras.ami_selector or extras.user_data):
        family_name = "AL2"  # user data and AMI selectors were written for v0.x's default
    elif family_name is None:
        # v0.x's default, AL2, has no EKS AMIs after Kubernetes 1.32.
        family_name = "AL2023"
        warnings.append(
            FieldWarning(
                f"{path}.amiFamily",
                "unset: v0.x defaulted to AL2, whose EKS AMIs end at Kubernetes 1.32; "
                "using al2023@latest (set amiFamily: AL2 to keep AL2)",
            )
        )
    family, ami_terms = _ami(path, family_name, extras.ami_selector if extras else {})
    v1_kubelet = None
    if kubelet is not None:
        v1_kubelet, found = kubelet_from_legacy(kubelet_path, kubelet)
        warnings += found
    spec = EC2NodeClassSpec(
        subnet_selector_terms=subnets,
        security_group_selector_terms=groups,
        ami_selector_terms=ami_terms,
        ami_family=family,
        instance_profile=instance_profile,
        user_data=extras.user_data if extras else None,
        detailed_monitoring=extras.detailed_monitoring if extras else None,
        tags=dict(aws.tags),
        context=aws.context,
        block_device_mappings=_block_devices(aws),
        metadata_options=_metadata_options(aws),
        kubelet=v1_kubelet,
    )
    return EC2NodeClass(metadata=ObjectMeta(name=name), spec=spec), warnings


def _ref(name: str) -> NodeClassReference:
    return NodeClassReference(group=EC2NodeClass.GROUP, kind=EC2NodeClass.KIND, name=name)


@attrs.frozen
class AWSLegacyNodeClasses:
    """`karpy.apis.v1alpha5.translate.LegacyNodeClasses` for the AWS provider."""

    @property
    def template_models(self) -> tuple[type[Any], ...]:
        return (AWSNodeTemplate,)

    def for_provisioner(
        self, provisioner: Provisioner, templates: Mapping[str, Any], *, settings: LegacySettings
    ) -> NodeClassTranslation:
        spec = provisioner.spec
        name = provisioner.metadata.name or ""
        ref = spec.provider_ref
        if ref is not None:
            if (ref.kind or AWSNodeTemplate.KIND) != AWSNodeTemplate.KIND or (
                ref.api_version or AWSNodeTemplate.GROUP
            ).split("/")[0] != AWSNodeTemplate.GROUP:
                problem = (
                    f"spec.providerRef: Unsupported value: {ref.api_version}/{ref.kind}: "
                    "the AWS provider reads karpenter.k8s.aws/v1alpha1 AWSNodeTemplate"
                )
                raise TranslationError("spec.providerRef", [problem])
            if spec.kubelet_configuration is None:
                return NodeClassTranslation(ref=_ref(ref.name))
            # v1 keeps kubelet settings on the NodeClass: this Provisioner gets its own copy of
            # the template, so other Provisioners sharing the template are unchanged. The copy
            # is named after the Provisioner, unless that is the template's name too (as in
            # many a v0.x guide): the template's own EC2NodeClass has that name already.
            template = templates.get(ref.name)
            if not isinstance(template, AWSNodeTemplate):
                problem = f"spec.providerRef.name: Not found: AWSNodeTemplate {ref.name!r}"
                raise TranslationError("spec.providerRef", [problem])
            if name == ref.name:
                name = f"{name}{KUBELET_COPY_SUFFIX}"
            built, warnings = node_class(
                name,
                f"AWSNodeTemplate {ref.name}: spec",
                template.spec,
                settings=settings,
                kubelet=spec.kubelet_configuration,
            )
            warnings.append(
                FieldWarning(
                    "spec.kubeletConfiguration",
                    f"carried as EC2NodeClass {name!r}.spec.kubelet: a copy of AWSNodeTemplate "
                    f"{ref.name!r} with this Provisioner's kubelet settings",
                )
            )
            return NodeClassTranslation(
                ref=_ref(name), node_classes=(built,), warnings=tuple(warnings)
            )
        built, warnings = node_class(
            name,
            "spec.provider",
            spec.provider or AWSSettings(),
            settings=settings,
            kubelet=spec.kubelet_configuration,
        )
        return NodeClassTranslation(ref=_ref(name), node_classes=(built,), warnings=tuple(warnings))

    def for_template(self, template: Any, *, settings: LegacySettings) -> TemplateTranslation:
        if not isinstance(template, AWSNodeTemplate):
            msg = f"the AWS provider translates AWSNodeTemplates, not {type(template).__name__}"
            raise TypeError(msg)
        built, warnings = node_class(
            template.metadata.name or "", "spec", template.spec, settings=settings
        )
        return TemplateTranslation(node_class=built, warnings=tuple(warnings))


NODE_CLASSES: Final = AWSLegacyNodeClasses()
