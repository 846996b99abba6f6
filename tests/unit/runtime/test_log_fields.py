"""No log call names a field the standard library keeps for itself.

`logging` refuses an `extra` key that is a LogRecord attribute ("name", "message", ...) with a
KeyError raised from the logging call itself, and only when the level is enabled: a call at info
passes every test run at warning and breaks the reconcile that makes it in production (the
legacy controller's "created" line failed each Provisioner's first reconcile after the write,
a dry run's "withheld a write" line failed the write it withheld, and the provisioner's skipped
NodePool line would have failed its pass at debug). This reads every call in karpy and the
providers.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RESERVED = frozenset(vars(logging.LogRecord("x", logging.INFO, "p", 1, "m", (), None))) | {
    "message",
    "asctime",
}


def _reserved_extras(source: str, label: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=label)):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg != "extra" or not isinstance(keyword.value, ast.Dict):
                continue
            for key in keyword.value.keys:
                if isinstance(key, ast.Constant) and key.value in RESERVED:
                    found.append(f"{label}:{node.lineno}: {key.value!r}")
    return found


def test_no_log_call_passes_a_reserved_field() -> None:
    files = [*ROOT.joinpath("karpy").rglob("*.py"), *ROOT.joinpath("providers").rglob("*.py")]
    assert len(files) > 100
    found = [
        hit
        for path in files
        for hit in _reserved_extras(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_the_check_finds_a_reserved_field_and_the_logging_error_it_prevents() -> None:
    source = 'log.info("created", extra={"kind": "NodePool", "name": "default"})\n'
    assert _reserved_extras(source, "probe.py") == ["probe.py:1: 'name'"]
    logger = logging.getLogger("karpy.test.log_fields")
    logger.setLevel(logging.INFO)
    with pytest.raises(KeyError, match="name"):
        logger.info("created", extra={"name": "default"})
