"""Process options, grouped by concern, loaded from flags and the environment.

Karpenter's operators already know its settings (`BATCH_IDLE_DURATION`, `METRICS_PORT`, ...), so
karpy uses the same environment variable names and kebab-case flags wherever Karpenter has one;
durations use Go's syntax ("1s", "500ms", "1m30s"), parsed by the same grammar as the API's
(`karpy.apis.duration`). A flag overrides its environment variable, which
overrides the default. The result is one frozen `Options` value that `operator.wiring` hands to
constructors: nothing reads the environment anywhere else (house rule 5). docs/configuration.md
explains every default.
"""

from __future__ import annotations

import argparse
import re
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, TypeVar

import attrs

from karpy.apis.duration import duration_seconds, format_duration
from karpy.runtime.backoff import Backoff
from karpy.runtime.logging import LEVELS, LogLevel

T = TypeVar("T")


class OptionsError(ValueError):
    """A flag or environment variable has a value karpy cannot use; the message names it."""


@attrs.frozen
class BatchingOptions:
    """The provisioning batch window (Karpenter's batcher)."""

    idle_duration: float = 1.0
    """Seconds without a new pending pod after which a batch closes (pods come in bursts)."""
    max_duration: float = 10.0
    """Upper bound in seconds on one batch window, so a steady trickle still gets scheduled."""


@attrs.frozen
class SchedulingOptions:
    """How the provisioner's solver treats soft constraints (Karpenter's names and values)."""

    preference_policy: str = "Respect"
    """PREFERENCE_POLICY: `Respect` tries preferred affinities, spreads and PreferNoSchedule
    taints first and relaxes them one at a time; `Ignore` schedules as if they were absent."""
    min_values_policy: str = "Strict"
    """MIN_VALUES_POLICY: `Strict` never launches a NodeClaim with fewer instance-type choices than
    a requirement's minValues; `BestEffort` does so as the last resort rather than leave pods
    pending."""


@attrs.frozen
class LeaderElectionOptions:
    """Leader election on a coordination.k8s.io/v1 Lease, with client-go's timings."""

    enabled: bool = True
    name: str = "karpy-leader-election"
    namespace: str = "kube-system"
    identity: str = ""
    """This replica's holderIdentity; defaults to `<hostname>_<uuid4>` as client-go does."""
    lease_duration: float = 15.0
    """Seconds a follower waits after the last observed renewal before taking over."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps retrying a renewal before it gives up leadership (and exits)."""
    retry_period: float = 2.0
    """Seconds between acquire/renew attempts (jittered by up to 20%)."""


@attrs.frozen
class ServerOptions:
    """The probe and metrics HTTP endpoints; they run on every replica, leader or not."""

    bind_address: str = "0.0.0.0"  # noqa: S104 -- probes must be reachable from the kubelet
    metrics_port: int = 8080
    health_probe_port: int = 8081


@attrs.frozen
class KubeOptions:
    """How to reach the apiserver."""

    kubeconfig: Path | None = None
    """Kubeconfig file; None means in-cluster config (service account)."""
    request_timeout: float = 30.0
    """Seconds allowed for any single non-watch API request."""
    qps: float = 200.0
    """Sustained API requests per second (Karpenter's KUBE_CLIENT_QPS default)."""
    burst: int = 300
    """Requests allowed in a burst above `qps` (Karpenter's KUBE_CLIENT_BURST default)."""


@attrs.frozen
class WatchingOptions:
    """Informer streams (see karpy.kube.watch)."""

    server_timeout: float = 300.0
    """timeoutSeconds sent with each watch; the apiserver ends the stream and karpy re-watches."""
    inactivity_timeout: float = 120.0
    """Seconds without any event (bookmarks included) after which a stream is presumed dead."""
    backoff: Backoff = attrs.field(factory=lambda: Backoff(base=1.0, cap=30.0))
    """Reconnect delays after a failed list or watch; reset once a list succeeds."""


@attrs.frozen
class ReconcileOptions:
    """Per-key error backoff for reconcilers (house rule 11: 1s to 5min, reset on success)."""

    backoff: Backoff = attrs.field(factory=lambda: Backoff(base=1.0, cap=300.0))


@attrs.frozen
class ShutdownOptions:
    grace_period: float = 25.0
    """Seconds allowed to finish in-flight reconciles after SIGTERM, below the kubelet's 30 s."""


@attrs.frozen
class TelemetryOptions:
    otlp_endpoint: str | None = None
    """OTEL_EXPORTER_OTLP_ENDPOINT; when set, spans and metrics are also exported over OTLP/HTTP."""
    service_name: str = "karpy"


@attrs.frozen
class ProviderOptions:
    """Which CloudProvider launches the NodeClaims, and for which cluster."""

    name: str = "kwok"
    """Entry-point name in the `karpy.providers` group; kwok needs no cloud, hence the default."""
    cluster_name: str = "karpy"
    """The name instances are tagged with (Karpenter's CLUSTER_NAME), so a provider can tell this
    cluster's instances from others' in the same account."""
    settings: Mapping[str, str] = attrs.field(factory=dict)
    """The provider's own settings (`--provider-setting key=value`, or the environment variable
    `KARPY_PROVIDER_SETTING_<KEY>`), passed as they are; each provider parses and checks its own
    and names the key it refuses (docs/configuration.md lists them per provider)."""
    default_instance_profile: str | None = None
    """Karpenter v0.x's aws.defaultInstanceProfile: the instance profile of translated
    Provisioners whose provider settings name none (docs/migration.md)."""


FEATURE_GATE_DEFAULTS: Final[Mapping[str, bool]] = {
    "NodeRepair": False,
    "ReservedCapacity": True,
    "SpotToSpotConsolidation": False,
    "NodeOverlay": False,
    "StaticCapacity": False,
    "CapacityBuffer": False,
}
"""Karpenter's feature gates and its defaults (FEATURE_GATES)."""

UNSUPPORTED_GATE_STATES: Final[Mapping[str, str]] = {
    "ReservedCapacity=false": (
        "karpy always launches into the capacity reservations a NodeClass selects; it cannot "
        "turn that off"
    ),
    "NodeOverlay=true": "karpy does not implement NodeOverlay",
    "StaticCapacity=true": "karpy does not implement static NodePools (spec.replicas)",
    "CapacityBuffer=true": "karpy does not implement CapacityBuffer",
}
"""Gate settings karpy refuses, because it would silently not act on them."""


@attrs.frozen
class FeatureGates:
    """Karpenter's feature gates (`FEATURE_GATES=NodeRepair=true,...`), with its defaults."""

    node_repair: bool = False
    """NodeRepair: replace nodes whose conditions match the provider's repair policies."""
    reserved_capacity: bool = True
    spot_to_spot_consolidation: bool = False
    node_overlay: bool = False
    static_capacity: bool = False
    capacity_buffer: bool = False


@attrs.frozen
class NodeRepairOptions:
    """The node health controller (runs only with the NodeRepair gate)."""

    toleration: float | None = None
    """KARPY_NODE_REPAIR_TOLERATION: seconds a repair-policy condition must hold before the node
    is replaced, overriding every provider policy's own toleration (None: the provider's, e.g.
    30 minutes for Ready=False). Mainly for tests and impatient operators."""
    unhealthy_threshold: str = "20%"
    """KARPY_NODE_REPAIR_UNHEALTHY_THRESHOLD: how many of a NodePool's nodes (an integer or a
    percentage, rounded up) may be unhealthy for repair to go on; beyond it repair stops for
    that pool (a NodeRepairBlocked event). Karpenter's fixed 20% is the default."""


@attrs.frozen
class ConsolidationOptions:
    """How consolidation searches and how much it must save (docs/consolidation.md)."""

    search: str = "karpy"
    """KARPY_CONSOLIDATION_SEARCH: `karpy` (Karpenter's order, a prefix that grows past
    an immovable node, a single node deleted before one replaced) or `karpenter`
    (Karpenter's disruption-cost order, largest prefix, first single node)."""
    min_improvement: float = 0.0
    """KARPY_CONSOLIDATION_MIN_IMPROVEMENT: the least share of the replaced nodes' price a
    replacement must save (e.g. `10%`); a NodePool's `karpy.sh/consolidation-min-improvement`
    annotation overrides it."""
    validation_delay: float = 15.0
    """KARPY_CONSOLIDATION_VALIDATION_DELAY: seconds a consolidation command waits before it is
    re-checked (Karpenter's 15 s); mainly for tests."""


@attrs.frozen
class Options:
    log_level: LogLevel = "info"
    dry_run: bool = False
    """Shadow mode (DRY_RUN / --dry-run): decide everything, write nothing to the cluster but
    events and the leader Lease; every decision is logged, evented and metered with its $/h."""
    provider: ProviderOptions = ProviderOptions()
    batching: BatchingOptions = BatchingOptions()
    scheduling: SchedulingOptions = SchedulingOptions()
    leader_election: LeaderElectionOptions = LeaderElectionOptions()
    server: ServerOptions = ServerOptions()
    kube: KubeOptions = KubeOptions()
    watching: WatchingOptions = WatchingOptions()
    reconcile: ReconcileOptions = ReconcileOptions()
    shutdown: ShutdownOptions = ShutdownOptions()
    telemetry: TelemetryOptions = TelemetryOptions()
    feature_gates: FeatureGates = FeatureGates()
    node_repair: NodeRepairOptions = NodeRepairOptions()
    consolidation: ConsolidationOptions = ConsolidationOptions()


# ------------------------------------------------------------------ value parsers


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"true", "1", "yes", "on"}:
        return True
    if lowered in {"false", "0", "no", "off", ""}:
        return False
    msg = f"invalid boolean {text!r}: expected true or false"
    raise ValueError(msg)


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


def parse_log_level(text: str) -> LogLevel:
    lowered = text.strip().lower()
    for level in LEVELS:
        if level == lowered:
            return level
    msg = f"invalid log level {text!r}: expected one of {', '.join(LEVELS)}"
    raise ValueError(msg)


def _positive_duration(text: str) -> float:
    seconds = duration_seconds(text.strip())
    if seconds <= 0:
        msg = f"invalid duration {text!r}: must be greater than zero"
        raise ValueError(msg)
    return seconds


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"invalid number {text!r}"
        raise ValueError(msg) from None
    if not value > 0:
        msg = f"invalid value {text!r}: must be greater than zero"
        raise ValueError(msg)
    return value


def _positive_int(text: str) -> int:
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


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        if value not in choices:
            msg = f"invalid value {text!r}: expected one of {', '.join(choices)}"
            raise ValueError(msg)
        return value

    return parse


_GATE_FIELDS: Final = {
    "NodeRepair": "node_repair",
    "ReservedCapacity": "reserved_capacity",
    "SpotToSpotConsolidation": "spot_to_spot_consolidation",
    "NodeOverlay": "node_overlay",
    "StaticCapacity": "static_capacity",
    "CapacityBuffer": "capacity_buffer",
}


def parse_feature_gates(text: str) -> FeatureGates:
    """`Gate=bool` pairs, comma-separated, over Karpenter's defaults (FEATURE_GATE_DEFAULTS).

    Raises ValueError naming the gate for an unknown gate, a pair without `=`, a value that is
    not true/false, a gate given twice, or a setting karpy would not act on
    (UNSUPPORTED_GATE_STATES)."""
    values = dict(FEATURE_GATE_DEFAULTS)
    seen: set[str] = set()
    for part in text.split(","):
        pair = part.strip()
        if not pair:
            continue
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep:
            msg = f"invalid feature gate {pair!r}: expected Gate=true or Gate=false"
            raise ValueError(msg)
        if name not in FEATURE_GATE_DEFAULTS:
            msg = (
                f"unknown feature gate {name!r} (known: {', '.join(sorted(FEATURE_GATE_DEFAULTS))})"
            )
            raise ValueError(msg)
        if name in seen:
            msg = f"feature gate {name!r} is given twice"
            raise ValueError(msg)
        seen.add(name)
        lowered = raw.strip().lower()
        if lowered not in {"true", "false"}:
            msg = f"feature gate {name!r}: invalid value {raw.strip()!r}: expected true or false"
            raise ValueError(msg)
        values[name] = lowered == "true"
        why = UNSUPPORTED_GATE_STATES.get(f"{name}={lowered}")
        if why is not None:
            msg = f"feature gate {name}={lowered} is not supported: {why}"
            raise ValueError(msg)
    return FeatureGates(**{_GATE_FIELDS[name]: value for name, value in values.items()})


def parse_int_or_percent(text: str) -> str:
    """A count (`3`) or a percentage (`20%`), as a PDB's maxUnavailable; returned as given."""
    value = text.strip()
    number = value.removesuffix("%")
    if not number.isdigit() or (value.endswith("%") and int(number) > 100):
        msg = f"invalid value {text!r}: expected a non-negative integer or a percentage 0%..100%"
        raise ValueError(msg)
    return value


def _non_empty(text: str) -> str:
    if not text.strip():
        msg = "must not be empty"
        raise ValueError(msg)
    return text.strip()


# ------------------------------------------------------------------ the option table


@attrs.frozen
class _Spec:
    flag: str
    env: str
    parse: Callable[[str], object]
    help: str
    takes_value: bool = True


_SPECS: Final[tuple[_Spec, ...]] = (
    _Spec("--kubeconfig", "KUBECONFIG", Path, "kubeconfig file (default: in-cluster config)"),
    _Spec("--log-level", "LOG_LEVEL", parse_log_level, "debug, info, warning or error"),
    _Spec("--provider", "KARPY_PROVIDER", _non_empty, "cloud provider (karpy.providers name)"),
    _Spec("--cluster-name", "CLUSTER_NAME", _non_empty, "cluster name instances are tagged with"),
    _Spec(
        "--default-instance-profile",
        "AWS_DEFAULT_INSTANCE_PROFILE",
        _non_empty,
        "instance profile for v1alpha5 Provisioners that name none",
    ),
    _Spec("--batch-idle-duration", "BATCH_IDLE_DURATION", _positive_duration, "batch idle window"),
    _Spec("--batch-max-duration", "BATCH_MAX_DURATION", _positive_duration, "batch max window"),
    _Spec(
        "--preference-policy",
        "PREFERENCE_POLICY",
        _one_of("Respect", "Ignore"),
        "Respect or Ignore scheduling preferences",
    ),
    _Spec(
        "--min-values-policy",
        "MIN_VALUES_POLICY",
        _one_of("Strict", "BestEffort"),
        "Strict or BestEffort minValues",
    ),
    _Spec("--metrics-port", "METRICS_PORT", parse_port, "port serving /metrics"),
    _Spec("--health-probe-port", "HEALTH_PROBE_PORT", parse_port, "port serving /healthz, /readyz"),
    _Spec("--bind-address", "BIND_ADDRESS", _non_empty, "address the probe and metrics ports bind"),
    _Spec(
        "--dry-run",
        "DRY_RUN",
        parse_bool,
        "shadow mode: decide everything, create, patch and delete nothing",
        takes_value=False,
    ),
    _Spec(
        "--disable-leader-election",
        "DISABLE_LEADER_ELECTION",
        parse_bool,
        "run controllers without a lease",
        takes_value=False,
    ),
    _Spec("--leader-election-name", "LEADER_ELECTION_NAME", _non_empty, "Lease name"),
    _Spec("--leader-election-namespace", "LEADER_ELECTION_NAMESPACE", _non_empty, "Lease ns"),
    _Spec("--leader-election-identity", "LEADER_ELECTION_IDENTITY", _non_empty, "holder id"),
    _Spec(
        "--leader-election-lease-duration",
        "LEADER_ELECTION_LEASE_DURATION",
        _positive_duration,
        "lease duration",
    ),
    _Spec(
        "--leader-election-renew-deadline",
        "LEADER_ELECTION_RENEW_DEADLINE",
        _positive_duration,
        "renew deadline",
    ),
    _Spec(
        "--leader-election-retry-period",
        "LEADER_ELECTION_RETRY_PERIOD",
        _positive_duration,
        "retry period",
    ),
    _Spec("--kube-request-timeout", "KUBE_REQUEST_TIMEOUT", _positive_duration, "API timeout"),
    _Spec("--kube-client-qps", "KUBE_CLIENT_QPS", _positive_float, "API requests per second"),
    _Spec("--kube-client-burst", "KUBE_CLIENT_BURST", _positive_int, "API request burst"),
    _Spec("--watch-timeout", "WATCH_TIMEOUT", _positive_duration, "server-side watch timeout"),
    _Spec(
        "--watch-inactivity-timeout",
        "WATCH_INACTIVITY_TIMEOUT",
        _positive_duration,
        "reconnect a silent watch after",
    ),
    _Spec("--watch-backoff-max", "WATCH_BACKOFF_MAX", _positive_duration, "max reconnect delay"),
    _Spec("--reconcile-backoff-base", "RECONCILE_BACKOFF_BASE", _positive_duration, "first retry"),
    _Spec("--reconcile-backoff-max", "RECONCILE_BACKOFF_MAX", _positive_duration, "max retry"),
    _Spec("--shutdown-grace-period", "SHUTDOWN_GRACE_PERIOD", _positive_duration, "drain deadline"),
    _Spec("--feature-gates", "FEATURE_GATES", parse_feature_gates, "Gate=bool,... (Karpenter's)"),
    _Spec(
        "--node-repair-toleration",
        "KARPY_NODE_REPAIR_TOLERATION",
        _positive_duration,
        "override every repair policy's toleration",
    ),
    _Spec(
        "--node-repair-unhealthy-threshold",
        "KARPY_NODE_REPAIR_UNHEALTHY_THRESHOLD",
        parse_int_or_percent,
        "unhealthy nodes per NodePool beyond which repair stops (count or %)",
    ),
    _Spec(
        "--consolidation-search",
        "KARPY_CONSOLIDATION_SEARCH",
        _one_of("karpy", "karpenter"),
        "karpy or karpenter consolidation search",
    ),
    _Spec(
        "--consolidation-min-improvement",
        "KARPY_CONSOLIDATION_MIN_IMPROVEMENT",
        parse_percent,
        "least price improvement of a consolidation replacement (e.g. 10%)",
    ),
    _Spec(
        "--consolidation-validation-delay",
        "KARPY_CONSOLIDATION_VALIDATION_DELAY",
        _positive_duration,
        "wait before a consolidation command is re-checked",
    ),
    _Spec("--otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", _non_empty, "OTLP/HTTP endpoint"),
    _Spec("--service-name", "OTEL_SERVICE_NAME", _non_empty, "service.name resource attribute"),
)


def _dest(spec: _Spec) -> str:
    return spec.flag.removeprefix("--").replace("-", "_")


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


def build_parser(prog: str = "karpy run") -> argparse.ArgumentParser:
    """The argparse parser for `karpy run`; every flag also reads its environment variable."""
    parser = argparse.ArgumentParser(prog=prog, description="Run the karpy operator.")
    parser.add_argument(
        PROVIDER_SETTING_FLAG,
        dest="provider_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a cloud provider setting; repeatable [env {PROVIDER_SETTING_ENV_PREFIX}<KEY>]",
    )
    for spec in _SPECS:
        # argparse %-formats help text (for %(default)s); a literal % must reach it doubled.
        helptext = f"{spec.help} [env {spec.env}]".replace("%", "%%")
        if spec.takes_value:
            parser.add_argument(spec.flag, dest=_dest(spec), default=None, help=helptext)
        else:
            parser.add_argument(spec.flag, dest=_dest(spec), action="store_const", const="true",
                                default=None, help=helptext)  # fmt: skip
    return parser


def load(argv: Sequence[str], environ: Mapping[str, str]) -> Options:
    """Build `Options` from `argv` (flags) over `environ` over defaults.

    Raises `OptionsError` naming the flag or variable for any invalid value, and for inconsistent
    combinations (e.g. a renew deadline longer than the lease duration).
    """
    namespace = build_parser().parse_args(list(argv))
    raw: dict[str, object] = {}
    for spec in _SPECS:
        flag_value = getattr(namespace, _dest(spec))
        source, text = (spec.flag, flag_value) if flag_value is not None else (spec.env, None)
        if text is None:
            text = environ.get(spec.env)
        if text is None:
            continue
        try:
            raw[_dest(spec)] = spec.parse(text)
        except ValueError as error:
            msg = f"{source}: {error}"
            raise OptionsError(msg) from error
    raw["provider_settings"] = parse_provider_settings(namespace.provider_settings, environ)
    return _assemble(raw)


def _get(raw: Mapping[str, object], key: str, default: T, kind: type[T]) -> T:
    value = raw.get(key, default)
    if not isinstance(value, kind):  # pragma: no cover - parsers guarantee the type
        msg = f"option {key}: expected {kind.__name__}, got {type(value).__name__}"
        raise OptionsError(msg)
    return value


def _assemble(raw: Mapping[str, object]) -> Options:
    d = Options()
    batching = BatchingOptions(
        idle_duration=_get(raw, "batch_idle_duration", d.batching.idle_duration, float),
        max_duration=_get(raw, "batch_max_duration", d.batching.max_duration, float),
    )
    if batching.idle_duration > batching.max_duration:
        msg = (
            f"BATCH_IDLE_DURATION ({format_duration(batching.idle_duration)}) must not exceed "
            f"BATCH_MAX_DURATION ({format_duration(batching.max_duration)})"
        )
        raise OptionsError(msg)
    le = d.leader_election
    identity = _get(raw, "leader_election_identity", "", str) or _default_identity()
    leader_election = LeaderElectionOptions(
        enabled=not _get(raw, "disable_leader_election", False, bool),
        name=_get(raw, "leader_election_name", le.name, str),
        namespace=_get(raw, "leader_election_namespace", le.namespace, str),
        identity=identity,
        lease_duration=_get(raw, "leader_election_lease_duration", le.lease_duration, float),
        renew_deadline=_get(raw, "leader_election_renew_deadline", le.renew_deadline, float),
        retry_period=_get(raw, "leader_election_retry_period", le.retry_period, float),
    )
    _check_leader_timings(leader_election)
    kubeconfig = raw.get("kubeconfig")
    watching_max = _get(raw, "watch_backoff_max", d.watching.backoff.cap, float)
    reconcile_base = _get(raw, "reconcile_backoff_base", d.reconcile.backoff.base, float)
    reconcile_max = _get(raw, "reconcile_backoff_max", d.reconcile.backoff.cap, float)
    if reconcile_base > reconcile_max:
        msg = "RECONCILE_BACKOFF_BASE must not exceed RECONCILE_BACKOFF_MAX"
        raise OptionsError(msg)
    return Options(
        log_level=parse_log_level(_get(raw, "log_level", d.log_level, str)),
        dry_run=_get(raw, "dry_run", False, bool),
        provider=ProviderOptions(
            name=_get(raw, "provider", d.provider.name, str),
            cluster_name=_get(raw, "cluster_name", d.provider.cluster_name, str),
            settings=_get(raw, "provider_settings", {}, dict),
            default_instance_profile=_optional_str(raw.get("default_instance_profile")),
        ),
        batching=batching,
        scheduling=SchedulingOptions(
            preference_policy=_get(raw, "preference_policy", d.scheduling.preference_policy, str),
            min_values_policy=_get(raw, "min_values_policy", d.scheduling.min_values_policy, str),
        ),
        leader_election=leader_election,
        server=ServerOptions(
            bind_address=_get(raw, "bind_address", d.server.bind_address, str),
            metrics_port=_get(raw, "metrics_port", d.server.metrics_port, int),
            health_probe_port=_get(raw, "health_probe_port", d.server.health_probe_port, int),
        ),
        kube=KubeOptions(
            kubeconfig=kubeconfig if isinstance(kubeconfig, Path) else None,
            request_timeout=_get(raw, "kube_request_timeout", d.kube.request_timeout, float),
            qps=_get(raw, "kube_client_qps", d.kube.qps, float),
            burst=_get(raw, "kube_client_burst", d.kube.burst, int),
        ),
        watching=WatchingOptions(
            server_timeout=_get(raw, "watch_timeout", d.watching.server_timeout, float),
            inactivity_timeout=_get(
                raw, "watch_inactivity_timeout", d.watching.inactivity_timeout, float
            ),
            backoff=Backoff(base=min(d.watching.backoff.base, watching_max), cap=watching_max),
        ),
        reconcile=ReconcileOptions(backoff=Backoff(base=reconcile_base, cap=reconcile_max)),
        shutdown=ShutdownOptions(
            grace_period=_get(raw, "shutdown_grace_period", d.shutdown.grace_period, float)
        ),
        telemetry=TelemetryOptions(
            otlp_endpoint=_optional_str(raw.get("otlp_endpoint")),
            service_name=_get(raw, "service_name", d.telemetry.service_name, str),
        ),
        feature_gates=_get(raw, "feature_gates", d.feature_gates, FeatureGates),
        node_repair=NodeRepairOptions(
            toleration=_optional_float(raw.get("node_repair_toleration")),
            unhealthy_threshold=_get(
                raw, "node_repair_unhealthy_threshold", d.node_repair.unhealthy_threshold, str
            ),
        ),
        consolidation=ConsolidationOptions(
            search=_get(raw, "consolidation_search", d.consolidation.search, str),
            min_improvement=_get(
                raw, "consolidation_min_improvement", d.consolidation.min_improvement, float
            ),
            validation_delay=_get(
                raw, "consolidation_validation_delay", d.consolidation.validation_delay, float
            ),
        ),
    )


def _optional_float(value: object) -> float | None:
    return value if isinstance(value, float) else None


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _check_leader_timings(le: LeaderElectionOptions) -> None:
    # client-go's validation: the lease outlives the renew deadline, which outlives a retry.
    if le.lease_duration <= le.renew_deadline:
        msg = (
            f"LEADER_ELECTION_LEASE_DURATION ({format_duration(le.lease_duration)}) must be "
            f"greater than LEADER_ELECTION_RENEW_DEADLINE ({format_duration(le.renew_deadline)})"
        )
        raise OptionsError(msg)
    if le.renew_deadline <= 1.2 * le.retry_period:
        msg = (
            f"LEADER_ELECTION_RENEW_DEADLINE ({format_duration(le.renew_deadline)}) must be "
            f"greater than 1.2 x LEADER_ELECTION_RETRY_PERIOD ({format_duration(le.retry_period)})"
        )
        raise OptionsError(msg)


def _default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def documented() -> list[tuple[str, str, str]]:
    """(flag, environment variable, help) of every option, for the settings reference and the
    chart's tests."""
    return [(spec.flag, spec.env, spec.help) for spec in _SPECS]
