"""What the autoscaler decides with: the provider, the batch window, scheduling policies, node
repair and consolidation.

Each field is one option (karpy.runtime.options.declare); `Options` gathers the groups.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from karpy.apis.duration import format_duration
from karpy.runtime.options.declare import OptionsError, option
from karpy.runtime.options.values import (
    non_empty,
    one_of,
    parse_int_or_percent,
    parse_percent,
    positive_duration,
)


@attrs.frozen
class ProviderOptions:
    """Which CloudProvider launches the NodeClaims, and for which cluster."""

    name: str = option(
        "KARPY_PROVIDER", "--provider", "kwok", non_empty, "cloud provider (karpy.providers name)"
    )
    """Entry-point name in the `karpy.providers` group; kwok needs no cloud, hence the default."""
    cluster_name: str = option(
        "CLUSTER_NAME", "--cluster-name", "karpy", non_empty,
        "cluster name instances are tagged with",
    )  # fmt: skip
    """The name instances are tagged with (Karpenter's CLUSTER_NAME), so a provider can tell this
    cluster's instances from others' in the same account."""
    settings: Mapping[str, str] = attrs.field(factory=dict)
    """The provider's own settings (`--provider-setting key=value`, or the environment variable
    `KARPY_PROVIDER_SETTING_<KEY>`), passed as they are; each provider parses and checks its own
    and names the key it refuses (docs/configuration.md lists them per provider)."""
    default_instance_profile: str | None = option(
        "AWS_DEFAULT_INSTANCE_PROFILE", "--default-instance-profile", None, non_empty,
        "instance profile for v1alpha5 Provisioners that name none",
    )  # fmt: skip
    """Karpenter v0.x's aws.defaultInstanceProfile: the instance profile of translated
    Provisioners whose provider settings name none (docs/migration.md)."""


@attrs.frozen
class BatchingOptions:
    """The provisioning batch window (Karpenter's batcher)."""

    idle_duration: float = option(
        "BATCH_IDLE_DURATION", "--batch-idle-duration", 1.0, positive_duration, "batch idle window"
    )
    """Seconds without a new pending pod after which a batch closes (pods come in bursts)."""
    max_duration: float = option(
        "BATCH_MAX_DURATION", "--batch-max-duration", 10.0, positive_duration, "batch max window"
    )
    """Upper bound in seconds on one batch window, so a steady trickle still gets scheduled."""


def check_batching(batching: BatchingOptions) -> None:
    if batching.idle_duration > batching.max_duration:
        msg = (
            f"BATCH_IDLE_DURATION ({format_duration(batching.idle_duration)}) must not exceed "
            f"BATCH_MAX_DURATION ({format_duration(batching.max_duration)})"
        )
        raise OptionsError(msg)


@attrs.frozen
class SchedulingOptions:
    """How the provisioner's solver treats soft constraints (Karpenter's names and values)."""

    preference_policy: str = option(
        "PREFERENCE_POLICY", "--preference-policy", "Respect", one_of("Respect", "Ignore"),
        "Respect or Ignore scheduling preferences",
    )  # fmt: skip
    """`Respect` tries preferred affinities, spreads and PreferNoSchedule taints first and relaxes
    them one at a time; `Ignore` schedules as if they were absent."""
    min_values_policy: str = option(
        "MIN_VALUES_POLICY", "--min-values-policy", "Strict", one_of("Strict", "BestEffort"),
        "Strict or BestEffort minValues",
    )  # fmt: skip
    """`Strict` never launches a NodeClaim with fewer instance-type choices than a requirement's
    minValues; `BestEffort` does so as the last resort rather than leave pods pending."""


@attrs.frozen
class NodeRepairOptions:
    """The node health controller (runs only with the NodeRepair gate)."""

    toleration: float | None = option(
        "KARPY_NODE_REPAIR_TOLERATION", "--node-repair-toleration", None, positive_duration,
        "override every repair policy's toleration",
    )  # fmt: skip
    """Seconds a repair-policy condition must hold before the node is replaced, overriding every
    provider policy's own toleration (None: the provider's, e.g. 30 minutes for Ready=False).
    Mainly for tests and impatient operators."""
    unhealthy_threshold: str = option(
        "KARPY_NODE_REPAIR_UNHEALTHY_THRESHOLD", "--node-repair-unhealthy-threshold", "20%",
        parse_int_or_percent,
        "unhealthy nodes per NodePool beyond which repair stops (count or %)",
    )  # fmt: skip
    """How many of a NodePool's nodes (an integer or a percentage, rounded up) may be unhealthy
    for repair to go on; beyond it repair stops for that pool (a NodeRepairBlocked event).
    Karpenter's fixed 20% is the default."""


@attrs.frozen
class InitializationOptions:
    """How long a registered node may take to become usable."""

    extended_resource_timeout: float | None = option(
        "KARPY_EXTENDED_RESOURCE_INITIALIZATION_TIMEOUT",
        "--extended-resource-initialization-timeout", None, positive_duration,
        "replace a node still missing a requested extended resource this long after it registered",
    )  # fmt: skip
    """Seconds after registration after which a Ready node that has not reported an extended
    resource its NodeClaim requested (a GPU whose device plugin never came up) is replaced; None
    (the default) waits for ever, as Karpenter does. A NodePool's
    `karpy.sh/extended-resource-initialization-timeout` annotation overrides it."""


@attrs.frozen
class ConsolidationOptions:
    """How consolidation searches and how much it must save (docs/consolidation.md)."""

    search: str = option(
        "KARPY_CONSOLIDATION_SEARCH", "--consolidation-search", "karpy",
        one_of("karpy", "karpenter"), "karpy or karpenter consolidation search",
    )  # fmt: skip
    """`karpy` (Karpenter's order, a prefix that grows past an immovable node, a single node
    deleted before one replaced) or `karpenter` (Karpenter's disruption-cost order, largest
    prefix, first single node)."""
    min_improvement: float = option(
        "KARPY_CONSOLIDATION_MIN_IMPROVEMENT", "--consolidation-min-improvement", 0.0,
        parse_percent, "least price improvement of a consolidation replacement (e.g. 10%)",
    )  # fmt: skip
    """The least share of the replaced nodes' price a replacement must save (e.g. `10%`); a
    NodePool's `karpy.sh/consolidation-min-improvement` annotation overrides it."""
    validation_delay: float = option(
        "KARPY_CONSOLIDATION_VALIDATION_DELAY", "--consolidation-validation-delay", 15.0,
        positive_duration, "wait before a consolidation command is re-checked",
    )  # fmt: skip
    """Seconds a consolidation command waits before it is re-checked (Karpenter's 15 s); mainly
    for tests."""
