"""The solver's settings: how a solve runs (``SchedulerOptions``), the packing it starts from
(``Packing``) and the variants of its greedy pass (``Variant``). Pure, plain frozen values, kept
apart from the solver so the controllers and the command-line tools that configure it read
them alone."""

from __future__ import annotations

import enum

import attrs

from karpy.core.scheduling import preferences


@attrs.frozen
class Variant:
    """One way of running the greedy pass: ``ordered`` runs the first pass in an interleaved
    order (else Karpenter's queue alone), ``balanced`` makes that order balance memory against
    CPU (``balanced_order``, else ``interleaved_order``), ``steer`` keeps NodeClaims on the
    types the LP buys (``Solver.efficient``), ``seeded`` first opens the NodeClaims the
    assignment LP buys and fills them with the pods it assigns them (``Solver.seed_pass``)."""

    ordered: bool
    balanced: bool
    steer: bool
    seeded: bool = False


class Packing(enum.StrEnum):
    """How the first pass orders pods and chooses bins.

    ``balanced`` (default) orders pods so every NodeClaim fills in the batch's memory:CPU shape
    (``balanced_order``), lets a NodeClaim grow only onto types the LP would buy for its pods
    (``Solver.efficient``), prefers free fits and ends with the improvement step;
    ``karpenter`` is Karpenter's own algorithm — CPU then memory descending, first fit, no
    improvement — kept as the baseline to compare against (docs/scheduling.md, *Packing*).
    """

    BALANCED = "balanced"
    KARPENTER = "karpenter"


@attrs.frozen
class SchedulerOptions:
    """Solver settings.

    ``max_instance_types`` caps each NodeClaim's instance-type options (the AWS launch limit);
    ``min_values_policy`` BestEffort lets a pod that fits nowhere else break minValues (last
    rung of the relaxation ladder), and lets the cut to the maximum do so too;
    ``lookahead`` is how many more bins a pod looks at, after the first that would take it at a
    price, for one that takes it for free (in the slack of its cheapest type);
    ``improve`` runs the cost-lowering pass after the greedy one, trying at most
    ``improve_budget_per_pod`` checks per pending pod (at least 10,000) for each of its two
    steps; a budget fixed by the input keeps the result deterministic;
    ``improve_tolerance``: the improvement steps (and, for a small batch, the second greedy
    order) are skipped when the greedy plan already costs at most this share more than a lower
    bound on every plan (the LP's, with one NodePool and no existing nodes): none of them could
    gain more than that share of the price;
    ``provider_labels`` are the cloud provider's well-known labels (karpy.cloudprovider's
    ``CloudProvider.well_known_labels``): like karpy's own, a pod may require one that its
    NodePool does not mention, and the instance types decide.
    """

    max_instance_types: int = 60
    preference_policy: preferences.PreferencePolicy = attrs.field(
        default=preferences.PreferencePolicy.RESPECT, converter=preferences.PreferencePolicy
    )
    min_values_policy: preferences.MinValuesPolicy = attrs.field(
        default=preferences.MinValuesPolicy.STRICT, converter=preferences.MinValuesPolicy
    )
    improve: bool = True
    improve_budget_per_pod: int = 8
    improve_tolerance: float = 0.001
    lookahead: int = 8
    packing: Packing = attrs.field(default=Packing.BALANCED, converter=Packing)
    provider_labels: frozenset[str] = frozenset()
