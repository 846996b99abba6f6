"""EC2 instances as karpy sees them: CreateFleet (instant), DescribeInstances, TerminateInstances.

A NodeClaim is one instance. This module owns the three EC2 calls that create, find and end
instances, the tags that mark an instance as this cluster's (so IAM, listing and garbage
collection can find it), and the ``aws:///<zone>/<instance-id>`` provider ids Kubernetes nodes
carry. Request building and response parsing are pure functions; :class:`Instances` makes the
calls. Raw EC2 dicts never leave this module.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy_aws.apis import labels as awslabels
from karpy_aws.errors import ConfigurationError, NotFoundError
from karpy_aws.providers.instancetype.unavailable import FleetError, parse_fleet_errors
from karpy_aws.providers.launch import GroupKey, LaunchPlan
from karpy_aws.providers.launchtemplate import TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME
from karpy_aws.session import AWSClient

TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NAME: Final = "Name"
SPOT_ALLOCATION_STRATEGY: Final = "price-capacity-optimized"
ON_DEMAND_ALLOCATION_STRATEGY: Final = "lowest-price"
# States of an instance that still exists (Karpenter lists these; terminated ones are gone).
LIVE_STATES: Final = ("pending", "running", "stopping", "stopped", "shutting-down")
_PROVIDER_ID: Final = re.compile(r"^aws:///(?P<zone>[^/]+)/(?P<id>i-[0-9a-f]+)$")


def provider_id(zone: str, instance_id: str) -> str:
    """``aws:///<zone>/<instance-id>``, the Node's spec.providerID."""
    return f"aws:///{zone}/{instance_id}"


def parse_provider_id(value: str) -> str:
    """The instance id in a provider id; ConfigurationError if it is not an AWS one."""
    match = _PROVIDER_ID.match(value)
    if match is None:
        raise ConfigurationError(
            f"providerID {value!r} is not an AWS provider id (aws:///<zone>/i-<hex>)"
        )
    return match["id"]


def instance_id_of(value: str | None) -> str | None:
    """The instance id in a provider id; None when there is none yet or it is not an AWS one
    (a NodeClaim not launched, or another provider's). Pure."""
    match = _PROVIDER_ID.match(value or "")
    return None if match is None else match["id"]


def launch_tags(
    *,
    cluster_name: str,
    nodepool: str,
    nodeclass: str,
    nodeclaim: str,
    user_tags: Mapping[str, str],
) -> dict[str, str]:
    """The tags every launched instance, volume and fleet carries: the NodeClass's tags, then
    the ownership tags Karpenter sets (which user tags cannot override), and
    ``karpenter.sh/nodeclaim``, which Karpenter adds only after registration: set at launch, it
    lets a launch retried after a crash find the instance the first attempt made
    (``Instances.find_launched``)."""
    return {
        **user_tags,
        f"{TAG_CLUSTER_PREFIX}{cluster_name}": "owned",
        wk.LABEL_NODEPOOL: nodepool,
        TAG_EKS_CLUSTER_NAME: cluster_name,
        awslabels.LABEL_AWS_EC2NODECLASS: nodeclass,
        TAG_NODECLAIM: nodeclaim,
    }


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def client_token(nodeclaim_uid: str) -> str | None:
    """CreateFleet's idempotency token for one NodeClaim, from its UID (None without one).

    EC2 answers a repeated token with the first call's fleet and launches nothing more, so a
    launch retried after a crash (the instance made, its providerID never written) gets the
    instance it already has instead of a second one. 64 ASCII characters at most.
    """
    return f"karpy-{nodeclaim_uid}"[:64] if nodeclaim_uid else None


def fleet_request(
    plan: LaunchPlan,
    *,
    templates: Mapping[GroupKey, str],
    tags: Mapping[str, str],
    token: str | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """CreateFleet's parameters for ``plan``: instant, one instance, one LaunchTemplateConfig
    per launch group (``templates`` maps each group's key to its template's name), overrides
    with ImageId, AvailabilityZone, SubnetId and Priority = price, ``token`` as ClientToken and
    the NodeClass's ``context`` (a reserved-capacity context AWS gave the account) when given
    (pure)."""
    configs = [
        {
            "LaunchTemplateSpecification": {
                "LaunchTemplateName": templates[group.key],
                "Version": "$Latest",
            },
            "Overrides": [
                {
                    "InstanceType": o.instance_type,
                    "SubnetId": o.subnet_id,
                    "AvailabilityZone": o.zone,
                    "ImageId": o.image_id,
                    "Priority": o.price,
                }
                for o in group.overrides
            ],
        }
        for group in plan.groups
    ]
    spot = plan.capacity_type == wk.CAPACITY_TYPE_SPOT
    # A reserved launch is an on-demand one (capacity-block for capacity blocks) whose
    # template targets the reservation.
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": configs,
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": (
                "spot" if spot else "capacity-block" if plan.capacity_block else "on-demand"
            ),
        },
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": _tag_list(tags)}
            for kind in ("instance", "volume", "fleet")
        ],
    }
    if token:
        request["ClientToken"] = token
    if context:
        request["Context"] = context
    if spot:
        request["SpotOptions"] = {"AllocationStrategy": SPOT_ALLOCATION_STRATEGY}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": ON_DEMAND_ALLOCATION_STRATEGY}
    return request


@attrs.frozen(kw_only=True)
class Launched:
    """What one CreateFleet produced: the instance (if any) and the errors it reported."""

    instance_id: str | None
    instance_type: str | None
    zone: str | None
    errors: tuple[FleetError, ...]
    template_name: str | None = None
    """The launch template the instance came from, when EC2 says."""


def parse_fleet_response(response: Mapping[str, Any]) -> Launched:
    """The first launched instance and every error of a CreateFleet response (pure)."""
    errors = parse_fleet_errors(response.get("Errors", []))
    for entry in response.get("Instances", []):
        ids = entry.get("InstanceIds", [])
        if ids:
            launched = entry.get("LaunchTemplateAndOverrides", {})
            overrides = launched.get("Overrides", {})
            template = launched.get("LaunchTemplateSpecification", {}).get("LaunchTemplateName")
            return Launched(
                instance_id=str(ids[0]),
                instance_type=str(entry.get("InstanceType") or overrides.get("InstanceType")),
                zone=overrides.get("AvailabilityZone"),
                errors=errors,
                template_name=str(template) if template else None,
            )
    return Launched(instance_id=None, instance_type=None, zone=None, errors=errors)


@attrs.frozen(kw_only=True)
class Instance:
    """An EC2 instance, as DescribeInstances reports it."""

    id: str
    instance_type: str
    zone: str
    state: str
    image_id: str
    subnet_id: str
    security_group_ids: tuple[str, ...]
    capacity_type: str
    launch_time: datetime.datetime
    tags: Mapping[str, str]
    capacity_reservation_id: str | None = None
    """The reservation the instance runs in (EC2 says; then its capacity type is reserved)."""
    instance_profile: str | None = None
    """The name of the instance profile the instance runs with."""

    @property
    def provider_id(self) -> str:
        return provider_id(self.zone, self.id)


def parse_instance(raw: Mapping[str, Any]) -> Instance:
    """One DescribeInstances instance (pure)."""
    launched = raw.get("LaunchTime")
    if not isinstance(launched, datetime.datetime):
        launched = datetime.datetime.fromisoformat(str(launched))
    if launched.tzinfo is None:
        launched = launched.replace(tzinfo=datetime.UTC)
    return Instance(
        id=str(raw["InstanceId"]),
        instance_type=str(raw.get("InstanceType", "")),
        zone=str(raw.get("Placement", {}).get("AvailabilityZone", "")),
        state=str(raw.get("State", {}).get("Name", "")),
        image_id=str(raw.get("ImageId", "")),
        subnet_id=str(raw.get("SubnetId", "")),
        security_group_ids=tuple(sorted(g["GroupId"] for g in raw.get("SecurityGroups", []))),
        capacity_type=wk.CAPACITY_TYPE_SPOT
        if raw.get("InstanceLifecycle") == "spot"
        else wk.CAPACITY_TYPE_RESERVED
        if raw.get("CapacityReservationId")
        else wk.CAPACITY_TYPE_ON_DEMAND,
        capacity_reservation_id=raw.get("CapacityReservationId") or None,
        instance_profile=(
            str(raw["IamInstanceProfile"].get("Arn", "")).rsplit("/", 1)[-1] or None
            if raw.get("IamInstanceProfile")
            else None
        ),
        launch_time=launched,
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
    )


class Instances:
    """The EC2 calls behind a NodeClaim's life. Raises karpy_aws.errors types only."""

    def __init__(self, ec2: AWSClient, *, cluster_name: str) -> None:
        self.ec2 = ec2
        self._cluster_name = cluster_name

    async def create_fleet(self, request: Mapping[str, Any]) -> Launched:
        """One instant CreateFleet call."""
        return parse_fleet_response(await self.ec2.call("CreateFleet", **request))

    async def get(self, instance_id: str) -> Instance:
        """The instance, unless it is terminated or unknown (NotFoundError)."""
        reservations = await self.ec2.paginate(
            "DescribeInstances", result_key="Reservations", InstanceIds=[instance_id]
        )
        for instance in _instances(reservations):
            if instance.state in LIVE_STATES:
                return instance
        raise NotFoundError(
            service="ec2",
            operation="DescribeInstances",
            code="InvalidInstanceID.NotFound",
            message=f"instance {instance_id} is terminated or does not exist",
        )

    async def find_launched(self, nodeclaim: str) -> Instance | None:
        """The live instance launched for ``nodeclaim`` in this cluster, if any (the oldest)."""
        reservations = await self.ec2.paginate(
            "DescribeInstances",
            result_key="Reservations",
            Filters=[
                {"Name": f"tag:{TAG_NODECLAIM}", "Values": [nodeclaim]},
                {"Name": f"tag:{TAG_CLUSTER_PREFIX}{self._cluster_name}", "Values": ["owned"]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ],
        )
        found = sorted(_instances(reservations), key=lambda i: (i.launch_time, i.id))
        return found[0] if found else None

    async def list(self) -> tuple[Instance, ...]:
        """Every live instance karpy launched for this cluster (tagged with a NodePool and the
        cluster's ownership tag), ordered by id."""
        reservations = await self.ec2.paginate(
            "DescribeInstances",
            result_key="Reservations",
            Filters=[
                {"Name": "tag-key", "Values": [wk.LABEL_NODEPOOL]},
                {"Name": f"tag:{TAG_CLUSTER_PREFIX}{self._cluster_name}", "Values": ["owned"]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ],
        )
        return tuple(sorted(_instances(reservations), key=lambda i: i.id))

    async def tag_registered(
        self, instance: Instance, *, nodeclaim: str, node_name: str
    ) -> tuple[str, ...]:
        """Add the tags Karpenter adds once the node registered — ``Name`` (the node),
        ``karpenter.sh/nodeclaim`` and ``eks:eks-cluster-name``, the only keys the controller's
        IAM policy lets it add to running instances — where ``instance`` lacks them: a tag the
        instance already has is kept, above all a ``Name`` the user gave in the EC2NodeClass's
        ``tags``, as in Karpenter. Returns the keys it added (none: no call)."""
        wanted = {
            TAG_NAME: node_name,
            TAG_NODECLAIM: nodeclaim,
            TAG_EKS_CLUSTER_NAME: self._cluster_name,
        }
        missing = {k: v for k, v in wanted.items() if k not in instance.tags}
        if missing:
            await self.ec2.call("CreateTags", Resources=[instance.id], Tags=_tag_list(missing))
        return tuple(sorted(missing))

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        """Begin terminating ``instance_ids`` (NotFoundError if any id is unknown)."""
        await self.ec2.call("TerminateInstances", InstanceIds=list(instance_ids))


def _instances(reservations: Sequence[Mapping[str, Any]]) -> list[Instance]:
    return [parse_instance(i) for r in reservations for i in r.get("Instances", [])]
