"""Instance status polling on the real local control plane, with moto's instances.

moto reports every instance's status checks as ``ok`` and schedules no maintenance, so the
statuses EC2 would report for a failing host or a planned retirement are given through the fault
injector (checked against botocore's output model); the request karpy sent still goes to the
fault injector's record, and the instances are moto's. An impaired instance's NodeClaim is
deleted with a termination deadline of now, an instance with a scheduled event is drained
without one, completed events and healthy instances are left alone. The emulator's own stand-in
for a failing host (an instance reported impaired with ReportInstanceStatus fails its check,
which moto lacks) is checked the same way, for the end-to-end tier that meets it.
"""

from __future__ import annotations

import secrets
from typing import Any

import attrs
import pytest

from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.client import KubeClient
from karpy.kube.events import REPORTING_CONTROLLER
from karpy.kube.kinds import NODECLAIMS
from karpy.runtime.clock import FakeClock
from karpy.runtime.telemetry import Telemetry
from karpy_aws.controllers.instancestatus import InstanceStatusController
from karpy_aws.session import AWSSession
from tests.support.kubehttp import KubeHTTP
from tests.support.providers import Informed

from .conftest import FaultInjector, Moto, boto_client, launch_tagged, make_nodeclaim
from .test_aws_emulator_exceptions import _output, _problems

pytestmark = [pytest.mark.aws, pytest.mark.cluster]

HOLD = "karpy.test/hold"
"""A finalizer nothing removes, so a deleted NodeClaim stays readable."""


def _status(
    instance_id: str,
    *,
    instance: str = "ok",
    system: str = "ok",
    events: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    return {
        "InstanceId": instance_id,
        "AvailabilityZone": "us-west-2a",
        "InstanceState": {"Code": 16, "Name": "running"},
        "InstanceStatus": {
            "Status": instance,
            "Details": [
                {"Name": "reachability", "Status": "passed" if instance == "ok" else "failed"}
            ],
        },
        "SystemStatus": {
            "Status": system,
            "Details": [
                {"Name": "reachability", "Status": "passed" if system == "ok" else "failed"}
            ],
        },
        "Events": [{"Code": code, "Description": text} for code, text in events],
    }


async def _claim(kube: KubeClient, cleanup: list[str], provider_id: str) -> NodeClaim:
    base = make_nodeclaim(name=f"health-{secrets.token_hex(4)}")
    claim = attrs.evolve(base, metadata=attrs.evolve(base.metadata, finalizers=(HOLD,)))
    cleanup.append(NODECLAIMS.object_path(claim.metadata.name or ""))
    created = await kube.create(NODECLAIMS, claim)
    return await kube.patch_status(
        NODECLAIMS,
        created.metadata.name or "",
        attrs.evolve(created.status, provider_id=provider_id),
    )


async def test_impaired_instances_are_replaced_and_scheduled_events_drained(
    kube: KubeClient,
    kube_http: KubeHTTP,
    session: AWSSession,
    faults: FaultInjector,
    moto: Moto,
    cleanup: list[str],
) -> None:
    cluster = f"cluster-{secrets.token_hex(4)}"
    cases = ("impaired", "system", "scheduled", "completed", "healthy")
    instances = {case: launch_tagged(moto, cluster) for case in cases}
    claims = {case: await _claim(kube, cleanup, pid) for case, (_, pid) in instances.items()}
    ids = {case: iid for case, (iid, _) in instances.items()}
    answer = {
        "InstanceStatuses": [
            _status(ids["impaired"], instance="impaired"),
            _status(ids["system"], system="impaired"),
            _status(
                ids["scheduled"],
                events=(("instance-retirement", "The instance is running on degraded hardware"),),
            ),
            _status(
                ids["completed"],
                events=(("system-reboot", "[Completed] The instance was rebooted"),),
            ),
            _status(ids["healthy"]),
        ]
    }
    assert _problems(answer, _output("ec2", "DescribeInstanceStatus"), "answer") == []
    faults.answer("DescribeInstanceStatus", answer)
    telemetry = Telemetry.setup(service_name="tests")
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS)
    clock = FakeClock()
    try:
        async with informed.running() as view:
            controller = InstanceStatusController(
                kube, view, await session.client("ec2"), clock=clock, telemetry=telemetry
            )
            deleted = await controller.act()
    finally:
        telemetry.shutdown()
    # Listed, not asked for by id: one instance already gone would fail a call naming it.
    assert "InstanceIds" not in faults.requests["DescribeInstanceStatus"][-1]
    assert sorted(deleted) == sorted(
        claims[c].metadata.name or "" for c in ("impaired", "system", "scheduled")
    )
    for case, claim in claims.items():
        found: NodeClaim = await kube.get(NODECLAIMS, claim.metadata.name or "")
        stamped = wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in found.metadata.annotations
        reasons = [
            r
            for _, r in kube_http.events_about(
                found.metadata.uid or "", component=REPORTING_CONTROLLER
            )
        ]
        if case in ("impaired", "system"):
            assert found.metadata.deletion_timestamp is not None, case
            assert stamped, case  # replaced at once: no waiting on its pods
            assert reasons == ["InstanceUnhealthy"], case
        elif case == "scheduled":
            assert found.metadata.deletion_timestamp is not None
            assert not stamped  # drained as usual, ahead of the event
            assert reasons == ["InstanceUnhealthy"]
        else:
            assert found.metadata.deletion_timestamp is None, case
            assert reasons == [], case


async def test_an_instance_reported_impaired_in_the_emulator_is_replaced(
    kube: KubeClient, session: AWSSession, moto: Moto, cleanup: list[str]
) -> None:
    # The emulator's own stand-in (karpy_aws_emulator.instancestatus), which a process run
    # against it (the end-to-end tier) meets: ReportInstanceStatus impaired, then moto's
    # DescribeInstanceStatus reports the instance's check failed.
    cluster = f"cluster-{secrets.token_hex(4)}"
    sick_id, sick_pid = launch_tagged(moto, cluster)
    well_id, well_pid = launch_tagged(moto, cluster)
    sick = await _claim(kube, cleanup, sick_pid)
    well = await _claim(kube, cleanup, well_pid)
    ec2 = boto_client(moto, "ec2")
    ec2.report_instance_status(Instances=[sick_id], Status="impaired", ReasonCodes=["unresponsive"])
    answer = ec2.describe_instance_status(InstanceIds=[sick_id, well_id])
    answer.pop("ResponseMetadata")
    assert _problems(answer, _output("ec2", "DescribeInstanceStatus"), "answer") == []
    statuses = {s["InstanceId"]: s for s in answer["InstanceStatuses"]}
    assert statuses[sick_id]["InstanceStatus"]["Status"] == "impaired"
    assert statuses[well_id]["InstanceStatus"]["Status"] == "ok"
    telemetry = Telemetry.setup(service_name="tests")
    informed = Informed(kube, telemetry)
    informed.inform(NODECLAIMS)
    try:
        async with informed.running() as view:
            controller = InstanceStatusController(
                kube, view, await session.client("ec2"), clock=FakeClock(), telemetry=telemetry
            )
            deleted = await controller.act()
    finally:
        telemetry.shutdown()
    assert deleted == (sick.metadata.name,)
    found: NodeClaim = await kube.get(NODECLAIMS, well.metadata.name or "")
    assert found.metadata.deletion_timestamp is None
    # Reported well again, it is well again.
    ec2.report_instance_status(Instances=[sick_id], Status="ok", ReasonCodes=["other"])
    (status,) = ec2.describe_instance_status(InstanceIds=[sick_id])["InstanceStatuses"]
    assert status["InstanceStatus"]["Status"] == "ok"


def test_moto_reports_every_instance_healthy(moto: Moto) -> None:
    # The reason the statuses above are given by hand: moto never fails a status check of an
    # instance nobody reported and schedules no events, so nothing could be found impaired or
    # due for maintenance.
    instance_id, _ = launch_tagged(moto, f"cluster-{secrets.token_hex(4)}")
    (status,) = boto_client(moto, "ec2").describe_instance_status(InstanceIds=[instance_id])[
        "InstanceStatuses"
    ]
    assert status["InstanceStatus"]["Status"] == "ok"
    assert status["SystemStatus"]["Status"] == "ok"
    assert not status.get("Events")
