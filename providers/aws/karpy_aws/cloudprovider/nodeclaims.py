"""NodeClaims in and out of EC2: launch inputs from a NodeClass, NodeClaims from instances.

The provider returns NodeClaims for what it launched (labels of the chosen type, zone and
capacity type; capacity, allocatable, image and provider id) and for instances it finds
(``get``/``list``, which garbage collection reads); and it turns a NodeClass plus a NodeClaim
into launch-template options. These translations are pure and kept apart from the calls so that
provider.py reads as the Protocol it implements.
"""

from __future__ import annotations

import datetime

import attrs

from karpy.apis.meta import ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.cloudprovider.requirements import quantities_from_resources
from karpy.core.resources import Resources
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass, not_yet_supported
from karpy_aws.errors import ConfigurationError
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.amifamily.userdata import BootstrapOptions, Taint, render_user_data
from karpy_aws.providers.cluster import ClusterInfo
from karpy_aws.providers.instance import TAG_NODECLAIM, Instance, provider_id
from karpy_aws.providers.instancetype.coretypes import to_core_instance_type
from karpy_aws.providers.instancetype.instancetypes import (
    DEFAULT_EPHEMERAL_STORAGE_GIB,
    KubeletSettings,
)
from karpy_aws.providers.instancetype.offerings import AWSInstanceType
from karpy_aws.providers.launch import Candidate, LaunchGroup, LaunchPlan, Override
from karpy_aws.providers.launchtemplate import Interface, LaunchTemplateOptions
from karpy_aws.providers.nodeclass import (
    NODECLASS_HASH_VERSION,
    ami_family,
    block_devices,
    connection_tracking,
    ephemeral_storage_gib,
    instance_store_raid0,
    kubelet_config,
    kubelet_settings,
    metadata_options,
    nested_virtualization,
    network_interfaces,
)

EC2NODECLASS_KIND = "EC2NodeClass"


@attrs.frozen(kw_only=True)
class LaunchInputs:
    """What a NodeClass contributes to capacity and to launch templates."""

    family: AMIFamily
    kubelet: KubeletSettings
    ephemeral: int
    interfaces: tuple[Interface, ...] = ()
    raid0: bool = False

    @property
    def efa_interfaces(self) -> int | None:
        """EFA interfaces the NodeClass's own list attaches (None without a list)."""
        if not self.interfaces:
            return None
        return sum(i.interface_type == "efa-only" for i in self.interfaces)

    def can_launch(self, instance_type: AWSInstanceType) -> bool:
        """Whether the type has the network cards (and EFA) the NodeClass's interfaces need;
        EC2 would refuse the launch otherwise."""
        if not self.interfaces:
            return True
        info = instance_type.info
        cards = max(i.network_card_index for i in self.interfaces) + 1
        efa_only = sum(i.interface_type == "efa-only" for i in self.interfaces)
        return info.max_network_cards >= cards and info.efa_count >= efa_only

    @classmethod
    def of(cls, nodeclass: EC2NodeClass) -> LaunchInputs:
        """Raises ConfigurationError naming the field when the spec cannot be used."""
        refused = not_yet_supported(nodeclass.spec)
        if refused:
            raise ConfigurationError("; ".join(refused))
        family = ami_family(nodeclass.spec)
        return cls(
            family=family,
            kubelet=kubelet_settings(nodeclass.spec.kubelet),
            ephemeral=ephemeral_storage_gib(nodeclass.spec, family),
            interfaces=network_interfaces(nodeclass.spec),
            raid0=instance_store_raid0(nodeclass.spec, family),
        )

    @classmethod
    def default(cls) -> LaunchInputs:
        """AL2023 with default kubelet settings (for instances whose NodeClass is gone)."""
        return cls(
            family=AMIFamily.AL2023,
            kubelet=KubeletSettings(),
            ephemeral=DEFAULT_EPHEMERAL_STORAGE_GIB,
        )

    def template_options(
        self,
        cluster: ClusterInfo,
        nodeclaim: NodeClaim,
        nodeclass: EC2NodeClass,
        *,
        group: LaunchGroup,
        plan: LaunchPlan,
    ) -> LaunchTemplateOptions:
        """Launch-template options for one launch group of ``nodeclaim``."""
        spec, status = nodeclass.spec, nodeclass.status
        profile = status.instance_profile or spec.instance_profile
        if not profile:
            raise ConfigurationError(
                f"EC2NodeClass {nodeclass.metadata.name}: status.instanceProfile is not resolved"
            )
        if not status.security_groups:
            raise ConfigurationError(
                f"EC2NodeClass {nodeclass.metadata.name}: status.securityGroups is empty"
            )
        placement = None
        if spec.placement_group_selector is not None:
            if not status.placement_groups:
                raise ConfigurationError(
                    f"EC2NodeClass {nodeclass.metadata.name}: status.placementGroups is not "
                    "resolved"
                )
            placement = status.placement_groups[0].id
        labels = {**nodeclaim.metadata.labels, wk.LABEL_CAPACITY_TYPE: plan.capacity_type}
        taints = tuple(
            Taint(key=t.key, effect=t.effect.value, value=t.value or "")
            for t in (*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints)
        )
        user_data = render_user_data(
            self.family,
            BootstrapOptions(
                cluster_name=cluster.name,
                cluster_endpoint=cluster.endpoint,
                ca_bundle=cluster.ca_bundle,
                cluster_cidr=cluster.service_cidr,
                ip_family=cluster.ip_family,
                kubelet=kubelet_config(
                    spec.kubelet, max_pods=group.max_pods, default_dns=cluster.dns_ip
                ),
                labels=labels,
                taints=taints,
                custom_user_data=spec.user_data,
                instance_store_raid0=self.raid0,
            ),
        )
        return LaunchTemplateOptions(
            cluster_name=cluster.name,
            nodeclass_name=nodeclass.metadata.name or "",
            image_id=group.image_id,
            user_data=user_data,
            instance_profile=profile,
            security_group_ids=tuple(g.id for g in status.security_groups),
            block_devices=block_devices(spec, self.family),
            metadata_options=metadata_options(spec),
            detailed_monitoring=bool(spec.detailed_monitoring),
            associate_public_ip_address=spec.associate_public_ip_address,
            tags=spec.tags,
            nested_virtualization=nested_virtualization(spec),
            ip_prefix_count=spec.ip_prefix_count,
            connection_tracking=connection_tracking(spec),
            efa_count=group.efa_count or None,
            interfaces=self.interfaces or None,
            placement_group_id=placement,
            capacity_reservation_id=group.capacity_reservation_id,
            capacity_block=group.capacity_reservation_type == "capacity-block" or None,
            capacity_reservation_preference=(
                "none"
                if group.capacity_reservation_id is None and status.capacity_reservations
                else None
            ),
        )


def _nonzero(resources: Resources) -> dict[str, Quantity]:
    return quantities_from_resources(Resources.milli({k: v for k, v in resources.items() if v > 0}))


def _type_labels(instance_type: AWSInstanceType | Candidate) -> dict[str, str]:
    core = (
        instance_type.core
        if isinstance(instance_type, Candidate)
        else to_core_instance_type(instance_type)
    )
    return core.requirements.labels()


def launched_nodeclaim(
    nodeclaim: NodeClaim,
    *,
    candidate: Candidate,
    override: Override,
    instance_id: str,
    capacity_type: str,
    region: str,
    nodeclass_hash: str,
    reservation: LaunchGroup | None = None,
) -> NodeClaim:
    """``nodeclaim`` as launched: the chosen type's labels, zone, zone id, region and capacity
    type (and, launched into a reservation, its id and type); the NodeClass hash annotations;
    provider id, image, capacity and allocatable."""
    labels = {
        **nodeclaim.metadata.labels,
        **_type_labels(candidate),
        wk.LABEL_TOPOLOGY_ZONE: override.zone,
        awslabels.LABEL_AWS_ZONE_ID: override.zone_id,
        wk.LABEL_TOPOLOGY_REGION: region,
        wk.LABEL_CAPACITY_TYPE: capacity_type,
    }
    if reservation is not None and reservation.capacity_reservation_id is not None:
        labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID] = reservation.capacity_reservation_id
        labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_TYPE] = (
            reservation.capacity_reservation_type or "default"
        )
    annotations = {
        **nodeclaim.metadata.annotations,
        awslabels.ANNOTATION_EC2NODECLASS_HASH: nodeclass_hash,
        awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION,
    }
    return attrs.evolve(
        nodeclaim,
        metadata=attrs.evolve(nodeclaim.metadata, labels=labels, annotations=annotations),
        status=attrs.evolve(
            nodeclaim.status,
            provider_id=provider_id(override.zone, instance_id),
            image_id=override.image_id,
            capacity=_nonzero(candidate.core.capacity),
            allocatable=_nonzero(candidate.core.allocatable),
        ),
    )


def nodeclaim_from(
    instance: Instance, instance_type: AWSInstanceType | None, *, now: datetime.datetime
) -> NodeClaim:
    """The NodeClaim view of an instance found in EC2 (Karpenter's instanceToNodeClaim): named
    by its ``karpenter.sh/nodeclaim`` tag when it has one, created at launch time, deleting if
    it is shutting down."""
    labels = _type_labels(instance_type) if instance_type is not None else {}
    labels.update(
        {
            wk.LABEL_TOPOLOGY_ZONE: instance.zone,
            wk.LABEL_CAPACITY_TYPE: instance.capacity_type,
            wk.LABEL_INSTANCE_TYPE: instance.instance_type,
        }
    )
    labels.pop(
        awslabels.LABEL_AWS_ZONE_ID, None
    )  # the type lists every zone id; the instance has one
    zone_ids = {o.zone: o.zone_id for o in instance_type.offerings} if instance_type else {}
    if zone_ids.get(instance.zone):
        labels[awslabels.LABEL_AWS_ZONE_ID] = zone_ids[instance.zone]
    if wk.LABEL_NODEPOOL in instance.tags:
        labels[wk.LABEL_NODEPOOL] = instance.tags[wk.LABEL_NODEPOOL]
    if instance.capacity_reservation_id is not None:
        labels[awslabels.LABEL_AWS_CAPACITY_RESERVATION_ID] = instance.capacity_reservation_id
    core = to_core_instance_type(instance_type) if instance_type is not None else None
    return NodeClaim(
        metadata=ObjectMeta(
            name=instance.tags.get(TAG_NODECLAIM),
            labels=labels,
            creation_timestamp=instance.launch_time,
            deletion_timestamp=now if instance.state == "shutting-down" else None,
        ),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=NodeClassReference(
                group=awslabels.AWS_GROUP,
                kind=EC2NODECLASS_KIND,
                name=instance.tags.get(awslabels.LABEL_AWS_EC2NODECLASS, ""),
            ),
        ),
        status=NodeClaimStatus(
            provider_id=instance.provider_id,
            image_id=instance.image_id,
            capacity=_nonzero(core.capacity) if core is not None else {},
            allocatable=_nonzero(core.allocatable) if core is not None else {},
        ),
    )
