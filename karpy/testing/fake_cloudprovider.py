"""FakeCloudProvider: an in-memory CloudProvider for controller tests, with knobs for failures.

Controller tests need a provider that launches instantly, remembers what it was asked, and fails
on demand (insufficient capacity, NodeClass not ready, drift) without any cloud. It follows
Karpenter's fake: it records every create call, takes a one-shot ``next_create_error``, caps
creates with ``allowed_create_calls``, reports drift from a map, and serves configurable instance
types (by default ``make_instance_types``). It keeps the CloudProvider contract exactly — the
conformance suite in tests/contract/ runs against it — so tests built on it stay honest.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Sequence
from typing import Final

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)
from karpy.cloudprovider.protocol import DriftReason, NodeClassKind, RepairPolicy
from karpy.cloudprovider.selection import cheapest_launch, launched_nodeclaim
from karpy.core.instancetypes import InstanceType
from karpy.testing.instancetypes import make_instance_types

FAKE_PROVIDER_NAME: Final = "fake"
DEFAULT_INSTANCE_TYPE_COUNT: Final = 10
TEST_NODE_CLASS: Final = NodeClassKind(group="karpenter.test.sh", kind="TestNodeClass")
FAKE_IMAGE_ID: Final = "fake-image"


class FakeCloudProvider:
    """A CloudProvider held in memory. Every attribute below is a knob tests may set directly.

    Side effects: ``create`` appends to ``create_calls`` and stores the instance in ``created``;
    ``delete`` removes it; ``reset()`` restores every knob and forgets every instance.
    """

    def __init__(self, instance_types: Sequence[InstanceType] | None = None) -> None:
        self._default_types = (
            tuple(instance_types)
            if instance_types is not None
            else make_instance_types(DEFAULT_INSTANCE_TYPE_COUNT)
        )
        self._ids = itertools.count(1)
        self.instance_types: tuple[InstanceType, ...] = self._default_types
        self.instance_types_for_nodepool: dict[str, tuple[InstanceType, ...]] = {}
        self.create_calls: builtins.list[NodeClaim] = []
        self.delete_calls: builtins.list[NodeClaim] = []
        self.created: dict[str, NodeClaim] = {}
        self.next_create_error: CloudProviderError | None = None
        self.allowed_create_calls: int | None = None
        self.drifted: dict[str, DriftReason] = {}
        self.policies: tuple[RepairPolicy, ...] = ()

    def reset(self) -> None:
        """Forget every call and instance and restore the default knobs."""
        self.instance_types = self._default_types
        self.instance_types_for_nodepool = {}
        self.create_calls = []
        self.delete_calls = []
        self.created = {}
        self.next_create_error = None
        self.allowed_create_calls = None
        self.drifted = {}
        self.policies = ()

    @property
    def name(self) -> str:
        return FAKE_PROVIDER_NAME

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch on the cheapest compatible available offering; providerID
        ``fake:///<zone>/<id>``. The call is recorded even when it fails."""
        self.create_calls.append(nodeclaim)
        if self.allowed_create_calls is not None and (
            len(self.create_calls) > self.allowed_create_calls
        ):
            msg = f"allowed create calls ({self.allowed_create_calls}) exceeded"
            raise CreateError(
                msg, condition_reason="AllowedCreateCallsExceeded", condition_message=msg
            )
        if self.next_create_error is not None:
            error, self.next_create_error = self.next_create_error, None
            raise error
        launch = cheapest_launch(nodeclaim, self._types_for(nodeclaim))
        if launch is None:
            msg = (
                f"nodeclaim {nodeclaim.metadata.name!r}: no compatible instance type has an"
                " available offering that fits its requests"
            )
            raise InsufficientCapacityError(msg)
        provider_id = f"fake:///{launch.offering.zone}/fake-{next(self._ids):08d}"
        launched = launched_nodeclaim(
            nodeclaim, launch, provider_id=provider_id, image_id=FAKE_IMAGE_ID
        )
        self.created[provider_id] = launched
        return launched

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Forget the instance; NodeClaimNotFoundError once it is gone (or never existed)."""
        self.delete_calls.append(nodeclaim)
        provider_id = nodeclaim.status.provider_id
        if provider_id is None or self.created.pop(provider_id, None) is None:
            msg = f"nodeclaim {nodeclaim.metadata.name!r}: instance {provider_id!r} not found"
            raise NodeClaimNotFoundError(msg)

    async def get(self, provider_id: str) -> NodeClaim:
        try:
            return self.created[provider_id]
        except KeyError:
            msg = f"instance {provider_id!r} not found"
            raise NodeClaimNotFoundError(msg) from None

    async def list(self) -> Sequence[NodeClaim]:
        return tuple(self.created.values())

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """``instance_types_for_nodepool[name]`` when set, else ``instance_types``."""
        return self.instance_types_for_nodepool.get(
            nodepool.metadata.name or "", self.instance_types
        )

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """``drifted[providerID]``: set it to make a NodeClaim drift."""
        return self.drifted.get(nodeclaim.status.provider_id or "")

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        return self.policies

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return (TEST_NODE_CLASS,)

    def well_known_labels(self) -> frozenset[str]:
        """None: the fake types carry karpy's well-known labels only."""
        return frozenset()

    def _types_for(self, nodeclaim: NodeClaim) -> tuple[InstanceType, ...]:
        pool = nodeclaim.metadata.labels.get(wk.LABEL_NODEPOOL, "")
        return self.instance_types_for_nodepool.get(pool, self.instance_types)
