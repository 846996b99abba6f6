"""karpy on AWS under pressure: throttled, its cheapest pools out of capacity, its first look at
the instance types failing, and its interruption queue full of junk.

The trial is `tests.support.pressure.pressure_trial` (its docstring says what presses and how);
here it runs short (DescribeInstanceTypes failing 5 s, half the calls throttled 20 s, 60
messages), and `benchmarks/faults.py --scenario pressure` runs it long (a minute, 1,000
messages). It proves: every pod runs, on the offerings that had capacity; karpy's request rate
stayed bounded while it was refused (botocore's backoff and karpy's own, no hot loop: the
pressure layer records every call); every message was deleted, the malformed ones counted as
`unknown`; karpy never stopped (a daemon failure fails the test from `running_daemon`).
"""

from __future__ import annotations

import logging
import secrets

import pytest
from kubernetes_asyncio import client

from karpy.localcluster import ClusterInfo
from karpy.operator.demo_aws import Emulator
from tests.e2e.test_aws_walkthrough import emulator  # noqa: F401 - the fixture
from tests.support.marks import CHAIN_A
from tests.support.pressure import malformed, pressure_trial

pytestmark = [
    pytest.mark.usefixtures("karpy_crds"),
    pytest.mark.aws,
    CHAIN_A,
    # The emulator's start, about 30 s of deliberate backoff after the throttled window, the
    # queue's drain and the clean-up: some 2 minutes on a quiet machine, over 5 at a load
    # average of 40 (other work on the same two cores).
    pytest.mark.timeout(600),
]

log = logging.getLogger(__name__)

MESSAGES = 60
MAX_MEAN_RATE = 20.0
"""Calls per second karpy may average while it is throttled: a scale-out of a few nodes needs a
handful; a retry loop without backoff makes hundreds (moto answers in milliseconds)."""


async def test_karpy_places_every_pod_and_drains_its_queue_under_pressure(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    namespace: str,
    emulator: Emulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caller = f"AKIAKARPY{secrets.token_hex(6).upper()}"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", caller)
    figures = await pressure_trial(
        cluster_info,
        api_client,
        namespace,
        emulator,
        start_failing=5.0,
        throttled=20.0,
        pods=8,
        sent=MESSAGES,
        caller=caller,
    )
    log.info("under pressure: %s", figures)
    # Every pod runs, and on an offering that had capacity.
    assert figures.instances
    assert figures.pods_on_instances
    assert ("m5.large", True) not in figures.instances
    assert ("m5.large", False) not in figures.instances
    assert ("m5.xlarge", True) not in figures.instances
    # The pressure was felt, and answered with backoff.
    assert figures.injected.get("InternalError", 0) > 0
    assert figures.injected.get("RequestLimitExceeded", 0) > 0
    assert figures.launches > 0
    assert figures.mean_rate <= MAX_MEAN_RATE, figures
    # The queue: every message deleted once, the malformed ones counted as unknown.
    assert figures.received == MESSAGES
    assert figures.deleted == MESSAGES
    assert figures.received_unknown == malformed(MESSAGES)
    assert figures.left == 0
