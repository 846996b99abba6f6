"""Text to value for every option: each parser raises ValueError saying what is wrong with the
text, and the loader prefixes the flag or variable it came from (karpy.runtime.options.declare).

Durations use Go's syntax ("1s", "500ms", "1m30s"), parsed by the same grammar as the API's
(`karpy.apis.duration`), because Karpenter's settings are written that way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

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


@attrs.frozen
class NamedProviderSetting:
    """A provider setting Karpenter's users know by its own variable and flag
    (`CLUSTER_ENDPOINT`, `--cluster-endpoint`), besides karpy's generic
    `KARPY_PROVIDER_SETTING_<KEY>` / `--provider-setting key=value`, which stay as aliases."""

    provider: str
    key: str
    """The key the provider reads (`cluster-endpoint`)."""
    env: str
    flag: str | None
    """None where Karpenter has no flag (`AWS_REGION` is the AWS SDK's variable)."""
    help: str
    switch: bool = False
    """A true/false setting whose flag may stand alone (`--isolated-vpc` means true)."""
    environment_wide: bool = False
    """The variable is not karpy's but the environment's (`AWS_REGION`, set by AWS tooling and
    pod identity webhooks): another provider leaves it alone instead of refusing it."""

    @property
    def dest(self) -> str:
        return "provider_" + self.key.replace("-", "_")


NAMED_PROVIDER_SETTINGS: Final = (
    NamedProviderSetting(
        "aws", "region", "AWS_REGION", None,
        "the AWS region; read from instance metadata (IMDS) when unset",
        environment_wide=True,
    ),
    NamedProviderSetting(
        "aws", "cluster-endpoint", "CLUSTER_ENDPOINT", "--cluster-endpoint",
        "the apiserver endpoint new nodes join; read from EKS when unset",
    ),
    NamedProviderSetting(
        "aws", "cluster-ca-bundle", "CLUSTER_CA_BUNDLE", "--cluster-ca-bundle",
        "the cluster CA (base64) new nodes trust; read from EKS when unset",
    ),
    NamedProviderSetting(
        "aws", "interruption-queue", "INTERRUPTION_QUEUE", "--interruption-queue",
        "SQS queue (name or URL) of interruption events; unset handles none",
    ),
    NamedProviderSetting(
        "aws", "vm-memory-overhead-percent", "VM_MEMORY_OVERHEAD_PERCENT",
        "--vm-memory-overhead-percent",
        "share of an instance type's memory taken off for the hypervisor (0.075)",
    ),
    NamedProviderSetting(
        "aws", "reserved-enis", "RESERVED_ENIS", "--reserved-enis",
        "ENIs per instance left out of the ENI-limited max-pods (0)",
    ),
    NamedProviderSetting(
        "aws", "isolated-vpc", "ISOLATED_VPC", "--isolated-vpc",
        "no internet egress: prices from the built-in table, not the Pricing API (false)",
        switch=True,
    ),
    NamedProviderSetting(
        "aws", "eks-control-plane", "EKS_CONTROL_PLANE", "--eks-control-plane",
        "the control plane is EKS: read version and service CIDR from DescribeCluster (false)",
        switch=True,
    ),
)  # fmt: skip
"""Karpenter's names for the AWS provider's settings, read for the selected provider only."""


def _one_of_two(
    key: str, named: tuple[str, str | None], alias: tuple[str, str | None]
) -> tuple[str, str] | None:
    """The (source, value) given under Karpenter's name or karpy's alias; both is fine only
    when they agree."""
    (named_source, named_value), (alias_source, alias_value) = named, alias
    if named_value is not None and alias_value is not None and named_value != alias_value:
        msg = (
            f"{named_source}={named_value!r} and {alias_source}={alias_value!r} both set "
            f"provider setting {key!r}, differently; give one"
        )
        raise OptionsError(msg)
    if named_value is not None:
        return named_source, named_value
    if alias_value is not None:
        return alias_source, alias_value
    return None


def parse_provider_settings(
    flags: Sequence[str],
    environ: Mapping[str, str],
    *,
    provider: str = "",
    named_flags: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """The provider's settings from `KARPY_PROVIDER_SETTING_<KEY>` variables (KEY upper case with
    underscores, e.g. `KARPY_PROVIDER_SETTING_REGISTRATION_DELAY`), then from each
    `--provider-setting key=value` flag, a flag overriding the variable of the same key.

    `provider`'s settings with Karpenter's names (NAMED_PROVIDER_SETTINGS: `CLUSTER_ENDPOINT`,
    `--cluster-endpoint`, ...) are read too; `named_flags` holds the value of each such flag
    given, by its `dest`. Karpenter's name and karpy's alias at the same level (two variables,
    or two flags) must agree, else OptionsError names both; a flag overrides a variable as
    everywhere. Another provider's named setting is refused, by name, rather than ignored,
    except a variable the wider environment sets (`AWS_REGION`), which is not karpy's.
    """
    env_values: dict[str, tuple[str, str]] = {}
    for name in sorted(environ):
        if name.startswith(PROVIDER_SETTING_ENV_PREFIX) and name != PROVIDER_SETTING_ENV_PREFIX:
            key = name.removeprefix(PROVIDER_SETTING_ENV_PREFIX).lower().replace("_", "-")
            env_values[_setting_key(key, source=name)] = (name, environ[name])
    flag_values: dict[str, tuple[str, str]] = {}
    for flag in flags:
        key, sep, value = flag.partition("=")
        if not sep:
            msg = f"{PROVIDER_SETTING_FLAG}: expected key=value, got {flag!r}"
            raise OptionsError(msg)
        key = _setting_key(key.strip(), source=PROVIDER_SETTING_FLAG)
        flag_values[key] = (f"{PROVIDER_SETTING_FLAG} {key}", value)
    _merge_named(env_values, flag_values, environ, provider=provider, named_flags=named_flags)
    settings = {key: value for key, (_, value) in env_values.items()}
    settings.update({key: value for key, (_, value) in flag_values.items()})
    return settings


def _merge_named(
    env_values: dict[str, tuple[str, str]],
    flag_values: dict[str, tuple[str, str]],
    environ: Mapping[str, str],
    *,
    provider: str,
    named_flags: Mapping[str, str | None] | None,
) -> None:
    """Add the named settings to the aliases' (source, value) by key, level by level."""
    given_flags = named_flags or {}
    for named in NAMED_PROVIDER_SETTINGS:
        flag_value = given_flags.get(named.dest)
        env_value = environ.get(named.env)
        if named.provider != provider:
            env_refused = None if named.environment_wide else env_value
            for other, given in ((named.flag, flag_value), (named.env, env_refused)):
                if given is not None:
                    msg = (
                        f"{other} is a setting of the {named.provider} provider, and the "
                        f"provider is {provider!r}"
                    )
                    raise OptionsError(msg)
            continue
        for values, source, value in (
            (env_values, named.env, env_value),
            (flag_values, named.flag or "", flag_value),
        ):
            alias = values.get(named.key)
            chosen = _one_of_two(
                named.key, (source, value), alias if alias is not None else ("", None)
            )
            if chosen is not None:
                values[named.key] = chosen
