"""The EC2NodeClass controller's reconcile, one call at a time, on the local control plane and
moto: status written only when it changed (and cleared when it no longer resolves), AWS
failures raised for the runner's backoff, deletion held until no NodeClaim uses the NodeClass."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import attrs
import pytest

from karpy.apis.meta import with_annotations
from karpy.kube.client import KubeClient
from karpy.kube.errors import NotFoundError as KubeNotFoundError
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.clock import FakeClock
from karpy.runtime.reconciler import Result
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView
from karpy_aws import errors as aws
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.controllers.nodeclass.controller import (
    FINALIZER,
    TERMINATION_POLL,
    NodeClassController,
)
from karpy_aws.providers.instanceprofile import InstanceProfiles
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.nodeclass import NODECLASS_HASH_VERSION, static_hash
from karpy_aws.providers.version import KubernetesVersion
from karpy_aws.session import AWSSession
from tests.support.providers import Informed
from tests.support.waiting import eventually

from .conftest import (
    K8S_VERSION,
    REGION,
    SSM_PREFIX,
    FaultInjector,
    Moto,
    make_nodeclaim,
    make_nodeclass,
    node_role,
)

pytestmark = [pytest.mark.aws, pytest.mark.cluster]


@pytest.fixture
async def view(kube: KubeClient, telemetry: Telemetry) -> AsyncIterator[ClusterView]:
    """The cluster view the operator would hand the controller: NodeClaims, informed."""
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS)
    async with informed.running() as running:
        yield running


@pytest.fixture
async def controller(
    kube: KubeClient, session: AWSSession, view: ClusterView
) -> NodeClassController:
    clock = FakeClock()
    cluster = f"ctl-{secrets.token_hex(4)}"
    ec2 = await session.client("ec2")
    return NodeClassController(
        kube,
        view,
        ec2=ec2,
        ssm=await session.client("ssm"),
        profiles=InstanceProfiles(
            await session.client("iam"), clock, cluster_name=cluster, region=REGION
        ),
        templates=LaunchTemplates(ec2, clock),
        version=KubernetesVersion(kube, clock, pinned=K8S_VERSION),
        clock=clock,
        cluster_name=cluster,
        ssm_prefix=SSM_PREFIX,
    )


async def _create(kube: KubeClient, cleanup: list[str], moto: Moto) -> str:
    name = f"ctl-{secrets.token_hex(3)}"
    cleanup.append(EC2NODECLASSES.object_path(name))
    await kube.create(EC2NODECLASSES, make_nodeclass(name, role=node_role(moto)))
    return name


async def test_status_is_written_once_and_cleared_when_it_no_longer_resolves(
    kube: KubeClient, moto: Moto, cleanup: list[str], controller: NodeClassController
) -> None:
    name = await _create(kube, cleanup, moto)
    assert await controller.reconcile(name) == Result(requeue_after=60.0)
    first = await kube.get(EC2NODECLASSES, name)
    assert first.status.subnets
    assert first.status.instance_profile
    assert FINALIZER in first.metadata.finalizers
    await controller.reconcile(name)
    again = await kube.get(EC2NODECLASSES, name)
    assert again.metadata.resource_version == first.metadata.resource_version  # nothing written
    await kube.merge_patch(
        EC2NODECLASSES,
        name,
        {"spec": {"subnetSelectorTerms": [{"tags": {"karpy-test/none": "x"}}]}},
    )
    await controller.reconcile(name)
    emptied = await kube.get(EC2NODECLASSES, name)
    assert emptied.status.subnets == ()  # not the stale list: the patch sent null
    assert emptied.status.security_groups == first.status.security_groups
    ready = next(c for c in emptied.status.conditions if c.type == "Ready")
    assert ready.status.value == "False"
    assert "subnetSelectorTerms did not match any subnets" in ready.message


async def test_aws_failures_raise_and_leave_the_last_status(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    controller: NodeClassController,
    faults: FaultInjector,
) -> None:
    name = await _create(kube, cleanup, moto)
    await controller.reconcile(name)
    before = await kube.get(EC2NODECLASSES, name)
    faults.fail("DescribeSecurityGroups", "RequestLimitExceeded", times=1)
    with pytest.raises(aws.ThrottledError):
        await controller.reconcile(name)
    after = await kube.get(EC2NODECLASSES, name)
    assert after.status == before.status


async def test_deletion_waits_for_the_nodeclaims_that_use_the_nodeclass(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    controller: NodeClassController,
    view: ClusterView,
) -> None:
    name = await _create(kube, cleanup, moto)
    await controller.reconcile(name)
    claim = make_nodeclaim(name=f"user-{secrets.token_hex(3)}", nodeclass=name)
    claim_name = claim.metadata.name or ""
    cleanup.append(NODECLAIMS.object_path(claim_name))
    await kube.create(NODECLAIMS, claim)

    async def in_view(present: bool) -> bool:
        return (view.nodeclaim(claim_name) is not None) == present

    await eventually(lambda: in_view(True), what="the view to hold the NodeClaim")
    await kube.delete(EC2NODECLASSES, name)
    assert await controller.reconcile(name) == Result(requeue_after=TERMINATION_POLL)
    held = await kube.get(EC2NODECLASSES, name)
    assert held.metadata.deletion_timestamp is not None
    await kube.delete(NODECLAIMS, claim_name)
    await eventually(lambda: in_view(False), what="the view to drop the NodeClaim")
    assert await controller.reconcile(name) == Result()
    with pytest.raises(KubeNotFoundError):
        await kube.get(EC2NODECLASSES, name)


async def test_nodeclaims_stamped_by_an_older_hash_version_are_restamped(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    controller: NodeClassController,
    view: ClusterView,
) -> None:
    name = await _create(kube, cleanup, moto)
    old = {
        awslabels.ANNOTATION_EC2NODECLASS_HASH: "hash-of-an-older-karpy",
        awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION: "v1",
    }
    claims = []
    for prefix in ("old", "unlaunched"):
        claim = make_nodeclaim(name=f"{prefix}-{secrets.token_hex(3)}", nodeclass=name)
        if prefix == "old":
            claim = attrs.evolve(claim, metadata=with_annotations(claim.metadata, old))
        claims.append(claim.metadata.name or "")
        cleanup.append(NODECLAIMS.object_path(claims[-1]))
        await kube.create(NODECLAIMS, claim)

    async def in_view() -> bool:
        return all(view.nodeclaim(c) is not None for c in claims)

    await eventually(in_view, what="the view to hold the NodeClaims")
    await controller.reconcile(name)
    nodeclass = await kube.get(EC2NODECLASSES, name)
    restamped = await kube.get(NODECLAIMS, claims[0])
    assert restamped.metadata.annotations[awslabels.ANNOTATION_EC2NODECLASS_HASH] == static_hash(
        nodeclass.spec
    )
    assert (
        restamped.metadata.annotations[awslabels.ANNOTATION_EC2NODECLASS_HASH_VERSION]
        == NODECLASS_HASH_VERSION
    )
    untouched = await kube.get(NODECLAIMS, claims[1])
    assert awslabels.ANNOTATION_EC2NODECLASS_HASH not in untouched.metadata.annotations
