"""The provider's declared loops, as ``karpy run`` drives them: built by the factory, fed by
informers of the real local control plane (EC2NodeClasses, NodeClaims, Nodes), calling moto.

It makes a NodeClass Ready (or not Ready, with a message naming the field), finalizes a deleted
NodeClass, collects leaked instances with their Nodes, and keeps up the provider (adopting and
expiring launch templates)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import attrs
import pytest

from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import ObjectMeta
from karpy.cloudprovider.registry import ProviderContext
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError
from karpy.kube.errors import NotFoundError as KubeNotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES
from karpy.runtime.clock import FakeClock, SystemClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView
from karpy_aws import build
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.controllers.nodeclass.controller import FINALIZER
from tests.support.providers import Informed, run_loops
from tests.support.waiting import eventually

from .conftest import (
    AMI_IDS,
    K8S_VERSION,
    SSM_PREFIX,
    Moto,
    boto_client,
    launch_tagged,
    make_nodeclaim,
    make_nodeclass,
    node_role,
    provider_settings,
)

pytestmark = [pytest.mark.aws, pytest.mark.cluster]

T = TypeVar("T")
WAIT = 60.0


def _settings(moto: Moto, **extra: str) -> dict[str, str]:
    return provider_settings(
        moto,
        **{
            "cluster-endpoint": "https://k.test",
            "cluster-ca-bundle": "Q0E=",
            "kubernetes-version": K8S_VERSION,
            "ssm-prefix": SSM_PREFIX,
            **extra,
        },
    )


@attrs.frozen
class Running:
    provider: AWSCloudProvider
    task: asyncio.Task[None]
    cluster: str
    view: ClusterView

    async def until(self, check: Callable[[], Awaitable[T | None]], *, what: str) -> T:
        """Poll ``check`` until it returns something truthy (at most WAIT seconds); fail at
        once if run() ended."""

        async def probe() -> T | None:
            if self.task.done():
                self.task.result()
                raise AssertionError("run() returned on its own")
            return await check()

        found = await eventually(probe, within=WAIT, interval=0.1, what=what)
        assert found is not None
        return found


@contextlib.asynccontextmanager
async def running(
    kube: KubeClient,
    moto: Moto,
    *,
    cluster: str | None = None,
    clock: FakeClock | None = None,
    unset: tuple[str, ...] = (),
    **settings: str,
) -> AsyncIterator[Running]:
    """A provider built as ``karpy run --provider aws`` builds it, with the loops it declares
    going (as tasks named ``aws.<loop>``) on informers of its kinds, NodeClaims and Nodes;
    ``unset`` drops settings the tests give by default."""
    cluster = cluster or f"run-{secrets.token_hex(4)}"
    given = {k: v for k, v in _settings(moto, **settings).items() if k not in unset}
    telemetry = Telemetry.setup(service_name="karpy-test")
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS, NODES)
    provider = await build(
        ProviderContext(
            kube=kube,
            view=informed.view,
            clock=clock or FakeClock(),
            cluster_name=cluster,
            settings=given,
            telemetry=telemetry,
        )
    )
    try:
        loops = informed.loops(provider.extension())
        async with informed.running():
            task = asyncio.create_task(run_loops(loops, prefix="aws."), name="aws-run")
            try:
                yield Running(provider, task, cluster, informed.view)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        assert task.cancelled(), "the loops must end only by cancellation"
    finally:
        await provider.aclose()
        telemetry.shutdown()


async def _create(kube: KubeClient, cleanup: list[str], nodeclass: EC2NodeClass) -> str:
    name = nodeclass.metadata.name or ""
    cleanup.append(EC2NODECLASSES.object_path(name))
    await kube.create(EC2NODECLASSES, nodeclass)
    return name


def _conditions(nodeclass: EC2NodeClass) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status.value, c.reason, c.message) for c in nodeclass.status.conditions}


def _settled(kube: KubeClient, name: str) -> Callable[[], Awaitable[EC2NodeClass | None]]:
    """The NodeClass once its status has a Ready condition (True or False)."""

    async def check() -> EC2NodeClass | None:
        nodeclass = await kube.get(EC2NODECLASSES, name)
        return nodeclass if "Ready" in _conditions(nodeclass) else None

    return check


async def _settled_conditions(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    nodeclass: EC2NodeClass,
    *,
    unset: tuple[str, ...] = (),
) -> dict[str, tuple[str, str, str]]:
    """Create ``nodeclass``, run the provider until it has a Ready condition, and return its
    conditions by type."""
    name = await _create(kube, cleanup, nodeclass)
    async with running(kube, moto, unset=unset) as run:
        settled = await run.until(_settled(kube, name), what="a Ready condition")
    return _conditions(settled)


# ------------------------------------------------------------------ NodeClass status


async def test_run_makes_a_nodeclass_ready_and_finalizes_it(
    kube: KubeClient, moto: Moto, cleanup: list[str]
) -> None:
    role = node_role(moto)
    name = await _create(kube, cleanup, make_nodeclass(f"ready-{secrets.token_hex(3)}", role=role))
    iam = boto_client(moto, "iam")
    async with running(kube, moto) as run:
        nodeclass = await run.until(_settled(kube, name), what="a Ready condition")
        conditions = _conditions(nodeclass)
        assert {k: v[0] for k, v in conditions.items()} == {
            "SubnetsReady": "True",
            "SecurityGroupsReady": "True",
            "AMIsReady": "True",
            "InstanceProfileReady": "True",
            "PlacementGroupReady": "True",  # no placementGroupSelector: nothing to resolve
            "CapacityReservationsReady": "True",  # no capacityReservationSelectorTerms either
            "ValidationSucceeded": "True",
            "Ready": "True",
        }
        status = nodeclass.status
        assert {s.id for s in status.subnets} == {
            moto.subnets[k] for k in ("a", "a-small", "b", "c")
        }
        assert [g.id for g in status.security_groups] == [moto.security_groups["nodes"]]
        assert {a.id for a in status.amis} >= {AMI_IDS["al2023x86new"], AMI_IDS["al2023arm"]}
        assert status.instance_profile is not None
        assert iam.get_instance_profile(InstanceProfileName=status.instance_profile)
        assert FINALIZER in nodeclass.metadata.finalizers

        # Ready: the provider launches from it (as the view has it), which leaves a launch
        # template behind.
        async def ready_in_view() -> bool:
            held = run.view.get(EC2NODECLASSES, name)
            return held is not None and "Ready" in _conditions(held)

        await run.until(ready_in_view, what="the view to hold the Ready NodeClass")
        launched = await run.provider.create(make_nodeclaim(nodeclass=name))
        await run.provider.delete(launched)
        ec2 = boto_client(moto, "ec2")
        mine = [{"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": [name]}]
        assert ec2.describe_launch_templates(Filters=mine)["LaunchTemplates"]
        # Deleting the NodeClass (no NodeClaim uses it) removes what it left in AWS.
        await kube.delete(EC2NODECLASSES, name)

        async def gone() -> bool:
            try:
                await kube.get(EC2NODECLASSES, name)
            except KubeNotFoundError:
                return True
            return False

        await run.until(gone, what="the NodeClass to be finalized")
    assert ec2.describe_launch_templates(Filters=mine)["LaunchTemplates"] == []
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_instance_profile(InstanceProfileName=status.instance_profile)


@pytest.mark.parametrize(
    ("spec", "condition", "reason", "message"),
    [
        pytest.param(
            {"subnet_selector_terms": (nc.SubnetSelectorTerm(tags={"karpy-test/none": "x"}),)},
            "SubnetsReady",
            "SubnetsNotFound",
            "subnetSelectorTerms did not match any subnets",
            id="no-subnet",
        ),
        pytest.param(
            {"ami_selector_terms": (nc.AMISelectorTerm(alias="al2023@v19990101"),)},
            "AMIsReady",
            "AMINotFound",
            "amiSelectorTerms did not match any AMIs",
            id="unknown-alias-version",
        ),
        pytest.param(
            {"ami_selector_terms": (nc.AMISelectorTerm(alias="al2023@newest"),)},
            "AMIsReady",
            "AMISelectorInvalid",
            "amiSelectorTerms",
            id="malformed-alias",
        ),
        pytest.param(
            {"role": "no-such-role"},
            "InstanceProfileReady",
            "InstanceProfileCreationFailed",
            "spec.role 'no-such-role'",
            id="unknown-role",
        ),
        pytest.param(
            {"role": None, "instance_profile": "no-such-profile"},
            "InstanceProfileReady",
            "InstanceProfileNotFound",
            "spec.instanceProfile",
            id="unknown-instance-profile",
        ),
    ],
)
async def test_run_reports_bad_input_as_not_ready_naming_the_field(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    spec: dict[str, Any],
    condition: str,
    reason: str,
    message: str,
) -> None:
    fields = {"role": node_role(moto), **spec}
    nodeclass = make_nodeclass(f"bad-{secrets.token_hex(3)}", **fields)
    conditions = await _settled_conditions(kube, moto, cleanup, nodeclass)
    state, got_reason, got_message = conditions[condition]
    assert (state, got_reason) == ("False", reason)
    assert message in got_message
    ready = conditions["Ready"]
    assert ready[:2] == ("False", "UnhealthyDependents")
    assert f"{condition}=False" in ready[2]


async def test_role_and_instance_profile_together_are_refused_by_the_apiserver(
    kube: KubeClient, cleanup: list[str]
) -> None:
    """The CRD refuses this before any controller sees it (resolve_status would say the same:
    test_aws_nodeclassstatus)."""
    nodeclass = make_nodeclass(f"both-{secrets.token_hex(3)}", role="r", instance_profile="p")
    cleanup.append(EC2NODECLASSES.object_path(nodeclass.metadata.name or ""))
    with pytest.raises(
        KubeError, match=r"must specify exactly one of \['role', 'instanceProfile'\]"
    ):
        await kube.create(EC2NODECLASSES, nodeclass)


async def test_without_a_pinned_version_aliases_resolve_for_the_apiservers_version(
    kube: KubeClient, moto: Moto, cleanup: list[str]
) -> None:
    """The local apiserver is not 1.31 (the seeded version), so the alias finds no parameter;
    the message shows which version was asked for."""
    version = await kube.request("GET", "/version")
    wanted = f"{version['major']}.{version['minor'].rstrip('+')}"
    assert wanted != K8S_VERSION
    nodeclass = make_nodeclass(f"ver-{secrets.token_hex(3)}", role=node_role(moto))
    conditions = await _settled_conditions(
        kube, moto, cleanup, nodeclass, unset=("kubernetes-version",)
    )
    state, reason, message = conditions["AMIsReady"]
    assert (state, reason) == ("False", "AMINotFound")
    assert f"/eks/optimized-ami/{wanted}/" in message


# ------------------------------------------------------------------ leaked instances


def _state(moto: Moto, instance_id: str) -> str:
    found = boto_client(moto, "ec2").describe_instances(InstanceIds=[instance_id])
    return str(found["Reservations"][0]["Instances"][0]["State"]["Name"])


async def test_run_collects_a_leaked_instance_and_its_node(
    kube: KubeClient, moto: Moto, cleanup: list[str]
) -> None:
    # The clock is five minutes past now, so every instance made here is past the 30 s grace.
    clock = FakeClock(SystemClock().now() + datetime.timedelta(minutes=5))
    token = secrets.token_hex(3)
    cluster = f"gc-{token}"
    leaked_id, leaked_pid = launch_tagged(moto, cluster)
    kept_id, kept_pid = launch_tagged(moto, cluster)
    claim = make_nodeclaim(name=f"kept-{token}")
    cleanup.append(NODECLAIMS.object_path(claim.metadata.name or ""))
    await kube.create(NODECLAIMS, claim)
    await kube.patch_status(
        NODECLAIMS, claim.metadata.name or "", attrs.evolve(claim.status, provider_id=kept_pid)
    )
    node = f"leaked-{token}"
    cleanup.append(NODES.object_path(node))
    await kube.create(
        NODES, Node(metadata=ObjectMeta(name=node), spec=NodeSpec(provider_id=leaked_pid))
    )

    async def collected() -> bool:
        try:
            await kube.get(NODES, node)
        except KubeNotFoundError:
            return _state(moto, leaked_id) in ("shutting-down", "terminated")
        return False

    async with running(kube, moto, cluster=cluster, clock=clock) as run:
        await run.until(collected, what="the leaked instance and its Node to be collected")
    assert _state(moto, kept_id) == "running"
