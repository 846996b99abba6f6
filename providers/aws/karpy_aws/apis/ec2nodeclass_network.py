"""Placement and network options of an EC2NodeClass (the newer, optional part of its spec).

Placement groups, EFA-only network cards, prefix delegation, connection-tracking timeouts and
nested virtualization all end up in the launch template. They live apart from the core spec
so the common fields stay readable; manifests that use them still apply unchanged.
"""

from __future__ import annotations

# ruff: noqa: RUF009  # karpy.apis.schema.field wraps attrs.field; it is a field specifier
import enum

import attrs

from karpy.apis.schema import Rule, field


@attrs.frozen(kw_only=True)
class PlacementGroupSelector:
    """Selects one existing placement group, by name or by id."""

    __rules__ = (
        Rule(
            rule="has(self.name) != has(self.id)",
            message="must specify exactly one of ['name', 'id']",
        ),
    )

    name: str | None = field(default=None, doc="Placement group name.", max_length=255)
    id: str | None = field(
        default=None, doc="Placement group id.", pattern=r"^pg-[0-9a-z]+$", max_length=64
    )


class InterfaceType(enum.StrEnum):
    INTERFACE = "interface"
    EFA_ONLY = "efa-only"


@attrs.frozen(kw_only=True)
class NetworkInterface:
    network_card_index: int = field(doc="Network card the interface attaches to.", minimum=0)
    device_index: int = field(doc="Device index on that card.", minimum=0)
    interface_type: InterfaceType = field(doc="interface or efa-only.")


@attrs.frozen(kw_only=True)
class ConnectionTracking:
    """Idle timeouts (seconds) for tracked connections on the primary interface."""

    tcp_established_timeout: int | None = field(
        default=None,
        doc="Idle timeout of established TCP connections.",
        minimum=60,
        maximum=432000,
    )
    udp_stream_timeout: int | None = field(
        default=None,
        doc="Idle timeout of UDP flows seen in both directions.",
        minimum=60,
        maximum=180,
    )
    udp_timeout: int | None = field(
        default=None, doc="Idle timeout of one-way UDP flows.", minimum=30, maximum=60
    )


@attrs.frozen(kw_only=True)
class CPUOptions:
    nested_virtualization: str | None = field(
        default=None,
        doc="Expose virtualization extensions to the guest.",
        enum=("enabled", "disabled"),
    )
