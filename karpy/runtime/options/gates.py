"""Karpenter's feature gates (`FEATURE_GATES=NodeRepair=true,...`), with its defaults.

Each gate is one field naming its Karpenter gate; the defaults and the parser are read from the
fields. A gate state karpy would not act on is refused by name rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

_GATE: Final = "karpy.options.gate"


def _gate(name: str, default: bool) -> bool:
    return attrs.field(default=default, metadata={_GATE: name})


@attrs.frozen
class FeatureGates:
    """Karpenter's feature gates, with its defaults."""

    node_repair: bool = _gate("NodeRepair", False)
    """NodeRepair: replace nodes whose conditions match the provider's repair policies."""
    reserved_capacity: bool = _gate("ReservedCapacity", True)
    """ReservedCapacity: selected capacity reservations are offered and launched into."""
    spot_to_spot_consolidation: bool = _gate("SpotToSpotConsolidation", False)
    node_overlay: bool = _gate("NodeOverlay", False)
    """NodeOverlay: apply karpenter.sh/v1alpha1 NodeOverlays to the instance-type catalog."""
    static_capacity: bool = _gate("StaticCapacity", False)
    """StaticCapacity: a NodePool with spec.replicas holds that many nodes."""
    capacity_buffer: bool = _gate("CapacityBuffer", False)


_FIELDS: Final[Mapping[str, str]] = {
    field.metadata[_GATE]: field.name for field in attrs.fields(FeatureGates)
}

FEATURE_GATE_DEFAULTS: Final[Mapping[str, bool]] = {
    field.metadata[_GATE]: bool(field.default) for field in attrs.fields(FeatureGates)
}
"""Karpenter's feature gates and its defaults (FEATURE_GATES)."""

UNSUPPORTED_GATE_STATES: Final[Mapping[str, str]] = {
    "ReservedCapacity=false": (
        "karpy always offers the capacity reservations an EC2NodeClass's "
        "capacityReservationSelectorTerms select as reserved capacity; remove those terms "
        "rather than turn the gate off"
    ),
}
"""Gate settings karpy refuses, because it would silently not act on them."""


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
    return FeatureGates(**{_FIELDS[name]: value for name, value in values.items()})
