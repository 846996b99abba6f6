"""deploy/iam policies: valid, narrowed by tags, and covering every call karpy_aws makes."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import botocore.session
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
IAM = ROOT / "deploy" / "iam"
SOURCES = ROOT / "providers" / "aws" / "karpy_aws"
# karpy_aws_emulator plays AWS and the kubelet for tests and the demo; the controller never
# runs it, so its calls need no place in the controller's policy.
NOT_CONTROLLER = SOURCES / "emulator"
PLACEHOLDERS = {
    "AWS_PARTITION",
    "AWS_REGION",
    "AWS_ACCOUNT_ID",
    "CLUSTER_NAME",
    "NODE_ROLE_NAME",
    "INTERRUPTION_QUEUE_NAME",
}
# IAM action prefixes of the services karpy_aws talks to.
SERVICES = {
    "ec2": "ec2",
    "ssm": "ssm",
    "pricing": "pricing",
    "iam": "iam",
    "eks": "eks",
    "sqs": "sqs",
}
# Actions with no resource-level permissions in AWS: a tag condition is impossible for them.
UNSCOPABLE = re.compile(r"^(ec2:Describe.*|pricing:GetProducts|ecr:GetAuthorizationToken)$")


def _policy(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((IAM / name).read_text())
    assert document["Version"] == "2012-10-17"
    return document


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("controller-policy.json", id="controller"),
        pytest.param("node-role-policy.json", id="node"),
        pytest.param("node-role-trust-policy.json", id="trust"),
    ],
)
def test_policies_are_valid_and_use_only_documented_placeholders(name: str) -> None:
    text = (IAM / name).read_text()
    json.loads(text)
    assert set(re.findall(r"\$\{(\w+)\}", text)) <= PLACEHOLDERS
    sids = [s["Sid"] for s in _policy(name)["Statement"]]
    assert len(sids) == len(set(sids))
    readme = (IAM / "README.md").read_text()
    if name == "controller-policy.json":
        for sid in sids:
            assert sid in readme, f"{sid} is not explained in deploy/iam/README.md"


def _operations_called() -> set[tuple[str, str]]:
    """(service, Operation) for every call()/paginate() literal in the controller's code."""
    session = botocore.session.get_session()
    models = {s: session.get_service_model(s) for s in SERVICES}
    found: set[tuple[str, str]] = set()
    for path in SOURCES.rglob("*.py"):
        if path.is_relative_to(NOT_CONTROLLER):
            continue
        for op in re.findall(r'(?:call|paginate)\(\s*"(\w+)"', path.read_text()):
            owners = [s for s, m in models.items() if op in m.operation_names]
            assert owners, f"{path.name}: {op} is no operation of {sorted(SERVICES)}"
            found.update((s, op) for s in owners)
    return found


def test_controller_policy_allows_every_call_karpy_aws_makes() -> None:
    allowed = {a for s in _policy("controller-policy.json")["Statement"] for a in _actions(s)}
    called = _operations_called()
    assert ("ec2", "CreateLaunchTemplate") in called
    assert ("sqs", "ReceiveMessage") in called  # found in the interruption subpackage too
    # An operation name can exist in several services (e.g. DescribeInstances is not in ssm);
    # at least one owner's action must be allowed.
    by_op: dict[str, set[str]] = {}
    for service, op in called:
        by_op.setdefault(op, set()).add(f"{SERVICES[service]}:{op}")
    missing = {op for op, actions in by_op.items() if not actions & allowed}
    assert not missing, f"controller-policy.json does not allow {sorted(missing)}"


def test_every_mutating_controller_action_is_narrowed() -> None:
    for statement in _policy("controller-policy.json")["Statement"]:
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"]
        resources = [resources] if isinstance(resources, str) else resources
        for action in _actions(statement):
            if UNSCOPABLE.match(action):
                continue
            narrowed = "Condition" in statement or all(r != "*" for r in resources)
            assert narrowed, f"{statement['Sid']}: {action} on * without a condition"


def test_destructive_actions_require_the_cluster_ownership_tag() -> None:
    destructive = {
        "ec2:TerminateInstances",
        "ec2:DeleteLaunchTemplate",
        "iam:DeleteInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
    }
    for statement in _policy("controller-policy.json")["Statement"]:
        if destructive & set(_actions(statement)):
            equals = statement["Condition"]["StringEquals"]
            assert equals["aws:ResourceTag/kubernetes.io/cluster/${CLUSTER_NAME}"] == "owned"


def test_creating_calls_require_request_tags() -> None:
    for statement in _policy("controller-policy.json")["Statement"]:
        actions = set(_actions(statement))
        creates_resources = any(
            "instance/*" in r or "instance-profile/*" in r or "launch-template/*" in r
            for r in (
                statement["Resource"]
                if isinstance(statement["Resource"], list)
                else [statement["Resource"]]
            )
        )
        if actions & {"ec2:CreateLaunchTemplate", "iam:CreateInstanceProfile"} or (
            actions & {"ec2:RunInstances", "ec2:CreateFleet"}
            and creates_resources
            and "ResourceTag" not in json.dumps(statement.get("Condition", {}))
        ):
            condition = json.dumps(statement["Condition"])
            assert "aws:RequestTag/kubernetes.io/cluster/${CLUSTER_NAME}" in condition
