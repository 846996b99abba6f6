"""Launch templates named by the hash of what they contain, found or created once, cached.

Every distinct node configuration (AMI, user data, security groups, instance profile, block
devices, IMDS options, tags) needs a launch template for CreateFleet. Naming the template
``karpenter.k8s.aws/<hash of its options>`` makes the name a content address: identical options
share one template across NodeClaims and restarts, and a changed option yields a new name instead
of mutating a template that running nodes were launched from. The value types and hashing are
pure; :class:`LaunchTemplates` does find-or-create against EC2 with an in-memory cache.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
from typing import Any, Final, Literal

import attrs
import orjson

from karpy.runtime.clock import Clock
from karpy_aws.apis.labels import AWS_GROUP, LABEL_AWS_EC2NODECLASS
from karpy_aws.errors import AlreadyExistsError, NotFoundError
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.selectors import Tags, freeze_tags
from karpy_aws.session import AWSClient

LAUNCH_TEMPLATE_NAME_PREFIX: Final = f"{AWS_GROUP}/"
LAUNCH_TEMPLATE_CACHE_TTL: Final = datetime.timedelta(minutes=1)
TAG_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"
TAG_KARPY_CLUSTER: Final = f"{AWS_GROUP}/cluster"
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
VolumeType = Literal["gp2", "gp3", "io1", "io2", "sc1", "st1", "standard"]


@attrs.frozen(kw_only=True)
class BlockDevice:
    """One EBS block device mapping."""

    device_name: str
    volume_size_gib: int
    volume_type: VolumeType = "gp3"
    encrypted: bool = True
    delete_on_termination: bool = True
    iops: int | None = None
    throughput: int | None = None
    kms_key_id: str | None = None
    snapshot_id: str | None = None
    volume_initialization_rate: int | None = None

    def to_ec2(self) -> dict[str, Any]:
        ebs: dict[str, Any] = {
            "VolumeSize": self.volume_size_gib,
            "VolumeType": self.volume_type,
            "Encrypted": self.encrypted,
            "DeleteOnTermination": self.delete_on_termination,
        }
        for key, value in (
            ("Iops", self.iops),
            ("Throughput", self.throughput),
            ("KmsKeyId", self.kms_key_id),
            ("SnapshotId", self.snapshot_id),
            ("VolumeInitializationRate", self.volume_initialization_rate),
        ):
            if value is not None:
                ebs[key] = value
        return {"DeviceName": self.device_name, "Ebs": ebs}


def default_block_devices(family: AMIFamily) -> tuple[BlockDevice, ...]:
    """The NodeClass defaults: AL2/AL2023 20Gi gp3 /dev/xvda; Bottlerocket 4Gi /dev/xvda plus
    20Gi /dev/xvdb for containers; Windows 50Gi /dev/sda1; Custom none (the AMI decides)."""
    if family in (AMIFamily.AL2, AMIFamily.AL2023):
        return (BlockDevice(device_name="/dev/xvda", volume_size_gib=20),)
    if family is AMIFamily.BOTTLEROCKET:
        return (
            BlockDevice(device_name="/dev/xvda", volume_size_gib=4),
            BlockDevice(device_name="/dev/xvdb", volume_size_gib=20),
        )
    if family is AMIFamily.CUSTOM:
        return ()
    return (BlockDevice(device_name="/dev/sda1", volume_size_gib=50),)


@attrs.frozen(kw_only=True)
class MetadataOptions:
    """IMDS settings; the default requires IMDSv2 tokens with a hop limit of 1, so pods
    without host networking cannot reach the node's credentials."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_protocol_ipv6: Literal["enabled", "disabled"] = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: Literal["required", "optional"] = "required"

    def to_ec2(self) -> dict[str, Any]:
        return {
            "HttpEndpoint": self.http_endpoint,
            "HttpProtocolIpv6": self.http_protocol_ipv6,
            "HttpPutResponseHopLimit": self.http_put_response_hop_limit,
            "HttpTokens": self.http_tokens,
        }


@attrs.frozen(kw_only=True)
class ConnectionTracking:
    """Idle timeouts (seconds) of tracked connections on the primary network interface; unset
    ones keep EC2's defaults."""

    tcp_established_timeout: int | None = None
    udp_stream_timeout: int | None = None
    udp_timeout: int | None = None

    def to_ec2(self) -> dict[str, int]:
        return {
            key: value
            for key, value in (
                ("TcpEstablishedTimeout", self.tcp_established_timeout),
                ("UdpStreamTimeout", self.udp_stream_timeout),
                ("UdpTimeout", self.udp_timeout),
            )
            if value is not None
        }


@attrs.frozen(kw_only=True)
class Interface:
    """One network interface the NodeClass lists: a card, a device index on it, and whether it
    carries IP traffic (``interface``) or only EFA traffic (``efa-only``)."""

    network_card_index: int
    device_index: int
    interface_type: Literal["interface", "efa-only"] = "interface"

    @property
    def primary(self) -> bool:
        return self.network_card_index == 0 and self.device_index == 0


def _sorted_ids(value: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(sorted(set(value)))


@attrs.frozen(kw_only=True)
class LaunchTemplateOptions:
    """Everything a launch template holds; its hash is the template's name."""

    cluster_name: str
    nodeclass_name: str
    image_id: str
    user_data: str
    instance_profile: str
    security_group_ids: tuple[str, ...] = attrs.field(converter=_sorted_ids)
    block_devices: tuple[BlockDevice, ...] = ()
    metadata_options: MetadataOptions = MetadataOptions()
    detailed_monitoring: bool = False
    associate_public_ip_address: bool | None = None
    tags: Tags = attrs.field(default=(), converter=freeze_tags)
    nested_virtualization: Literal["enabled", "disabled"] | None = None
    ip_prefix_count: int | None = None
    connection_tracking: ConnectionTracking | None = None
    efa_count: int | None = None
    interfaces: tuple[Interface, ...] | None = None
    placement_group_id: str | None = None
    capacity_reservation_id: str | None = None
    """Launch into this reservation (a ``reserved`` launch)."""
    capacity_block: bool | None = None
    """The reservation is a capacity block (EC2's ``capacity-block`` market)."""
    capacity_reservation_preference: Literal["none"] | None = None
    """``none``: an on-demand or spot launch of a NodeClass that selects reservations stays out
    of its open ones, which only its ``reserved`` launches use."""

    def hash(self) -> str:
        """A stable digest of every field (the same options always give the same digest).
        Options left unset are not part of it, so adding an option to this class does not
        rename the templates of NodeClasses that do not use it."""
        fields = {k: v for k, v in attrs.asdict(self).items() if v is not None}
        canonical = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()[:20]

    @property
    def name(self) -> str:
        return f"{LAUNCH_TEMPLATE_NAME_PREFIX}{self.hash()}"

    def resource_tags(self) -> dict[str, str]:
        """Tags for the template itself (and what IAM conditions key on)."""
        return {
            **dict(self.tags),
            f"{TAG_CLUSTER_PREFIX}{self.cluster_name}": "owned",
            TAG_EKS_CLUSTER_NAME: self.cluster_name,
            TAG_KARPY_CLUSTER: self.cluster_name,
            LABEL_AWS_EC2NODECLASS: self.nodeclass_name,
        }

    def launch_template_data(self) -> dict[str, Any]:
        """CreateLaunchTemplate's ``LaunchTemplateData``."""
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "IamInstanceProfile": {"Name": self.instance_profile},
            "MetadataOptions": self.metadata_options.to_ec2(),
            "Monitoring": {"Enabled": self.detailed_monitoring},
            "BlockDeviceMappings": [b.to_ec2() for b in self.block_devices],
        }
        if self.nested_virtualization is not None:
            data["CpuOptions"] = {"NestedVirtualization": self.nested_virtualization}
        if self.placement_group_id is not None:
            data["Placement"] = {"GroupId": self.placement_group_id}
        if self.capacity_reservation_id is not None:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": self.capacity_reservation_id}
            }
            if self.capacity_block:
                data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        elif self.capacity_reservation_preference is not None:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationPreference": self.capacity_reservation_preference
            }
        interfaces = self.network_interfaces()
        if interfaces:
            data["NetworkInterfaces"] = interfaces
        else:
            data["SecurityGroupIds"] = list(self.security_group_ids)
        return data

    def network_interfaces(self) -> list[dict[str, Any]]:
        """The template's interfaces, or none when EC2's default primary interface (with the
        groups in ``SecurityGroupIds``) does.

        The NodeClass's own list (``interfaces``) wins. Otherwise a launch for EFA gets one EFA
        interface per network card, up to ``efa_count``, as Karpenter attaches them (device
        index 0 on card 0, 1 on the others, so card 0 stays the one with the node's address).
        Otherwise a public-IP choice, IPv4 prefixes and connection tracking, all settings of
        the primary interface, spell that one out. Every interface takes the security groups
        (EC2 refuses them beside interfaces); the primary one takes the primary's settings."""
        groups = list(self.security_group_ids)
        if self.interfaces:
            return [
                self._interface(
                    {
                        "NetworkCardIndex": i.network_card_index,
                        "DeviceIndex": i.device_index,
                        "InterfaceType": i.interface_type,
                        "Groups": groups,
                    },
                    primary=i.primary,
                )
                for i in self.interfaces
            ]
        if self.efa_count:
            return [
                self._interface(
                    {
                        "NetworkCardIndex": card,
                        "DeviceIndex": 0 if card == 0 else 1,
                        "InterfaceType": "efa",
                        "Groups": groups,
                    },
                    primary=card == 0,
                )
                for card in range(self.efa_count)
            ]
        primary = self._interface({"DeviceIndex": 0, "Groups": groups}, primary=True)
        return [] if len(primary) == 2 else [primary]

    def _interface(self, interface: dict[str, Any], *, primary: bool) -> dict[str, Any]:
        if interface.get("InterfaceType") == "efa-only":
            return interface  # no IP addresses, so no public IP or prefixes either
        if self.associate_public_ip_address is not None:
            interface["AssociatePublicIpAddress"] = self.associate_public_ip_address
        if self.ip_prefix_count is not None:
            interface["Ipv4PrefixCount"] = self.ip_prefix_count
        if primary and self.connection_tracking is not None:
            interface["ConnectionTrackingSpecification"] = self.connection_tracking.to_ec2()
        return interface


@attrs.frozen
class LaunchTemplate:
    """A launch template that exists in EC2."""

    id: str
    name: str


class LaunchTemplates:
    """Find-or-create launch templates, cached in memory for a minute (refreshed on use)."""

    def __init__(
        self, ec2: AWSClient, clock: Clock, *, ttl: datetime.timedelta = LAUNCH_TEMPLATE_CACHE_TTL
    ) -> None:
        self._ec2 = ec2
        self._clock = clock
        self._ttl = ttl
        self._cache: dict[str, tuple[LaunchTemplate, datetime.datetime]] = {}

    async def ensure(self, options: LaunchTemplateOptions) -> LaunchTemplate:
        """The template for ``options``: from the cache, from EC2, or newly created."""
        name = options.name
        now = self._clock.now()
        cached = self._cache.get(name)
        if cached is not None and now < cached[1]:
            self._cache[name] = (cached[0], now + self._ttl)
            return cached[0]
        template = await self._find(name)
        if template is None:
            try:
                response = await self._ec2.call(
                    "CreateLaunchTemplate",
                    LaunchTemplateName=name,
                    LaunchTemplateData=options.launch_template_data(),
                    TagSpecifications=[
                        {
                            "ResourceType": "launch-template",
                            "Tags": [
                                {"Key": k, "Value": v}
                                for k, v in sorted(options.resource_tags().items())
                            ],
                        }
                    ],
                )
            except AlreadyExistsError:
                template = await self._find(name)
                if template is None:
                    raise
            else:
                created = response["LaunchTemplate"]
                template = LaunchTemplate(
                    created["LaunchTemplateId"], created["LaunchTemplateName"]
                )
        self._cache[name] = (template, now + self._ttl)
        return template

    async def _find(self, name: str) -> LaunchTemplate | None:
        try:
            response = await self._ec2.call("DescribeLaunchTemplates", LaunchTemplateNames=[name])
        except NotFoundError:
            return None
        found = response.get("LaunchTemplates", [])
        if not found:
            return None
        return LaunchTemplate(found[0]["LaunchTemplateId"], found[0]["LaunchTemplateName"])

    async def hydrate(self, cluster_name: str) -> int:
        """Load the cluster's existing templates into the cache (at leader start), so that
        unused ones expire and are deleted like any other; return how many were found."""
        found = await self._ec2.paginate(
            "DescribeLaunchTemplates",
            result_key="LaunchTemplates",
            Filters=[{"Name": f"tag:{TAG_KARPY_CLUSTER}", "Values": [cluster_name]}],
        )
        until = self._clock.now() + self._ttl
        for raw in found:
            name = raw["LaunchTemplateName"]
            if name.startswith(LAUNCH_TEMPLATE_NAME_PREFIX) and name not in self._cache:
                self._cache[name] = (LaunchTemplate(raw["LaunchTemplateId"], name), until)
        return len(found)

    async def delete_for_nodeclass(self, cluster_name: str, nodeclass: str) -> tuple[str, ...]:
        """Delete every template of ``nodeclass`` in this cluster (the NodeClass is going
        away); return their names, sorted."""
        found = await self._ec2.paginate(
            "DescribeLaunchTemplates",
            result_key="LaunchTemplates",
            Filters=[
                {"Name": f"tag:{TAG_KARPY_CLUSTER}", "Values": [cluster_name]},
                {"Name": f"tag:{LABEL_AWS_EC2NODECLASS}", "Values": [nodeclass]},
            ],
        )
        names = sorted(
            str(raw["LaunchTemplateName"])
            for raw in found
            if str(raw["LaunchTemplateName"]).startswith(LAUNCH_TEMPLATE_NAME_PREFIX)
        )
        for name in names:
            with contextlib.suppress(NotFoundError):  # someone else deleted it: same outcome
                await self._ec2.call("DeleteLaunchTemplate", LaunchTemplateName=name)
            self._cache.pop(name, None)
        return tuple(names)

    def invalidate(self, name: str) -> None:
        """Forget ``name`` (CreateFleet said the template is gone)."""
        self._cache.pop(name, None)

    async def delete_expired(self) -> tuple[str, ...]:
        """Delete templates unused for the TTL from EC2 and the cache; return their names."""
        now = self._clock.now()
        expired = sorted(n for n, (_, until) in self._cache.items() if now >= until)
        for name in expired:
            with contextlib.suppress(NotFoundError):  # someone else deleted it: same outcome
                await self._ec2.call("DeleteLaunchTemplate", LaunchTemplateName=name)
            self._cache.pop(name, None)
        return tuple(expired)
