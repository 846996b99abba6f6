"""Tagging registered NodeClaims' instances, on moto and the real local control plane.

Built as ``karpy run`` builds it (through ``build``), ``run()`` gives a registered NodeClaim's
instance the ``Name``, ``karpenter.sh/nodeclaim`` and ``eks:eks-cluster-name`` tags and marks the
NodeClaim ``karpenter.k8s.aws/tagged: "true"``, and leaves unregistered and already-marked
NodeClaims alone. Built directly, a pass in which an instance no longer exists fails without
marking its NodeClaim (the others are still tagged), and the tags it sends are the ones the
controller's IAM policy allows on running instances.
"""

from __future__ import annotations

import datetime
import json
import logging
import pathlib
import secrets
from typing import Any

import attrs
import pytest

from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimStatus
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.telemetry import Telemetry
from karpy_aws.controllers.tagging import (
    ANNOTATION_TAGGED,
    TaggingController,
    TaggingError,
    instance_to_tag,
)
from karpy_aws.providers.instance import Instances
from karpy_aws.session import AWSSession
from tests.support.providers import Informed

from .conftest import FaultInjector, Moto, boto_client, launch_tagged, make_nodeclaim
from .test_aws_run import running

pytestmark = [pytest.mark.aws, pytest.mark.cluster]

POLICY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "iam" / "controller-policy.json"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
PROVIDER_ID = "aws:///us-west-2a/i-0123456789abcdef0"


@attrs.frozen
class Machine:
    instance_id: str
    provider_id: str


def _launch(moto: Moto, cluster: str, **tags: str) -> Machine:
    """An instance tagged as karpy's launches are (with the EC2NodeClass's ``tags``)."""
    return Machine(*launch_tagged(moto, cluster, **tags))


def _tags(moto: Moto, instance_id: str) -> dict[str, str]:
    found = boto_client(moto, "ec2").describe_instances(InstanceIds=[instance_id])
    raw = found["Reservations"][0]["Instances"][0].get("Tags", [])
    return {t["Key"]: t["Value"] for t in raw}


def _registered(now: datetime.datetime = NOW) -> tuple[Condition, ...]:
    return (
        Condition(
            type="Registered",
            status=ConditionStatus.TRUE,
            last_transition_time=now,
            reason="Registered",
        ),
    )


async def _claim(
    kube: KubeClient,
    cleanup: list[str],
    machine: Machine,
    *,
    registered: bool = True,
    annotations: dict[str, str] | None = None,
) -> str:
    """A launched NodeClaim for ``machine`` whose node is ``node-<name>``; Registered=True
    unless ``registered`` is False. Returns its name."""
    base = make_nodeclaim(name=f"tag-{secrets.token_hex(4)}")
    claim = attrs.evolve(base, metadata=attrs.evolve(base.metadata, annotations=annotations or {}))
    name = claim.metadata.name or ""
    cleanup.append(NODECLAIMS.object_path(name))
    created = await kube.create(NODECLAIMS, claim)
    await kube.patch_status(
        NODECLAIMS,
        name,
        attrs.evolve(
            created.status,
            provider_id=machine.provider_id,
            node_name=f"node-{name}",
            conditions=_registered() if registered else (),
        ),
    )
    return name


async def _annotation(kube: KubeClient, name: str) -> str | None:
    found: NodeClaim = await kube.get(NODECLAIMS, name)
    return found.metadata.annotations.get(ANNOTATION_TAGGED)


# ------------------------------------------------------------------ which NodeClaims (pure)


def _nodeclaim(**status: Any) -> NodeClaim:
    fields: dict[str, Any] = {
        "provider_id": PROVIDER_ID,
        "node_name": "node-a",
        "conditions": _registered(),
        **status,
    }
    return attrs.evolve(make_nodeclaim(), status=NodeClaimStatus(**fields))


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        pytest.param(_nodeclaim(), "i-0123456789abcdef0", id="registered"),
        pytest.param(
            attrs.evolve(
                _nodeclaim(), metadata=ObjectMeta(name="a", annotations={ANNOTATION_TAGGED: "no"})
            ),
            "i-0123456789abcdef0",
            id="annotation-not-true",
        ),
        pytest.param(
            attrs.evolve(
                _nodeclaim(),
                metadata=ObjectMeta(name="a", annotations={ANNOTATION_TAGGED: "true"}),
            ),
            None,
            id="already-tagged",
        ),
        pytest.param(_nodeclaim(conditions=()), None, id="not-registered"),
        pytest.param(
            _nodeclaim(
                conditions=(
                    Condition(
                        type="Registered",
                        status=ConditionStatus.FALSE,
                        last_transition_time=NOW,
                        reason="NodeNotFound",
                    ),
                )
            ),
            None,
            id="registered-false",
        ),
        pytest.param(_nodeclaim(node_name=None), None, id="no-node-name"),
        pytest.param(_nodeclaim(provider_id=None), None, id="not-launched"),
        pytest.param(_nodeclaim(provider_id="kwok://node-a"), None, id="not-aws"),
        pytest.param(
            attrs.evolve(_nodeclaim(), metadata=ObjectMeta(name="a", deletion_timestamp=NOW)),
            None,
            id="deleting",
        ),
    ],
)
def test_instance_to_tag(claim: NodeClaim, expected: str | None) -> None:
    assert instance_to_tag(claim) == expected


# ------------------------------------------------------------------ under run()


async def test_run_tags_a_registered_nodeclaims_instance_and_marks_it(
    kube: KubeClient, moto: Moto, cleanup: list[str]
) -> None:
    cluster = f"tag-{secrets.token_hex(4)}"
    registered, unregistered, marked = (_launch(moto, cluster) for _ in range(3))
    name = await _claim(kube, cleanup, registered)
    other = await _claim(kube, cleanup, unregistered, registered=False)
    done = await _claim(kube, cleanup, marked, annotations={ANNOTATION_TAGGED: "true"})
    untouched = {m.instance_id: _tags(moto, m.instance_id) for m in (unregistered, marked)}

    async with running(kube, moto, cluster=cluster) as run:

        async def tagged() -> bool:
            return await _annotation(kube, name) == "true"

        await run.until(tagged, what="the registered NodeClaim to be marked tagged")
    tags = _tags(moto, registered.instance_id)
    assert {k: tags.get(k) for k in ("Name", "karpenter.sh/nodeclaim", "eks:eks-cluster-name")} == {
        "Name": f"node-{name}",
        "karpenter.sh/nodeclaim": name,
        "eks:eks-cluster-name": cluster,
    }
    # The pass that tagged `name` saw the other two, and left them as they were.
    assert {i: _tags(moto, i) for i in untouched} == untouched
    assert await _annotation(kube, other) is None
    assert await _annotation(kube, done) == "true"


# ------------------------------------------------------------------ one pass, built directly


@pytest.mark.parametrize("gone", ["terminated", "never-existed"])
async def test_a_pass_fails_without_marking_a_nodeclaim_whose_instance_is_gone(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    session: AWSSession,
    telemetry: Telemetry,
    faults: FaultInjector,
    caplog: pytest.LogCaptureFixture,
    gone: str,
) -> None:
    cluster = f"tag-{secrets.token_hex(4)}"
    alive = _launch(moto, cluster)
    if gone == "terminated":
        dead = _launch(moto, cluster)
        boto_client(moto, "ec2").terminate_instances(InstanceIds=[dead.instance_id])
    else:
        dead = Machine("i-0000000000000dead", "aws:///us-west-2a/i-0000000000000dead")
    good = await _claim(kube, cleanup, alive)
    lost = await _claim(kube, cleanup, dead)
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS)
    controller = TaggingController(
        kube, informed.view, Instances(await session.client("ec2"), cluster_name=cluster)
    )

    async with informed.running():
        with (
            caplog.at_level(logging.DEBUG, logger="karpy_aws.controllers.tagging"),
            pytest.raises(TaggingError),
        ):
            await controller.reconcile_once()

    assert await _annotation(kube, lost) is None
    if gone == "terminated":
        assert "karpenter.sh/nodeclaim" not in _tags(moto, dead.instance_id)
    # The other NodeClaim of the pass was tagged all the same, and its tagging logged.
    assert await _annotation(kube, good) == "true"
    assert _tags(moto, alive.instance_id)["karpenter.sh/nodeclaim"] == good
    logged = {
        (r.getMessage(), getattr(r, "nodeclaim", None))
        for r in caplog.records
        if r.name == "karpy_aws.controllers.tagging"
    }
    assert ("tagged nodeclaim", good) in logged
    assert ("failed tagging nodeclaim", lost) in logged
    # What CreateTags sent is what the controller's IAM policy allows on a running instance.
    sent = {t["Key"] for call in faults.requests["CreateTags"] for t in call["Tags"]}
    assert sent == _registered_tag_keys()


async def test_a_users_name_tag_survives_registration(
    kube: KubeClient,
    moto: Moto,
    cleanup: list[str],
    session: AWSSession,
    telemetry: Telemetry,
    faults: FaultInjector,
) -> None:
    """A Name from the EC2NodeClass's tags (seed 003 sets one) wins over the node's name, as in
    Karpenter; an instance without one is still named after its node."""
    cluster = f"tag-{secrets.token_hex(4)}"
    named = _launch(moto, cluster, Name="karpenter-batch", team="batch")
    plain = _launch(moto, cluster)
    named_claim = await _claim(kube, cleanup, named)
    plain_claim = await _claim(kube, cleanup, plain)
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS)
    controller = TaggingController(
        kube, informed.view, Instances(await session.client("ec2"), cluster_name=cluster)
    )
    faults.requests.pop("CreateTags", None)
    async with informed.running():
        await controller.reconcile_once()
    assert _tags(moto, named.instance_id)["Name"] == "karpenter-batch"
    assert _tags(moto, named.instance_id)["karpenter.sh/nodeclaim"] == named_claim
    assert _tags(moto, plain.instance_id)["Name"] == f"node-{plain_claim}"
    sent = {
        call["Resources"][0]: sorted(t["Key"] for t in call["Tags"])
        for call in faults.requests["CreateTags"]
    }
    assert sent == {
        named.instance_id: ["eks:eks-cluster-name", "karpenter.sh/nodeclaim"],
        plain.instance_id: ["Name", "eks:eks-cluster-name", "karpenter.sh/nodeclaim"],
    }
    assert await _annotation(kube, named_claim) == "true"


def _registered_tag_keys() -> set[str]:
    """The tag keys deploy/iam lets the controller add to an existing instance of the cluster
    (the CreateTags statement conditioned on the instance's own tags)."""
    statements = json.loads(POLICY.read_text())["Statement"]
    [statement] = [
        s
        for s in statements
        if s["Action"] == "ec2:CreateTags"
        and "aws:ResourceTag/kubernetes.io/cluster/${CLUSTER_NAME}"
        in s["Condition"].get("StringEquals", {})
    ]
    return set(statement["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"])
