"""JSON log lines via orjson with fields bound per block (and per task)."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from karpy.runtime import logging as karpy_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    wire = {name: logging.getLogger(name).level for name in karpy_logging.WIRE_LOGGERS}
    buffer = io.StringIO()
    karpy_logging.configure("debug", stream=buffer)
    yield buffer
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])
    for name, level in wire.items():
        logging.getLogger(name).setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_record_is_one_json_object_with_extra_fields(stream: io.StringIO) -> None:
    logging.getLogger("karpy.test").info("launched nodeclaim", extra={"nodeclaim": "default-x"})
    [entry] = lines(stream)
    assert entry["level"] == "info"
    assert entry["logger"] == "karpy.test"
    assert entry["message"] == "launched nodeclaim"
    assert entry["nodeclaim"] == "default-x"
    assert str(entry["time"]).endswith("+00:00")


def test_bound_fields_apply_inside_the_block_only(stream: io.StringIO) -> None:
    log = logging.getLogger("karpy.test")
    with karpy_logging.bind(controller="nodeclaim.lifecycle", nodeclaim="a"):
        log.info("inside")
        with karpy_logging.bind(node="n1"):
            log.info("nested")
    log.info("outside")
    inside, nested, outside = lines(stream)
    assert inside["controller"] == "nodeclaim.lifecycle"
    assert nested["node"] == "n1"
    assert nested["nodeclaim"] == "a"
    assert "controller" not in outside


async def test_bound_fields_are_per_task(stream: io.StringIO) -> None:
    log = logging.getLogger("karpy.test")

    async def work(name: str) -> None:
        with karpy_logging.bind(pod=name):
            await asyncio.sleep(0.01)
            log.info("reconciled")

    async with asyncio.TaskGroup() as group:
        group.create_task(work("a"))
        group.create_task(work("b"))
    reconciled = [entry for entry in lines(stream) if entry["message"] == "reconciled"]
    assert sorted(str(entry["pod"]) for entry in reconciled) == ["a", "b"]


def test_exceptions_carry_error_and_stacktrace(stream: io.StringIO) -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("karpy.test").exception("reconciler error")
    [entry] = lines(stream)
    assert entry["error"] == "ValueError('bad')"
    assert "Traceback" in str(entry["stacktrace"])


def test_level_filters(stream: io.StringIO) -> None:
    karpy_logging.configure("warning", stream=stream)
    logging.getLogger("karpy.test").info("hidden")
    logging.getLogger("karpy.test").warning("shown")
    assert [entry["message"] for entry in lines(stream)] == ["shown"]


def test_debug_leaves_out_the_aws_sdks_wire_lines(stream: io.StringIO) -> None:
    """botocore logs each request's headers and canonical request (the access key id and the
    session token) at debug: never shown, even at karpy's debug; its info lines still are."""
    logging.getLogger("karpy.test").debug("decided")
    logging.getLogger("botocore.endpoint").debug("Sending http request: X-Amz-Security-Token")
    logging.getLogger("aiobotocore.endpoint").debug("Sending http request")
    logging.getLogger("botocore.credentials").info("Found credentials in environment variables.")
    assert [entry["message"] for entry in lines(stream)] == [
        "decided",
        "Found credentials in environment variables.",
    ]
