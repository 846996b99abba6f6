"""The one duration grammar karpy reads: Go's `time.ParseDuration`, as Karpenter uses it.

Karpenter has a single grammar for durations. Its API fields (`expireAfter`, `consolidateAfter`,
`terminationGracePeriod`, a budget's `duration`) are `metav1.Duration`/`NillableDuration`, decoded
by `time.ParseDuration` once the CRD's pattern has narrowed them to whole hours, minutes and
seconds ("720h", "1h30m") or "Never"; its flags (`BATCH_IDLE_DURATION`, ...) are Go durations too
and may use fractions and sub-second units ("500ms", "1.5s"). So karpy parses both with one
function here, at the codec layer, and leaves the narrowing to the CRD patterns in
`karpy.apis.meta` that the apiserver enforces. Nothing in the API or the options is a negative
duration, so a sign is rejected rather than carried around.

`duration_seconds` is the grammar and says what is wrong with a value; its callers know what the
value is called (a CRD field, a flag, a provider setting) and name it in the message they raise.
`parse_duration` is that for an API field: it names the field and turns "Never" into None.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

NEVER: Final = "Never"

# One component: a decimal number (digits before or after the point) and a unit.
_COMPONENT: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu; Go accepts both
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_EXPECTED: Final = "expected e.g. 30s, 1h30m, 720h or 500ms"


def duration_seconds(text: str) -> float:
    """Parse a Go duration ("30s", "1h30m", "500ms", "1.5h", "0") into seconds.

    Raises ValueError saying what is wrong ("invalid duration ...") without naming the value:
    the caller knows its name and puts it in front.
    """
    if text == "0":
        return 0.0
    if not text:
        msg = f"invalid duration {text!r}: empty, {_EXPECTED}"
        raise ValueError(msg)
    pos, total = 0, 0.0
    while pos < len(text):
        match = _COMPONENT.match(text, pos)
        if match is None:
            msg = f"invalid duration {text!r}: {_EXPECTED}"
            raise ValueError(msg)
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return total


def format_duration(seconds: float) -> str:
    """Render seconds as a duration `duration_seconds` reads back ("90s", "0.5s")."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"


def parse_duration(value: str, *, field_name: str) -> timedelta | None:
    """An API field's duration ("720h", "1h30m", "0s"), or None for "Never".

    Raises ValueError starting with `field_name` for anything else, so callers report the field.
    Whether a field admits "Never" is its CRD pattern's business (see `karpy.apis.meta`).
    """
    if value == NEVER:
        return None
    try:
        seconds = duration_seconds(value)
    except ValueError as error:
        msg = f"{field_name}: {error}, or {NEVER}"
        raise ValueError(msg) from None
    return timedelta(seconds=seconds)
