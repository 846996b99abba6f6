"""Structured JSON logs through orjson, with fields bound per reconcile (house rule 12).

Messages are fixed lowercase events ("acquired lease"); variables travel as fields so logs can be
queried. `bind()` attaches fields such as `controller` or `nodeclaim` to every record emitted inside
a block, through a contextvar, so each asyncio task carries its own. The JSON keys follow
Karpenter's zap output (`level`, `time`, `logger`, `message`).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import logging
import sys
import types
from collections.abc import Iterator, Mapping
from typing import IO, Final, Literal

import orjson

LogLevel = Literal["debug", "info", "warning", "error"]

LEVELS: Final[Mapping[LogLevel, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_BOUND: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "karpy_log_fields", default=types.MappingProxyType({})
)

# Attributes every LogRecord has; anything else on a record came from `extra=` and becomes a field.
_STANDARD_ATTRS: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


@contextlib.contextmanager
def bind(**fields: object) -> Iterator[None]:
    """Add `fields` to every log record emitted in this block (and tasks it starts)."""
    token = _BOUND.set({**_BOUND.get(), **fields})
    try:
        yield
    finally:
        _BOUND.reset(token)


def bound_fields() -> Mapping[str, object]:
    """The fields currently bound by `bind()`."""
    return _BOUND.get()


class JSONFormatter(logging.Formatter):
    """Formats each record as one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "level": record.levelname.lower(),
            "time": datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_BOUND.get())
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info is not None:
            entry["error"] = repr(record.exc_info[1])
            entry["stacktrace"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


WIRE_LOGGERS: Final = ("botocore", "aiobotocore", "urllib3")
"""Libraries whose debug output is the wire itself: the AWS SDK logs every request's headers and
signed canonical request, which carry the access key id and the session token. Kept at info
whatever karpy's level, so `debug` never puts a credential in the logs; karpy's own AWS spans
and logs say which calls were made."""


def configure(level: LogLevel, *, stream: IO[str] | None = None) -> logging.Handler:
    """Send all logs (karpy's and its libraries') to `stream` as JSON at `level`, the
    WIRE_LOGGERS' at info at most.

    Side effects: replaces the root logger's handlers, sets the WIRE_LOGGERS' levels. Returns
    the installed handler.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[level])
    for name in WIRE_LOGGERS:
        logging.getLogger(name).setLevel(max(LEVELS[level], logging.INFO))
    return handler
