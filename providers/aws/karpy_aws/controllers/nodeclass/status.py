"""EC2NodeClass status: what its selector terms resolve to, and conditions that say why not.

Launching reads the NodeClass's status, never its selectors, so the status must list the
subnets, security groups, AMIs and instance profile to use — and when one cannot be resolved,
say so in a condition a person can act on ("subnetSelectorTerms did not match any subnets"),
with Ready False until it is fixed. Bad input (no match, an unknown alias, role and
instanceProfile both set) becomes a False condition; AWS failing transiently (throttling, an
outage) raises, so the caller backs off and the last status stands.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable
from typing import Final, TypeVar

import attrs

from karpy.apis.conditions import ConditionSet, Summary, with_condition
from karpy.apis.kube.common import NodeSelectorOperator, NodeSelectorRequirement
from karpy.apis.meta import ConditionStatus
from karpy.apis.v1 import labels as wk
from karpy.runtime.clock import Clock
from karpy_aws import errors as aws
from karpy_aws.apis import ec2nodeclass_status as api
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass, not_yet_supported
from karpy_aws.apis.ec2nodeclass_status import ConditionType, EC2NodeClassStatus
from karpy_aws.providers.amifamily.amis import AMI, DEFAULT_SSM_PREFIX, Variant, resolve_amis
from karpy_aws.providers.capacityreservations import describe_reservations
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.instancetype.instancetypes import (
    CPU,
    EPHEMERAL_STORAGE,
    GIB,
    MEMORY,
    PODS,
    overhead,
)
from karpy_aws.providers.network import discover_security_groups, discover_subnets
from karpy_aws.providers.nodeclass import (
    ami_family,
    block_devices,
    ephemeral_storage_gib,
    instance_store_raid0,
    kubelet_settings,
    metadata_options,
    nested_virtualization,
    network_interfaces,
    security_group_terms,
    subnet_terms,
)
from karpy_aws.providers.placementgroups import find_placement_group
from karpy_aws.session import AWSClient

# AWS answers that mean the NodeClass asks for something that is not there (or not allowed):
# the user must act, so they become False conditions instead of retried errors.
_INPUT_ERRORS: Final = (
    aws.ConfigurationError,
    aws.NotFoundError,
    aws.AccessDeniedError,
    aws.InvalidRequestError,
)
DEPENDENTS: Final = (
    ConditionType.SUBNETS_READY,
    ConditionType.SECURITY_GROUPS_READY,
    ConditionType.AMIS_READY,
    ConditionType.INSTANCE_PROFILE_READY,
    ConditionType.CAPACITY_RESERVATIONS_READY,
    ConditionType.PLACEMENT_GROUP_READY,
    ConditionType.VALIDATION_SUCCEEDED,
)
NODECLASS_CONDITIONS: Final = ConditionSet(
    dependents=DEPENDENTS, root=ConditionType.READY, summary=Summary.DETAILED
)
"""Ready once every selector resolves and the spec validates; its message names each failing
condition with its reason and message, which say what to fix."""


@attrs.frozen
class Outcome:
    """One dependent condition's verdict."""

    ok: bool
    reason: str
    message: str = ""


_READY = Outcome(True, "Ready")
# A small machine to evaluate kubelet reservations and eviction thresholds against.
_PROBE_CAPACITY: Final = {CPU: 2000, MEMORY: 4 * GIB, PODS: 110, EPHEMERAL_STORAGE: 20 * GIB}
T = TypeVar("T")


def ami_requirements(ami: AMI) -> tuple[NodeSelectorRequirement, ...]:
    """The instance types an AMI serves: its architecture, and whether it is for NVIDIA GPUs,
    for Neuron accelerators, or for neither (aliases' variants); any type for other images."""
    out = [
        NodeSelectorRequirement(
            key=wk.LABEL_ARCH, operator=NodeSelectorOperator.IN, values=(ami.arch,)
        )
    ]
    gpu, accel = (
        awslabels.LABEL_AWS_INSTANCE_GPU_COUNT,
        awslabels.LABEL_AWS_INSTANCE_ACCELERATOR_COUNT,
    )
    exists, absent = NodeSelectorOperator.EXISTS, NodeSelectorOperator.DOES_NOT_EXIST
    if ami.variant is Variant.STANDARD:
        out += [
            NodeSelectorRequirement(key=gpu, operator=absent),
            NodeSelectorRequirement(key=accel, operator=absent),
        ]
    elif ami.variant is Variant.NVIDIA:
        out.append(NodeSelectorRequirement(key=gpu, operator=exists))
    elif ami.variant is Variant.NEURON:
        out.append(NodeSelectorRequirement(key=accel, operator=exists))
    return tuple(out)


async def _guard(work: Awaitable[T], *, failed: str, empty: T) -> tuple[T, Outcome | None]:
    try:
        return await work, None
    except _INPUT_ERRORS as e:
        return empty, Outcome(False, failed, str(e))


async def _subnets(
    nodeclass: EC2NodeClass, ec2: AWSClient
) -> tuple[tuple[api.Subnet, ...], Outcome]:
    found, error = await _guard(
        discover_subnets(ec2, subnet_terms(nodeclass.spec)),
        failed="SubnetSelectorInvalid",
        empty=(),
    )
    if error is not None:
        return (), error
    if not found:
        return (), Outcome(
            False, "SubnetsNotFound", "subnetSelectorTerms did not match any subnets"
        )
    return tuple(api.Subnet(id=s.id, zone=s.zone, zone_id=s.zone_id or None) for s in found), _READY


async def _security_groups(
    nodeclass: EC2NodeClass, ec2: AWSClient
) -> tuple[tuple[api.SecurityGroup, ...], Outcome]:
    found, error = await _guard(
        discover_security_groups(ec2, security_group_terms(nodeclass.spec)),
        failed="SecurityGroupSelectorInvalid",
        empty=(),
    )
    if error is not None:
        return (), error
    if not found:
        return (), Outcome(
            False,
            "SecurityGroupsNotFound",
            "securityGroupSelectorTerms did not match any security groups",
        )
    return tuple(api.SecurityGroup(id=g.id, name=g.name or None) for g in found), _READY


async def _placement_group(
    nodeclass: EC2NodeClass, ec2: AWSClient
) -> tuple[tuple[api.PlacementGroup, ...], Outcome]:
    """The group placementGroupSelector names (True with none when there is no selector)."""
    selector = nodeclass.spec.placement_group_selector
    if selector is None:
        return (), _READY
    found, error = await _guard(
        find_placement_group(ec2, name=selector.name, group_id=selector.id),
        failed="PlacementGroupNotFound",
        empty=None,
    )
    if error is not None or found is None:
        message = error.message if error is not None else ""
        return (), Outcome(False, "PlacementGroupNotFound", f"placementGroupSelector: {message}")
    if found.state != "available":
        return (), Outcome(
            False,
            "PlacementGroupNotAvailable",
            f"placementGroupSelector: placement group {found.name!r} is {found.state}",
        )
    return (
        api.PlacementGroup(
            id=found.id,
            name=found.name,
            strategy=api.PlacementStrategy(found.strategy),
            state=found.state,
            partition_count=found.partition_count,
            spread_level=found.spread_level,
        ),
    ), _READY


async def _amis(
    nodeclass: EC2NodeClass,
    ec2: AWSClient,
    ssm: AWSClient,
    *,
    k8s_version: str,
    now: datetime.datetime,
    ssm_prefix: str,
) -> tuple[tuple[api.AMI, ...], Outcome]:
    try:
        resolution = await resolve_amis(
            ec2,
            ssm,
            terms=nodeclass.spec.ami_selector_terms,
            k8s_version=k8s_version,
            now=now,
            ssm_prefix=ssm_prefix,
        )
    except _INPUT_ERRORS as e:
        return (), Outcome(False, "AMISelectorInvalid", str(e))
    if not resolution.amis:
        message = "amiSelectorTerms did not match any AMIs"
        if resolution.missing_parameters:
            message += f" (SSM parameters not found: {', '.join(resolution.missing_parameters)})"
        return (), Outcome(False, "AMINotFound", message)
    return tuple(
        api.AMI(
            id=a.id,
            name=a.name or None,
            deprecated=a.deprecated or None,
            requirements=ami_requirements(a),
        )
        for a in resolution.amis
    ), _READY


async def _instance_profile(
    nodeclass: EC2NodeClass, profiles: InstanceProfiles
) -> tuple[str | None, Outcome]:
    spec = nodeclass.spec
    if (spec.role is None) == (spec.instance_profile is None):
        return None, Outcome(
            False,
            "InstanceProfileInvalid",
            "spec: must specify exactly one of ['role', 'instanceProfile'] "
            f"(role={spec.role!r}, instanceProfile={spec.instance_profile!r})",
        )
    if spec.instance_profile is not None:
        exists, error = await _guard(
            profiles.exists(spec.instance_profile), failed="InstanceProfileNotFound", empty=False
        )
        if error is not None:
            return None, error
        if not exists:
            return None, Outcome(
                False,
                "InstanceProfileNotFound",
                f"spec.instanceProfile: instance profile {spec.instance_profile!r} does not exist",
            )
        return spec.instance_profile, _READY
    assert spec.role is not None  # noqa: S101 -- exactly one is set, checked above
    name, error = await _guard(
        profiles.ensure_for_role(nodeclass=nodeclass.metadata.name or "", role=spec.role),
        failed="InstanceProfileCreationFailed",
        empty="",
    )
    if error is not None:
        return None, attrs.evolve(error, message=f"spec.role {spec.role!r}: {error.message}")
    return name, _READY


async def _capacity_reservations(
    nodeclass: EC2NodeClass, ec2: AWSClient
) -> tuple[tuple[api.CapacityReservation, ...], Outcome]:
    """The active reservations capacityReservationSelectorTerms select (True with none when
    there are no terms; a term that matches nothing is not an error, as in Karpenter: the
    reservation may come later)."""
    terms = nodeclass.spec.capacity_reservation_selector_terms
    if not terms:
        return (), _READY
    found, error = await _guard(
        describe_reservations(ec2, terms), failed="CapacityReservationSelectorInvalid", empty=()
    )
    if error is not None:
        return (), attrs.evolve(error, message=f"capacityReservationSelectorTerms: {error.message}")
    return tuple(
        api.CapacityReservation(
            id=r.id,
            availability_zone=r.zone,
            instance_type=r.instance_type,
            owner_id=r.owner_id,
            instance_match_criteria=r.instance_match_criteria,
            reservation_type=api.CapacityReservationType(r.reservation_type)
            if r.reservation_type in {t.value for t in api.CapacityReservationType}
            else api.CapacityReservationType.DEFAULT,
            state="active",
            end_time=r.end_time,
        )
        for r in found
    ), _READY


def _validate(nodeclass: EC2NodeClass) -> Outcome:
    """The launch-shaping fields the CRD schema cannot fully check (amiFamily without an alias,
    IMDS values, block devices, kubelet quantities), checked the way a launch will read them."""
    refused = not_yet_supported(nodeclass.spec)
    if refused:
        return Outcome(False, "NodeClassInvalid", "; ".join(refused))
    try:
        family = ami_family(nodeclass.spec)
        metadata_options(nodeclass.spec)
        nested_virtualization(nodeclass.spec)
        network_interfaces(nodeclass.spec)
        block_devices(nodeclass.spec, family)
        instance_store_raid0(nodeclass.spec, family)
        ephemeral_storage_gib(nodeclass.spec, family)
        kubelet = kubelet_settings(nodeclass.spec.kubelet)
        overhead(_PROBE_CAPACITY, kubelet=kubelet)
    except aws.ConfigurationError as e:
        return Outcome(False, "NodeClassInvalid", str(e))
    return _READY


async def resolve_status(
    nodeclass: EC2NodeClass,
    *,
    ec2: AWSClient,
    ssm: AWSClient,
    profiles: InstanceProfiles,
    k8s_version: str,
    clock: Clock,
    ssm_prefix: str = DEFAULT_SSM_PREFIX,
) -> EC2NodeClassStatus:
    """The NodeClass's status as of now: resolved subnets (most free addresses first),
    security groups, AMIs (preferred first, with the requirements of the types they serve)
    and instance profile (created for ``role`` if needed), with SubnetsReady,
    SecurityGroupsReady, AMIsReady, InstanceProfileReady, CapacityReservationsReady (the
    active reservations capacityReservationSelectorTerms select, if any), PlacementGroupReady
    (the group placementGroupSelector names, if any), ValidationSucceeded and Ready.

    Side effect: may create an instance profile and add the role to it. Raises
    karpy_aws.errors.AWSError only for failures worth a retry (throttling, timeouts, outages).
    """
    now = clock.now()
    subnets, subnets_ok = await _subnets(nodeclass, ec2)
    groups, groups_ok = await _security_groups(nodeclass, ec2)
    amis, amis_ok = await _amis(
        nodeclass, ec2, ssm, k8s_version=k8s_version, now=now, ssm_prefix=ssm_prefix
    )
    profile, profile_ok = await _instance_profile(nodeclass, profiles)
    reservations, reservations_ok = await _capacity_reservations(nodeclass, ec2)
    placement, placement_ok = await _placement_group(nodeclass, ec2)
    valid = _validate(nodeclass)
    outcomes = dict(
        zip(
            DEPENDENTS,
            (subnets_ok, groups_ok, amis_ok, profile_ok, reservations_ok, placement_ok, valid),
            strict=True,
        )
    )
    generation = nodeclass.metadata.generation
    conditions = nodeclass.status.conditions
    for kind, outcome in outcomes.items():
        conditions = with_condition(
            conditions,
            kind,
            ConditionStatus.TRUE if outcome.ok else ConditionStatus.FALSE,
            reason=outcome.reason,
            message=outcome.message,
            now=now,
            generation=generation,
        )
    return attrs.evolve(
        nodeclass.status,
        subnets=subnets,
        security_groups=groups,
        amis=amis,
        instance_profile=profile,
        capacity_reservations=reservations,
        placement_groups=placement,
        conditions=NODECLASS_CONDITIONS.with_root(conditions, now=now, generation=generation),
    )
