"""Learned memory on the real local control plane and moto: once a node of an instance type has
registered, the memory its kubelet reported replaces the overhead-percentage guess for that
type (and AMI family) in the instance types karpy schedules with."""

from __future__ import annotations

import datetime
import secrets

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeSpec, NodeStatus
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import ConditionType
from karpy.core.resources import MEMORY, parse_resource
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.telemetry import Telemetry
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.controllers.learning import LearningController
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.instancetype.learned import LearnedMemory
from karpy_aws.session import AWSSession
from tests.support.providers import Informed
from tests.support.waiting import eventually

from .conftest import FaultInjector, Moto, build_kit, make_nodeclaim, ready_nodeclass
from .test_aws_capacityreservations import _pool_of

pytestmark = [pytest.mark.aws, pytest.mark.cluster]

REPORTED = "7799364Ki"  # what an m5.large's kubelet reports (EC2 says 8192 MiB)


async def test_a_registered_nodes_memory_replaces_the_guess_for_its_type(
    kube: KubeClient,
    session: AWSSession,
    faults: FaultInjector,
    moto: Moto,
    cleanup: list[str],
) -> None:
    learned = LearnedMemory()
    kit = await build_kit(session, faults, moto, learned=learned)
    token = secrets.token_hex(4)
    nodeclass = ready_nodeclass(moto, name=f"learn-{token}")
    cleanup.append(EC2NODECLASSES.object_path(nodeclass.metadata.name or ""))
    await kube.create(EC2NODECLASSES, nodeclass)
    kit.nodeclasses.put(nodeclass)

    async def memory_of(name: str) -> int:
        types = await kit.provider.get_instance_types(
            _pool_of(make_nodeclaim(nodeclass=nodeclass.metadata.name or ""))
        )
        found = next(t for t in types if t.name == name)
        return found.capacity.get(MEMORY, 0) // 1000

    guessed = await memory_of("m5.large")
    assert guessed == int(8192 * (1 - 0.075)) * 2**20  # the 7.5 % guess

    node_name = f"learn-{token}"
    base = make_nodeclaim(name=f"learn-{token}", nodeclass=nodeclass.metadata.name or "")
    claim = attrs.evolve(
        base,
        metadata=attrs.evolve(
            base.metadata,
            labels={**base.metadata.labels, wk.LABEL_INSTANCE_TYPE: "m5.large"},
        ),
    )
    cleanup.append(NODECLAIMS.object_path(claim.metadata.name or ""))
    cleanup.append(NODES.object_path(node_name))
    created = await kube.create(NODECLAIMS, claim)
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    await kube.patch_status(
        NODECLAIMS,
        created.metadata.name or "",
        attrs.evolve(
            created.status,
            node_name=node_name,
            provider_id=f"aws:///us-west-2a/i-{secrets.token_hex(8)}",
            conditions=(
                Condition(
                    type=ConditionType.REGISTERED,
                    status=ConditionStatus.TRUE,
                    last_transition_time=now,
                    reason="Registered",
                ),
            ),
        ),
    )
    await kube.create(NODES, Node(metadata=ObjectMeta(name=node_name), spec=NodeSpec()))
    await kube.patch_status(
        NODES, node_name, NodeStatus(capacity={MEMORY: Quantity(REPORTED), "cpu": Quantity("2")})
    )

    telemetry = Telemetry.setup(service_name="tests")
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS, NODES, EC2NODECLASSES)
    try:
        async with informed.running() as view:
            controller = LearningController(view, learned)

            async def learned_it() -> bool:
                controller.learn()
                return learned.memory("m5.large", AMIFamily.AL2023) is not None

            await eventually(learned_it, what="the node's memory to be learned")
    finally:
        telemetry.shutdown()
    reported = parse_resource(MEMORY, REPORTED) // 1000
    assert learned.memory("m5.large", AMIFamily.AL2023) == reported
    assert learned.memory("m5.large", AMIFamily.BOTTLEROCKET) is None  # per AMI family
    assert await memory_of("m5.large") == reported
    assert await memory_of("c5.large") == int(4096 * (1 - 0.075)) * 2**20  # others keep the guess
