"""Karpenter's operator_<kind>_status_condition_transitions_total / _transition_seconds and
operator_<kind>_termination_* series, from the conditions and deletion a NodeClaim shows over
time (cluster state filled as informers fill it)."""

from __future__ import annotations

import datetime
from typing import Any

from karpy.apis.codec import from_dict
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.controllers.metrics.conditions import ConditionTransitions
from karpy.controllers.metrics.state import StateMetrics
from karpy.kube import kinds
from karpy.kube.resources import Item, ObjectRef
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy.state.cluster import ClusterState
from karpy.state.view import ClusterView
from karpy_aws.apis.ec2nodeclass import (
    AMISelectorTerm,
    EC2NodeClass,
    EC2NodeClassSpec,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
)
from karpy_aws.apis.ec2nodeclass_status import EC2NodeClassStatus
from karpy_aws.apis.kinds import EC2NODECLASSES
from tests.support.metrics import sample

T0 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


def _at(seconds: float) -> str:
    return (T0 + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _claim(launched: str, since: float, *, deleted: float | None = None) -> Item[NodeClaim]:
    metadata: dict[str, Any] = {"name": "c1", "creationTimestamp": _at(0)}
    if deleted is not None:
        metadata["deletionTimestamp"] = _at(deleted)
        metadata["finalizers"] = ["karpenter.sh/termination"]
    claim = from_dict(
        NodeClaim,
        {
            "metadata": metadata,
            "spec": {
                "requirements": [],
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "x",
                },
            },
            "status": {
                "conditions": [
                    {
                        "type": "Launched",
                        "status": launched,
                        "reason": launched,
                        "message": "",
                        "lastTransitionTime": _at(since),
                    }
                ]
            },
        },
    )
    ref = ObjectRef(kind="NodeClaim", namespace="", name="c1", uid="uid-c1", resource_version="1")
    return Item(ref=ref, obj=claim)


async def test_transitions_durations_and_termination_of_a_nodeclaim(telemetry: Telemetry) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    claims = state.register(kinds.NODECLAIMS)
    for kind in (kinds.NODES, kinds.NODEPOOLS, kinds.PODS):
        state.register(kind).replace([])
    claims.replace([_claim("Unknown", 0)])
    state.mark_listed()
    view = ClusterView(state)
    clock = FakeClock(T0 - datetime.timedelta(seconds=1))  # karpy started before c1 was made
    controller = ConditionTransitions(view, metrics=telemetry.metrics, clock=clock)
    name = "operator_nodeclaim_status_condition"

    await controller.reconcile("nodeclaim/c1")
    # A NodeClaim made since start: its first condition is a transition.
    appeared = f'{name}_transitions_total{{reason="Unknown",status="Unknown",type="Launched"}}'
    assert sample(telemetry, appeared) == 1

    claims.replace([_claim("True", 5)])
    await controller.reconcile("nodeclaim/c1")
    launched = f'{name}_transitions_total{{reason="True",status="True",type="Launched"}}'
    assert sample(telemetry, launched) == 1
    held = f'{name}_transition_seconds_sum{{reason="Unknown",status="Unknown",type="Launched"}}'
    assert sample(telemetry, held) == 5
    await controller.reconcile("nodeclaim/c1")  # no change, no transition
    assert sample(telemetry, launched) == 1

    claims.replace([_claim("True", 5, deleted=10)])
    clock.set(T0 + datetime.timedelta(seconds=12))
    await controller.reconcile("nodeclaim/c1")
    StateMetrics(view, cloudprovider=None, telemetry=telemetry, clock=clock)  # type: ignore[arg-type]
    terminating = 'operator_nodeclaim_termination_current_time_seconds{name="c1",namespace=""}'
    assert sample(telemetry, terminating) == 2

    claims.replace([])
    clock.set(T0 + datetime.timedelta(seconds=14))
    await controller.reconcile("nodeclaim/c1")
    assert sample(telemetry, "operator_nodeclaim_termination_duration_seconds_count") == 1
    assert sample(telemetry, "operator_nodeclaim_termination_duration_seconds_sum") == 4
    assert sample(telemetry, terminating) == 0


def _nodeclass(ready: str, since: float, *, deleted: float | None = None) -> Item[EC2NodeClass]:
    condition = Condition(
        type="Ready",
        status=ConditionStatus(ready),
        reason=ready,
        message="",
        last_transition_time=T0 + datetime.timedelta(seconds=since),
    )
    metadata = ObjectMeta(
        name="default",
        creation_timestamp=T0,
        deletion_timestamp=None if deleted is None else T0 + datetime.timedelta(seconds=deleted),
        finalizers=() if deleted is None else ("karpenter.k8s.aws/termination",),
    )
    nodeclass = EC2NodeClass(
        metadata=metadata,
        spec=EC2NodeClassSpec(
            role="node-role",
            subnet_selector_terms=(SubnetSelectorTerm(tags={"discovery": "test"}),),
            security_group_selector_terms=(SecurityGroupSelectorTerm(tags={"discovery": "test"}),),
            ami_selector_terms=(AMISelectorTerm(alias="al2023@latest"),),
        ),
        status=EC2NodeClassStatus(conditions=(condition,)),
    )
    ref = ObjectRef(
        kind="EC2NodeClass", namespace="", name="default", uid="uid-nc", resource_version="1"
    )
    return Item(ref=ref, obj=nodeclass)


async def test_the_providers_nodeclass_has_its_own_condition_and_termination_series(
    telemetry: Telemetry,
) -> None:
    state = ClusterState(metrics=telemetry.metrics)
    nodeclasses = state.register(EC2NODECLASSES)
    for kind in (kinds.NODES, kinds.NODECLAIMS, kinds.NODEPOOLS, kinds.PODS):
        state.register(kind).replace([])
    nodeclasses.replace([_nodeclass("Unknown", 0)])
    state.mark_listed()
    view = ClusterView(state)
    clock = FakeClock(T0 - datetime.timedelta(seconds=1))
    controller = ConditionTransitions(
        view, metrics=telemetry.metrics, clock=clock, nodeclass_kinds=(EC2NODECLASSES,)
    )
    assert EC2NODECLASSES in controller.spec().reads
    StateMetrics(
        view,
        cloudprovider=None,  # type: ignore[arg-type]
        telemetry=telemetry,
        clock=clock,
        nodeclass_kinds=(EC2NODECLASSES,),
    )
    name = "operator_ec2nodeclass_status_condition"
    labels = 'name="default",namespace="",reason="Unknown",status="Unknown",type="Ready"'
    assert sample(telemetry, f"{name}_count{{{labels}}}") == 1

    await controller.reconcile("ec2nodeclass/default")
    nodeclasses.replace([_nodeclass("True", 30)])
    await controller.reconcile("ec2nodeclass/default")
    ready = f'{name}_transitions_total{{reason="True",status="True",type="Ready"}}'
    assert sample(telemetry, ready) == 1
    held = f'{name}_transition_seconds_sum{{reason="Unknown",status="Unknown",type="Ready"}}'
    assert sample(telemetry, held) == 30
    clock.set(T0 + datetime.timedelta(seconds=40))
    current = f"{name}_current_status_seconds{{{labels.replace('Unknown', 'True')}}}"
    assert sample(telemetry, current) == 10

    # Deleted, held by the provider's finalizer, then gone.
    nodeclasses.replace([_nodeclass("True", 30, deleted=50)])
    clock.set(T0 + datetime.timedelta(seconds=53))
    await controller.reconcile("ec2nodeclass/default")
    terminating = (
        'operator_ec2nodeclass_termination_current_time_seconds{name="default",namespace=""}'
    )
    assert sample(telemetry, terminating) == 3
    nodeclasses.replace([])
    clock.set(T0 + datetime.timedelta(seconds=56))
    await controller.reconcile("ec2nodeclass/default")
    assert sample(telemetry, "operator_ec2nodeclass_termination_duration_seconds_count") == 1
    assert sample(telemetry, "operator_ec2nodeclass_termination_duration_seconds_sum") == 6
