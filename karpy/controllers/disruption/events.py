"""The Events disruption records on the NodeClaims it disrupts or leaves alone, and on their
Nodes (as Karpenter's disruption/events.go): the same reason on both, worded for each."""

from __future__ import annotations

from typing import Final

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.kube.events import Event, normal
from karpy.kube.kinds import NODECLAIMS, NODES


def on_nodeclaim(claim: NodeClaim, reason: str, message: str) -> Event:
    """A disruption step (`reason`) on the NodeClaim; `message` speaks of a NodeClaim."""
    return normal(NODECLAIMS, claim, reason, message)


def on_node(node: Node, reason: str, message: str) -> Event:
    """The same step on the NodeClaim's Node, its message speaking of the Node."""
    return normal(NODES, node, reason, message.replace("NodeClaim", "Node"))


REASON_BLOCKED: Final = "DisruptionBlocked"
REASON_UNCONSOLIDATABLE: Final = "Unconsolidatable"
UNCONSOLIDATABLE_DEDUPE: Final = 900.0
"""Seconds an identical Unconsolidatable event is suppressed (Karpenter's 15 minutes)."""


def blocked_nodeclaim(claim: NodeClaim, message: str) -> Event:
    """Disruption may not touch the NodeClaim now, and why (a do-not-disrupt pod, a PDB...)."""
    return normal(NODECLAIMS, claim, REASON_BLOCKED, f"Cannot disrupt NodeClaim: {message}")


def blocked_node(node: Node, message: str) -> Event:
    """The same, on the NodeClaim's Node."""
    return normal(NODES, node, REASON_BLOCKED, f"Cannot disrupt Node: {message}")


def unconsolidatable_nodeclaim(claim: NodeClaim, message: str) -> Event:
    """Consolidation keeps the NodeClaim, and why; repeated only when the reason changes or
    after the dedupe window."""
    return normal(
        NODECLAIMS, claim, REASON_UNCONSOLIDATABLE, message, dedupe_window=UNCONSOLIDATABLE_DEDUPE
    )


def unconsolidatable_node(node: Node, message: str) -> Event:
    """The same, on the NodeClaim's Node."""
    return normal(
        NODES, node, REASON_UNCONSOLIDATABLE, message, dedupe_window=UNCONSOLIDATABLE_DEDUPE
    )
