"""The kwok provider's labels, as Karpenter's kwok provider spells them.

Wire contract, like karpy's own in `karpy.apis.v1.labels`. karpy learns the ones it must know
about (its CRDs' label rules, the scheduler's well-known labels) from `LABELS`, which the
provider hands over.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.v1.labels import ProviderLabels

KWOK_GROUP: Final = "karpenter.kwok.sh"

LABEL_KWOK_NODECLASS: Final = "karpenter.kwok.sh/kwoknodeclass"

# Instance-type labels the kwok provider puts on its simulated nodes.
LABEL_KWOK_INSTANCE_TYPE: Final = "karpenter.kwok.sh/instance-type"
LABEL_KWOK_INSTANCE_SIZE: Final = "karpenter.kwok.sh/instance-size"
LABEL_KWOK_INSTANCE_FAMILY: Final = "karpenter.kwok.sh/instance-family"
LABEL_KWOK_INSTANCE_MEMORY: Final = "karpenter.kwok.sh/instance-memory"
LABEL_KWOK_INSTANCE_CPU: Final = "karpenter.kwok.sh/instance-cpu"
KWOK_WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_KWOK_INSTANCE_TYPE,
        LABEL_KWOK_INSTANCE_SIZE,
        LABEL_KWOK_INSTANCE_FAMILY,
        LABEL_KWOK_INSTANCE_MEMORY,
        LABEL_KWOK_INSTANCE_CPU,
    }
)

LABELS: Final = ProviderLabels(
    domains=frozenset({KWOK_GROUP}),
    well_known=KWOK_WELL_KNOWN_LABELS,
    nodeclaim_keys=frozenset({LABEL_KWOK_NODECLASS}),
)
"""What karpy must know of the kwok provider's labels (see `ProviderLabels`)."""
