"""Process options, grouped by concern, loaded from flags and the environment.

Karpenter's operators already know its settings (`BATCH_IDLE_DURATION`, `METRICS_PORT`, ...), so
karpy uses the same environment variable names and kebab-case flags wherever Karpenter has one.
A flag overrides its environment variable, which overrides the default. The result is one frozen
`Options` value that `operator.wiring` hands to constructors: nothing reads the environment
anywhere else (house rule 5). docs/configuration.md explains every default.

Each option is declared once, as the field it fills (`option(...)`, karpy.runtime.options.declare):
the `karpy run` parser, `load` and docs/settings.md (`documented`) are derived from the fields.
"""

from __future__ import annotations

import argparse
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Final

import attrs

from karpy.runtime.logging import LogLevel
from karpy.runtime.options.autoscaling import (
    BatchingOptions,
    ConsolidationOptions,
    InitializationOptions,
    NodeRepairOptions,
    ProviderOptions,
    SchedulingOptions,
    check_batching,
)
from karpy.runtime.options.declare import (
    OptionsError,
    Setting,
    add_arguments,
    argparse_text,
    assemble,
    declared,
    given,
    group,
    option,
)
from karpy.runtime.options.gates import (
    FEATURE_GATE_DEFAULTS,
    UNSUPPORTED_GATE_STATES,
    FeatureGates,
    parse_feature_gates,
)
from karpy.runtime.options.process import (
    KubeOptions,
    LeaderElectionOptions,
    ReconcileOptions,
    ServerOptions,
    ShutdownOptions,
    TelemetryOptions,
    WatchingOptions,
    WebhookOptions,
    check_leader_timings,
)
from karpy.runtime.options.values import (
    NAMED_PROVIDER_SETTINGS,
    PROVIDER_SETTING_ENV_PREFIX,
    PROVIDER_SETTING_FLAG,
    parse_bool,
    parse_log_level,
    parse_provider_settings,
)

__all__ = [
    "FEATURE_GATE_DEFAULTS",
    "NAMED_PROVIDER_SETTINGS",
    "UNSUPPORTED_GATE_STATES",
    "BatchingOptions",
    "ConsolidationOptions",
    "FeatureGates",
    "InitializationOptions",
    "KubeOptions",
    "LeaderElectionOptions",
    "NodeRepairOptions",
    "Options",
    "OptionsError",
    "ProviderOptions",
    "ReconcileOptions",
    "SchedulingOptions",
    "ServerOptions",
    "ShutdownOptions",
    "TelemetryOptions",
    "WatchingOptions",
    "WebhookOptions",
    "build_parser",
    "documented",
    "load",
]


@attrs.frozen
class Options:
    """Every option of `karpy run`, by concern; `load` builds it, and each field is read by the
    constructor that needs it."""

    log_level: LogLevel = option(
        "LOG_LEVEL", "--log-level", "info", parse_log_level, "debug, info, warning or error"
    )
    dry_run: bool = option(
        "DRY_RUN", "--dry-run", False, parse_bool,
        "shadow mode: decide everything, create, patch and delete nothing", switch=True,
    )  # fmt: skip
    """Shadow mode: decide everything, write nothing to the cluster but events and the leader
    Lease; every decision is logged, evented and metered with its $/h."""
    provider: ProviderOptions = group(ProviderOptions)
    batching: BatchingOptions = group(BatchingOptions)
    scheduling: SchedulingOptions = group(SchedulingOptions)
    leader_election: LeaderElectionOptions = group(LeaderElectionOptions)
    server: ServerOptions = group(ServerOptions)
    webhook: WebhookOptions = group(WebhookOptions)
    kube: KubeOptions = group(KubeOptions)
    watching: WatchingOptions = group(WatchingOptions)
    reconcile: ReconcileOptions = group(ReconcileOptions)
    shutdown: ShutdownOptions = group(ShutdownOptions)
    telemetry: TelemetryOptions = group(TelemetryOptions)
    feature_gates: FeatureGates = option(
        "FEATURE_GATES", "--feature-gates", FeatureGates(), parse_feature_gates,
        "Gate=bool,... (Karpenter's)",
    )  # fmt: skip
    node_repair: NodeRepairOptions = group(NodeRepairOptions)
    consolidation: ConsolidationOptions = group(ConsolidationOptions)
    initialization: InitializationOptions = group(InitializationOptions)


SETTINGS: Final[tuple[Setting, ...]] = declared(Options)
"""Every option of `Options`, in declaration order."""


def documented() -> list[tuple[str, str, str]]:
    """(flag, environment variable, help) of every option, for the settings reference and the
    chart's tests."""
    return [(setting.flag, setting.env, setting.help) for setting in SETTINGS]


def build_parser(prog: str = "karpy run") -> argparse.ArgumentParser:
    """The argparse parser for `karpy run`; every flag also reads its environment variable."""
    parser = argparse.ArgumentParser(prog=prog, description="Run the karpy operator.")
    parser.add_argument(
        PROVIDER_SETTING_FLAG,
        dest="provider_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=argparse_text(
            f"a cloud provider setting; repeatable [env {PROVIDER_SETTING_ENV_PREFIX}<KEY>]"
        ),
    )
    for named in NAMED_PROVIDER_SETTINGS:
        if named.flag is not None:
            parser.add_argument(
                named.flag,
                dest=named.dest,
                default=None,
                metavar=named.env,
                nargs="?" if named.switch else None,
                const="true" if named.switch else None,
                help=argparse_text(f"{named.provider}: {named.help} [env {named.env}]"),
            )
    add_arguments(parser, SETTINGS)
    return parser


def load(argv: Sequence[str], environ: Mapping[str, str]) -> Options:
    """Build `Options` from `argv` (flags) over `environ` over defaults.

    Raises `OptionsError` naming the flag or variable for any invalid value, and for inconsistent
    combinations (e.g. a renew deadline longer than the lease duration).
    """
    namespace = build_parser().parse_args(list(argv))
    options = assemble(Options, given(SETTINGS, namespace, environ))
    settings = parse_provider_settings(
        namespace.provider_settings,
        environ,
        provider=options.provider.name,
        named_flags={
            named.dest: getattr(namespace, named.dest)
            for named in NAMED_PROVIDER_SETTINGS
            if named.flag is not None
        },
    )
    leader_election = options.leader_election
    if not leader_election.identity:
        leader_election = attrs.evolve(leader_election, identity=_default_identity())
    check_batching(options.batching)
    check_leader_timings(leader_election)
    return attrs.evolve(
        options,
        provider=attrs.evolve(options.provider, settings=settings),
        leader_election=leader_election,
    )


def _default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"
