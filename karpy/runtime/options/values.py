"""Text to value for every option: each parser raises ValueError saying what is wrong with the
text, and the loader prefixes the flag or variable it came from (karpy.runtime.options.declare).

Durations use Go's syntax ("1s", "500ms", "1m30s"), parsed by the same grammar as the API's
(`karpy.apis.duration`), because Karpenter's settings are written that way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from karpy.apis.duration import duration_seconds
from karpy.runtime.logging import LEVELS, LogLevel
from karpy.runtime.options.declare import OptionsError


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"true", "1", "yes", "on"}:
        return True
    if lowered in {"false", "0", "no", "off", ""}:
        return False
    msg = f"invalid boolean {text!r}: expected true or false"
    raise ValueError(msg)


def parse_disabled(text: str) -> bool:
    """A `DISABLE_...` variable, read as whether the thing is enabled."""
    return not parse_bool(text)


def parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        msg = f"invalid port {text!r}: expected an integer 0..65535"
        raise ValueError(msg) from None
    if not 0 <= port <= 65535:
        msg = f"invalid port {port}: expected 0..65535 (0 picks a free port)"
        raise ValueError(msg)
    return port


def parse_service(text: str) -> str:
    """A Service as name.namespace (Service names have no dots)."""
    name, dot, namespace = text.partition(".")
    if not dot or not name or not namespace or "." in namespace:
        msg = f"invalid Service {text!r}: expected name.namespace"
        raise ValueError(msg)
    return text


def parse_log_level(text: str) -> LogLevel:
    lowered = text.strip().lower()
    for level in LEVELS:
        if level == lowered:
            return level
    msg = f"invalid log level {text!r}: expected one of {', '.join(LEVELS)}"
    raise ValueError(msg)


def positive_duration(text: str) -> float:
    seconds = duration_seconds(text.strip())
    if seconds <= 0:
        msg = f"invalid duration {text!r}: must be greater than zero"
        raise ValueError(msg)
    return seconds


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"invalid number {text!r}"
        raise ValueError(msg) from None
    if not value > 0:
        msg = f"invalid value {text!r}: must be greater than zero"
        raise ValueError(msg)
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        msg = f"invalid integer {text!r}"
        raise ValueError(msg) from None
    if value < 1:
        msg = f"invalid value {text!r}: must be at least 1"
        raise ValueError(msg)
    return value


def parse_percent(text: str) -> float:
    """`"10%"` -> 0.1, for 0% <= N < 100%."""
    value = text.strip()
    try:
        number = float(value.removesuffix("%"))
    except ValueError:
        number = -1.0
    if not value.endswith("%") or not 0 <= number < 100:
        msg = f"invalid percentage {text!r}: expected 0% to 99%"
        raise ValueError(msg)
    return number / 100


def parse_int_or_percent(text: str) -> str:
    """A count (`3`) or a percentage (`20%`), as a PDB's maxUnavailable; returned as given."""
    value = text.strip()
    number = value.removesuffix("%")
    if not number.isdigit() or (value.endswith("%") and int(number) > 100):
        msg = f"invalid value {text!r}: expected a non-negative integer or a percentage 0%..100%"
        raise ValueError(msg)
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        if value not in choices:
            msg = f"invalid value {text!r}: expected one of {', '.join(choices)}"
            raise ValueError(msg)
        return value

    return parse


def non_empty(text: str) -> str:
    if not text.strip():
        msg = "must not be empty"
        raise ValueError(msg)
    return text.strip()


PROVIDER_SETTING_FLAG: Final = "--provider-setting"
PROVIDER_SETTING_ENV_PREFIX: Final = "KARPY_PROVIDER_SETTING_"
_SETTING_KEY = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


def _setting_key(key: str, *, source: str) -> str:
    if not _SETTING_KEY.fullmatch(key):
        msg = (
            f"{source}: invalid provider setting key {key!r}: expected lowercase letters, digits"
            " and dashes, e.g. 'registration-delay'"
        )
        raise OptionsError(msg)
    return key


def parse_provider_settings(flags: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The provider's settings from `KARPY_PROVIDER_SETTING_<KEY>` variables (KEY upper case with
    underscores, e.g. `KARPY_PROVIDER_SETTING_REGISTRATION_DELAY`), then from each
    `--provider-setting key=value` flag, a flag overriding the variable of the same key."""
    settings: dict[str, str] = {}
    for name in sorted(environ):
        if name.startswith(PROVIDER_SETTING_ENV_PREFIX) and name != PROVIDER_SETTING_ENV_PREFIX:
            key = name.removeprefix(PROVIDER_SETTING_ENV_PREFIX).lower().replace("_", "-")
            settings[_setting_key(key, source=name)] = environ[name]
    for flag in flags:
        key, sep, value = flag.partition("=")
        if not sep:
            msg = f"{PROVIDER_SETTING_FLAG}: expected key=value, got {flag!r}"
            raise OptionsError(msg)
        settings[_setting_key(key.strip(), source=PROVIDER_SETTING_FLAG)] = value
    return settings
