"""deploy/aws/interruption-queue.json routes to the queue exactly the events karpy acts on."""

from __future__ import annotations

import json
from pathlib import Path

from karpy_aws.controllers.interruption.messages import _EC2_KINDS, SOURCE_EC2, SOURCE_HEALTH

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "aws" / "interruption-queue.json"


def test_every_rule_targets_the_queue_and_every_handled_event_has_a_rule() -> None:
    resources = json.loads(TEMPLATE.read_text())["Resources"]
    rules = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Events::Rule"]
    routed = set()
    for rule in rules:
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": ["KarpyInterruptionQueue", "Arn"]}
        pattern = rule["EventPattern"]
        routed |= {(s, d) for s in pattern["source"] for d in pattern["detail-type"]}
    handled = {(SOURCE_EC2, kind) for kind in _EC2_KINDS} | {(SOURCE_HEALTH, "AWS Health Event")}
    assert routed == handled
    policy = resources["KarpyInterruptionQueuePolicy"]["Properties"]["PolicyDocument"]
    allowed = policy["Statement"][0]
    assert "events.amazonaws.com" in allowed["Principal"]["Service"]
    assert allowed["Action"] == "sqs:SendMessage"
