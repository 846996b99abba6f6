"""The AWS provider's drift reasons reach the NodeClaim's Drifted condition through the same
nodeclaim.disruption controller as the core's: an instance launched on moto whose AMI the
EC2NodeClass no longer resolves to is marked Drifted with reason AMIDrift."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import attrs
import pytest

from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import (
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    RequirementOperator,
)
from karpy.apis.v1.nodeclaim import ConditionType
from karpy.apis.v1.nodepool import (
    NodeClaimTemplate,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
)
from karpy.controllers.nodeclaim.disruption import NodeClaimDisruptionController
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS
from karpy.runtime.telemetry import Telemetry
from karpy.state.nodepools import hash_annotations
from karpy_aws.apis import labels as awslabels
from karpy_aws_emulator.world import AMI_IDS
from tests.support.clusterview import CORE_KINDS, LiveView, live_view

from .conftest import ProviderKit, make_nodeclaim

pytestmark = pytest.mark.aws


@pytest.fixture
async def live(kube: KubeClient) -> AsyncIterator[LiveView]:
    async with live_view(kube, (*CORE_KINDS, NODEPOOLS)) as view:
        yield view


async def test_an_ami_the_nodeclass_no_longer_resolves_marks_the_nodeclaim_ami_drifted(
    kit: ProviderKit,
    kube: KubeClient,
    live: LiveView,
    cleanup: list[str],
    telemetry: Telemetry,
) -> None:
    suffix = secrets.token_hex(3)
    pool = NodePool(
        metadata=ObjectMeta(name=f"aws-drift-{suffix}"),
        spec=NodePoolSpec(
            template=NodeClaimTemplate(
                spec=NodeClaimTemplateSpec(
                    requirements=(
                        NodeSelectorRequirementWithMinValues(
                            key=wk.LABEL_ARCH, operator=RequirementOperator.IN, values=("amd64",)
                        ),
                    ),
                    node_class_ref=NodeClassReference(
                        group=awslabels.AWS_GROUP, kind="EC2NodeClass", name="default"
                    ),
                )
            )
        ),
    )
    pool = await kube.create(NODEPOOLS, pool)
    pool_name = pool.metadata.name or ""
    cleanup.append(f"/apis/karpenter.sh/v1/nodepools/{pool_name}")
    name = f"{pool_name}-a"
    launched = await kit.provider.create(
        make_nodeclaim((wk.LABEL_ARCH, "In", ("amd64",)), name=name, nodepool=pool_name)
    )
    metadata = attrs.evolve(
        launched.metadata,
        annotations={**launched.metadata.annotations, **hash_annotations(pool)},
    )
    await kube.create(NODECLAIMS, attrs.evolve(launched, metadata=metadata))
    cleanup.append(f"/apis/karpenter.sh/v1/nodeclaims/{name}")
    status = attrs.evolve(
        launched.status,
        conditions=(
            Condition(
                type=ConditionType.LAUNCHED,
                status=ConditionStatus.TRUE,
                last_transition_time=kit.clock.now(),
                reason="Launched",
            ),
        ),
    )
    await kube.patch_status(NODECLAIMS, name, status)
    controller = NodeClaimDisruptionController(
        kube, live.view, kit.provider, clock=kit.clock, telemetry=telemetry
    )
    reconcile = live.settled(controller.reconcile)

    await reconcile(name)
    await live.caught_up()
    claim = live.view.nodeclaim(name)
    assert claim is not None
    assert all(c.type != ConditionType.DRIFTED for c in claim.status.conditions)

    # The NodeClass now resolves to another AMI (a new release behind its alias).
    nodeclass = kit.nodeclasses.items["default"]
    amis = tuple(attrs.evolve(a, id=AMI_IDS["al2023x86old"]) for a in nodeclass.status.amis)
    kit.nodeclasses.put(attrs.evolve(nodeclass, status=attrs.evolve(nodeclass.status, amis=amis)))
    await reconcile(name)
    await live.caught_up()
    claim = live.view.nodeclaim(name)
    assert claim is not None
    drifted = next(c for c in claim.status.conditions if c.type == ConditionType.DRIFTED)
    assert (drifted.status, drifted.reason, drifted.message) == (
        ConditionStatus.TRUE,
        "AMIDrift",
        "AMIDrift",
    )
