"""Options: flags over environment over defaults, Karpenter's names, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.runtime.options import Options, OptionsError, documented, load


def test_defaults_match_karpenter() -> None:
    options = load([], {})
    assert options.batching.idle_duration == 1.0
    assert options.batching.max_duration == 10.0
    assert options.server.metrics_port == 8080
    assert options.server.health_probe_port == 8081
    assert options.log_level == "info"
    assert options.leader_election.enabled is True
    assert options.leader_election.lease_duration == 15.0
    assert options.leader_election.renew_deadline == 10.0
    assert options.leader_election.retry_period == 2.0
    assert options.reconcile.backoff.base == 1.0
    assert options.reconcile.backoff.cap == 300.0
    assert options.kube.kubeconfig is None
    assert options.telemetry.otlp_endpoint is None


def test_environment_uses_karpenter_names() -> None:
    options = load(
        [],
        {
            "BATCH_IDLE_DURATION": "2s",
            "BATCH_MAX_DURATION": "1m",
            "LOG_LEVEL": "DEBUG",
            "METRICS_PORT": "9090",
            "HEALTH_PROBE_PORT": "9091",
            "DISABLE_LEADER_ELECTION": "true",
            "KUBECONFIG": "/etc/karpy/kubeconfig",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        },
    )
    assert options.batching.idle_duration == 2.0
    assert options.batching.max_duration == 60.0
    assert options.log_level == "debug"
    assert options.server.metrics_port == 9090
    assert options.server.health_probe_port == 9091
    assert options.leader_election.enabled is False
    assert options.kube.kubeconfig == Path("/etc/karpy/kubeconfig")
    assert options.telemetry.otlp_endpoint == "http://127.0.0.1:4318"


def test_flag_overrides_environment() -> None:
    options = load(["--metrics-port", "7000", "--log-level", "error"], {"METRICS_PORT": "9090"})
    assert options.server.metrics_port == 7000
    assert options.log_level == "error"


def test_disable_leader_election_flag_takes_no_value() -> None:
    assert load(["--disable-leader-election"], {}).leader_election.enabled is False


def test_identity_defaults_to_unique_hostname_uuid() -> None:
    first = load([], {}).leader_election.identity
    second = load([], {}).leader_election.identity
    assert first != second
    assert "_" in first


@pytest.mark.parametrize(
    ("argv", "environ", "names"),
    [
        pytest.param([], {"METRICS_PORT": "http"}, "METRICS_PORT", id="port-not-int"),
        pytest.param(["--metrics-port", "70000"], {}, "--metrics-port", id="port-range"),
        pytest.param([], {"BATCH_IDLE_DURATION": "5"}, "BATCH_IDLE_DURATION", id="no-unit"),
        pytest.param([], {"LOG_LEVEL": "loud"}, "LOG_LEVEL", id="log-level"),
        pytest.param(
            [], {"DISABLE_LEADER_ELECTION": "maybe"}, "DISABLE_LEADER_ELECTION", id="bool"
        ),
        pytest.param([], {"BATCH_IDLE_DURATION": "20s"}, "BATCH_MAX_DURATION", id="idle-above-max"),
        pytest.param(
            ["--leader-election-renew-deadline", "20s"],
            {},
            "LEADER_ELECTION_LEASE_DURATION",
            id="renew-above-lease",
        ),
        pytest.param(
            ["--leader-election-retry-period", "9s"],
            {},
            "LEADER_ELECTION_RETRY_PERIOD",
            id="retry-above-renew",
        ),
        pytest.param([], {"WATCH_TIMEOUT": "0s"}, "WATCH_TIMEOUT", id="zero-duration"),
        pytest.param([], {"KUBE_CLIENT_QPS": "0"}, "KUBE_CLIENT_QPS", id="qps-zero"),
        pytest.param(["--kube-client-burst", "x"], {}, "--kube-client-burst", id="burst-nan"),
        pytest.param(
            ["--reconcile-backoff-base", "5s"],
            {"RECONCILE_BACKOFF_MAX": "2s"},
            "RECONCILE_BACKOFF_BASE must not exceed RECONCILE_BACKOFF_MAX",
            id="backoff-base-above-max",
        ),
    ],
)
def test_bad_values_name_the_option(argv: list[str], environ: dict[str, str], names: str) -> None:
    with pytest.raises(OptionsError, match=names):
        load(argv, environ)


def test_options_is_frozen() -> None:
    import attrs

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Options().log_level = "debug"  # type: ignore[misc]


def test_provider_settings_come_from_variables_and_repeated_flags() -> None:
    options = load(
        [
            "--provider-setting",
            "registration-delay=5s",
            "--provider-setting",
            "unavailable-offerings=c5.large:test-zone-a:spot,m5.large::",
        ],
        {
            "KARPY_PROVIDER_SETTING_REGISTRATION_DELAY": "1s",
            "KARPY_PROVIDER_SETTING_CATALOG": "/etc/karpy/catalog.json",
        },
    )
    assert options.provider.settings == {
        "registration-delay": "5s",  # the flag wins over the variable
        "catalog": "/etc/karpy/catalog.json",
        "unavailable-offerings": "c5.large:test-zone-a:spot,m5.large::",
    }
    assert load([], {}).provider.settings == {}


@pytest.mark.parametrize(
    ("argv", "environ", "named"),
    [
        pytest.param(["--provider-setting", "region"], {}, "--provider-setting", id="no-equals"),
        pytest.param(["--provider-setting", "Region=x"], {}, "'Region'", id="upper-case-key"),
        pytest.param(
            [], {"KARPY_PROVIDER_SETTING_A.B": "x"}, "KARPY_PROVIDER_SETTING_A.B", id="env"
        ),
    ],
)
def test_a_malformed_provider_setting_is_refused_by_name(
    argv: list[str], environ: dict[str, str], named: str
) -> None:
    with pytest.raises(OptionsError, match=named):
        load(argv, environ)


def test_the_aws_providers_settings_take_karpenters_names() -> None:
    options = load(
        ["--provider", "aws", "--reserved-enis", "1", "--isolated-vpc"],
        {
            "AWS_REGION": "eu-west-1",
            "CLUSTER_ENDPOINT": "https://example.invalid",
            "CLUSTER_CA_BUNDLE": "Q0E=",
            "INTERRUPTION_QUEUE": "karpy-demo",
            "VM_MEMORY_OVERHEAD_PERCENT": "0.1",
            "EKS_CONTROL_PLANE": "true",
            "RESERVED_ENIS": "3",  # the flag wins over the variable
        },
    )
    assert options.provider.settings == {
        "region": "eu-west-1",
        "cluster-endpoint": "https://example.invalid",
        "cluster-ca-bundle": "Q0E=",
        "interruption-queue": "karpy-demo",
        "vm-memory-overhead-percent": "0.1",
        "eks-control-plane": "true",
        "reserved-enis": "1",
        "isolated-vpc": "true",
    }


def test_karpys_spelling_is_an_alias_that_must_agree_with_karpenters() -> None:
    agreeing = load(
        [],
        {
            "KARPY_PROVIDER": "aws",
            "INTERRUPTION_QUEUE": "q",
            "KARPY_PROVIDER_SETTING_INTERRUPTION_QUEUE": "q",
            "KARPY_PROVIDER_SETTING_RESERVED_ENIS": "2",
        },
    )
    assert agreeing.provider.settings == {"interruption-queue": "q", "reserved-enis": "2"}
    with pytest.raises(
        OptionsError,
        match="INTERRUPTION_QUEUE='q' and KARPY_PROVIDER_SETTING_INTERRUPTION_QUEUE='r' both",
    ):
        load(
            [],
            {
                "KARPY_PROVIDER": "aws",
                "INTERRUPTION_QUEUE": "q",
                "KARPY_PROVIDER_SETTING_INTERRUPTION_QUEUE": "r",
            },
        )
    with pytest.raises(OptionsError, match="--reserved-enis='1' and --provider-setting reserved"):
        load(
            ["--provider", "aws", "--reserved-enis", "1", "--provider-setting", "reserved-enis=2"],
            {},
        )
    # a flag under either spelling overrides a variable under either spelling
    flagged = load(
        ["--provider", "aws", "--provider-setting", "reserved-enis=2"], {"RESERVED_ENIS": "1"}
    )
    assert flagged.provider.settings == {"reserved-enis": "2"}


@pytest.mark.parametrize(
    ("argv", "environ", "named"),
    [
        pytest.param(["--cluster-endpoint", "https://x"], {}, "--cluster-endpoint", id="flag"),
        pytest.param([], {"ISOLATED_VPC": "true"}, "ISOLATED_VPC", id="env"),
    ],
)
def test_another_providers_named_setting_is_refused(
    argv: list[str], environ: dict[str, str], named: str
) -> None:
    with pytest.raises(OptionsError, match=f"{named} is a setting of the aws provider"):
        load(argv, environ)


def test_aws_region_is_the_environments_and_another_provider_leaves_it_alone() -> None:
    """AWS tooling and pod identity webhooks set AWS_REGION; running kwok there must work."""
    assert load([], {"AWS_REGION": "eu-west-1"}).provider.settings == {}
    aws = load(["--provider", "aws"], {"AWS_REGION": "eu-west-1"})
    assert aws.provider.settings == {"region": "eu-west-1"}


def test_scheduling_policies_take_karpenters_names_and_values() -> None:
    assert load([], {}).scheduling.preference_policy == "Respect"
    assert load([], {}).scheduling.min_values_policy == "Strict"
    options = load(
        ["--min-values-policy", "BestEffort"],
        {"PREFERENCE_POLICY": "Ignore", "MIN_VALUES_POLICY": "Strict"},
    )
    assert options.scheduling.preference_policy == "Ignore"
    assert options.scheduling.min_values_policy == "BestEffort"
    with pytest.raises(OptionsError, match="PREFERENCE_POLICY: invalid value 'respect'"):
        load([], {"PREFERENCE_POLICY": "respect"})


def test_feature_gates_default_to_karpenters() -> None:
    gates = load([], {}).feature_gates
    assert gates.node_repair is False
    assert gates.reserved_capacity is True
    assert (gates.spot_to_spot_consolidation, gates.node_overlay) == (False, False)
    assert (gates.static_capacity, gates.capacity_buffer) == (False, False)


def test_feature_gates_are_read_from_karpenters_variable_and_flag() -> None:
    assert load([], {"FEATURE_GATES": "NodeRepair=true"}).feature_gates.node_repair is True
    options = load(["--feature-gates", "NodeRepair=false"], {"FEATURE_GATES": "NodeRepair=true"})
    assert options.feature_gates.node_repair is False
    spaced = load([], {"FEATURE_GATES": " NodeRepair = True , ReservedCapacity=true "})
    assert spaced.feature_gates.node_repair is True


@pytest.mark.parametrize(
    ("value", "names"),
    [
        pytest.param("NodeRepare=true", "'NodeRepare'", id="unknown-gate"),
        pytest.param("NodeRepair", "Gate=true", id="no-equals"),
        pytest.param("NodeRepair=yes", "'NodeRepair'", id="not-a-bool"),
        pytest.param("NodeRepair=true,NodeRepair=false", "'NodeRepair'", id="twice"),
        pytest.param("ReservedCapacity=false", "ReservedCapacity=false", id="reserved-off"),
    ],
)
def test_bad_or_unsupported_feature_gates_are_refused_by_name(value: str, names: str) -> None:
    with pytest.raises(OptionsError, match="FEATURE_GATES") as caught:
        load([], {"FEATURE_GATES": value})
    assert names in str(caught.value)


def test_capacity_buffer_gate_is_accepted() -> None:
    assert load([], {}).feature_gates.capacity_buffer is False
    gates = load([], {"FEATURE_GATES": "CapacityBuffer=true"}).feature_gates
    assert gates.capacity_buffer is True


def test_the_static_capacity_gate_is_accepted_as_karpenter_spells_it() -> None:
    assert load([], {}).feature_gates.static_capacity is False
    gates = load([], {"FEATURE_GATES": "StaticCapacity=true"}).feature_gates
    assert gates.static_capacity is True


def test_node_overlay_gate_is_accepted() -> None:
    assert load([], {"FEATURE_GATES": "NodeOverlay=true"}).feature_gates.node_overlay is True
    assert load([], {}).feature_gates.node_overlay is False


def test_spot_to_spot_gate_and_consolidation_options() -> None:
    options = load(
        [],
        {
            "FEATURE_GATES": "SpotToSpotConsolidation=true",
            "KARPY_CONSOLIDATION_SEARCH": "karpenter",
            "KARPY_CONSOLIDATION_MIN_IMPROVEMENT": "10%",
            "KARPY_CONSOLIDATION_VALIDATION_DELAY": "2s",
        },
    )
    assert options.feature_gates.spot_to_spot_consolidation
    assert options.consolidation.search == "karpenter"
    assert options.consolidation.min_improvement == pytest.approx(0.1)
    assert options.consolidation.validation_delay == 2.0
    with pytest.raises(OptionsError, match="KARPY_CONSOLIDATION_MIN_IMPROVEMENT"):
        load([], {"KARPY_CONSOLIDATION_MIN_IMPROVEMENT": "150%"})


def test_node_repair_toleration_and_threshold() -> None:
    defaults = load([], {}).node_repair
    assert (defaults.toleration, defaults.unhealthy_threshold) == (None, "20%")
    options = load(
        ["--node-repair-toleration", "5s"], {"KARPY_NODE_REPAIR_UNHEALTHY_THRESHOLD": "50%"}
    ).node_repair
    assert (options.toleration, options.unhealthy_threshold) == (5.0, "50%")
    with pytest.raises(OptionsError, match="KARPY_NODE_REPAIR_UNHEALTHY_THRESHOLD"):
        load([], {"KARPY_NODE_REPAIR_UNHEALTHY_THRESHOLD": "120%"})


def test_backoff_settings_fill_the_backoff_policies() -> None:
    options = load(
        ["--reconcile-backoff-base", "2s"],
        {"RECONCILE_BACKOFF_MAX": "1m", "WATCH_BACKOFF_MAX": "500ms"},
    )
    assert (options.reconcile.backoff.base, options.reconcile.backoff.cap) == (2.0, 60.0)
    # A reconnect cap below the first delay lowers the first delay with it.
    assert (options.watching.backoff.base, options.watching.backoff.cap) == (0.5, 0.5)


def test_each_variable_and_flag_is_declared_once() -> None:
    rows = documented()
    variables = [variable for _, variable, _ in rows]
    flags = [flag for flag, _, _ in rows]
    assert len(set(variables)) == len(variables) == len(set(flags)) == len(flags)
    assert all(flag.startswith("--") and text for flag, _, text in rows)
