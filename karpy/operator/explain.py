"""`karpy explain node NAME`: why consolidation leaves a node of a running cluster alone.

It lists the cluster once (what the controller keeps in cluster state), asks the cloud provider
for instance types as the disruption controller does, and runs the disruption pass the
controller would run now, deciding and acting on nothing
(karpy.controllers.disruption.controller.explain_pass). It prints the node, its NodeClaim and
NodePool, its price, and one line: what the pass would do with it, or the one reason it is left
alone — the reason the running controller reports in the node's `Unconsolidatable` event.

The pass is a recomputation: what the running controller holds only in memory (nominations of
pending pods, commands it is about to start) is not in it. So it also reads back what the
controller last reported about the node: the newest `Unconsolidatable` and `DisruptionBlocked`
Events of the Node and of its NodeClaim, printed with their age beside the recomputed reason,
and says when the controller's last `Unconsolidatable` reason differs from the recomputed one.

A process of its own (it connects and builds a provider), hence the operator layer.
Exit codes: 0 when the answer was printed, 2 on failure (no such node, unreachable cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from karpy.apis.kube.event import Event
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.registry import ProviderError
from karpy.controllers.disruption.controller import explain_pass
from karpy.controllers.disruption.events import REASON_BLOCKED, REASON_UNCONSOLIDATABLE
from karpy.core.disruption.candidates import NodeFacts
from karpy.core.disruption.consolidation import Search, Settings
from karpy.core.disruption.decision import PassResult
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeConfigError, KubeError
from karpy.kube.kinds import (
    DAEMONSETS,
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from karpy.kube.resources import ResourceKind
from karpy.operator.inputs import nomination_window, scheduler_options
from karpy.operator.listing import listed_cluster
from karpy.runtime.options import Options, OptionsError, load
from karpy.state.buffers import BUFFER_KINDS, BufferPods
from karpy.state.snapshot import SnapshotKinds
from karpy.state.view import ClusterView

EXPLAIN_TIMEOUT: Final = 120.0
"""Seconds the whole explanation (lists, instance types, the pass) may take."""


class NodeNotFoundError(LookupError):
    """The node asked about is neither a Node nor a NodeClaim of the cluster."""


def describe(decision: PassResult, view: ClusterView, name: str) -> str:
    """What the pass does with node (or NodeClaim) `name`, for a terminal."""
    facts = next(
        (f for f in _facts(decision) if name in (f.nodeclaim, f.node)),
        None,
    )
    claim = _claim_of(view, name)
    if claim is None:
        if view.node(name) is None:
            raise NodeNotFoundError(name)
        return f"node {name} is not managed by karpy (no NodeClaim): it is never disrupted\n"
    claim_name = claim.metadata.name or ""
    node_name = claim.status.node_name or "-"
    pool = claim.metadata.labels.get(wk.LABEL_NODEPOOL, "-")
    labels = claim.metadata.labels
    lines = [
        f"node {node_name}  nodeclaim {claim_name}  nodepool {pool}",
        f"  {labels.get(wk.LABEL_INSTANCE_TYPE, '-')} {labels.get(wk.LABEL_CAPACITY_TYPE, '-')}"
        f" {labels.get(wk.LABEL_TOPOLOGY_ZONE, '-')}"
        + (f"  {facts.price:.4f} $/h" if facts is not None and facts.price is not None else "")
        + (f"  {len(facts.pods)} pod(s) to move" if facts is not None else ""),
    ]
    command = next(
        (c for c in decision.outcome.commands if claim_name in c.names),
        None,
    )
    kept = decision.reason_for(claim_name)
    other = next(
        (
            s
            for s in (*decision.selection.skipped, *decision.outcome.skipped)
            if s.nodeclaim == claim_name
        ),
        None,
    )
    if command is not None:
        lines.append(
            f"  {command.method} would {command.decision.value} it now"
            f" (with {len(command.candidates)} node(s) in the command)"
        )
    elif kept is not None:
        lines.append(f"  not consolidated ({kept.reason.value}): {kept.message}")
    elif other is not None:
        lines.append(f"  not disrupted ({other.reason.value}): {other.message}")
    elif decision.outcome.method is not None:
        lines.append(
            f"  not looked at this pass: {decision.outcome.method} acts on other nodes first"
        )
    else:
        lines.append("  a consolidation candidate: consolidation found no better move this pass")
    return "\n".join(lines) + "\n"


def _claim_of(view: ClusterView, name: str) -> NodeClaim | None:
    """The NodeClaim named `name`, or whose Node is."""
    return next(
        (c for c in view.nodeclaims() if name in (c.metadata.name, c.status.node_name)),
        None,
    )


def _facts(decision: PassResult) -> list[NodeFacts]:
    """The candidates' facts (priced); a node that is no candidate has none."""
    return [c.facts for c in decision.selection.candidates]


REPORTED: Final = (REASON_UNCONSOLIDATABLE, REASON_BLOCKED)
"""The controller's event reasons about a node's disruption, as printed beside the pass."""


async def reported_events(client: KubeClient, involved: Sequence[tuple[str, str]]) -> list[Event]:
    """The `REPORTED` Events about each (kind, name) in `involved`, every namespace (a
    cluster-scoped object's events go to `default`). One bounded request per object."""
    found: list[Event] = []
    for kind, name in involved:
        listed = await client.list(
            EVENTS, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
        )
        found.extend(i.obj for i in listed.items if i.obj.reason in REPORTED)
    return found


def age(seconds: float) -> str:
    """A duration as kubectl prints an age: 45s, 3m, 2h, 4d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _order(event: Event) -> tuple[datetime, int]:
    """When an event was last reported; events of the same second (the apiserver keeps
    seconds) in the order the apiserver stored them (resourceVersion, etcd's revision)."""
    version = event.metadata.resource_version or ""
    return (
        event.time or datetime.min.replace(tzinfo=UTC),
        int(version) if version.isdigit() else 0,
    )


def _newest(events: Sequence[Event], reason: str) -> Event | None:
    stamped = [e for e in events if e.reason == reason and e.time is not None]
    return max(stamped, key=_order, default=None)


def reported_lines(events: Sequence[Event], recomputed: str | None, *, now: datetime) -> list[str]:
    """What the controller last reported (newest event of each reason, with its age), and
    whether its last `Unconsolidatable` reason differs from `recomputed` (the pass's reason
    for keeping the node; None when the pass does not keep it)."""
    lines: list[str] = []
    for reason in REPORTED:
        event = _newest(events, reason)
        if event is not None and event.time is not None:
            ago = age((now - event.time).total_seconds())
            lines.append(
                f"  last reported by the controller ({ago} ago): {reason}: {event.message or ''}"
            )
    if not lines:
        lines.append(f"  no {' or '.join(REPORTED)} event from the controller")
    last = _newest(events, REASON_UNCONSOLIDATABLE)
    if last is not None and last.message != recomputed:
        lines.append(
            "  the controller's last Unconsolidatable reason differs from this recomputation"
            " (it may know of nominations or commands held in its memory, or the cluster"
            " changed since)"
        )
    return lines


async def explain_node(options: Options, name: str) -> str:
    """Connect, list, decide, read the controller's events and describe. Raises KubeError,
    KubeConfigError, ProviderError, NodeNotFoundError."""
    kinds: tuple[ResourceKind[Any], ...] = (
        NODES,
        PODS,
        NODEPOOLS,
        NODECLAIMS,
        DAEMONSETS,
        PODDISRUPTIONBUDGETS,
    )
    buffered = options.feature_gates.capacity_buffer
    if buffered:  # a buffer's room is load on its node, as the running controller weighs it
        kinds = (*kinds, *BUFFER_KINDS)
    async with listed_cluster(options, kinds, meter="karpy.explain") as cluster:
        decision = await explain_pass(
            cluster.view,
            now=cluster.clock.now().timestamp(),
            cloudprovider=cluster.provider,
            scheduler=scheduler_options(options, cluster.provider),
            consolidation=Settings(
                search=Search(options.consolidation.search),
                spot_to_spot=options.feature_gates.spot_to_spot_consolidation,
            ),
            min_improvement=options.consolidation.min_improvement,
            nomination_window=nomination_window(options),
            snapshot_kinds=SnapshotKinds(daemonsets=DAEMONSETS),
            virtual=BufferPods(cluster.view).pods() if buffered else (),
        )
        text = describe(decision, cluster.view, name)
        claim = _claim_of(cluster.view, name)
        if claim is None:
            return text
        involved = [("NodeClaim", claim.metadata.name or "")]
        if claim.status.node_name:
            involved.append(("Node", claim.status.node_name))
        try:
            events = await reported_events(cluster.client, involved)
        except KubeError as error:  # e.g. no RBAC to list events: the recomputation still stands
            return text + f"  the controller's events could not be read: {error}\n"
        recomputed = decision.reason_for(claim.metadata.name or "")
        lines = reported_lines(
            events,
            recomputed.message if recomputed is not None else None,
            now=cluster.clock.now(),
        )
    return text + "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    """`karpy explain node NAME [karpy run flags]`: 0 printed, 2 on failure."""
    parser = argparse.ArgumentParser(
        prog="karpy explain node",
        description="Explain why consolidation leaves a node of a running cluster alone.",
    )
    parser.add_argument("name", help="Node or NodeClaim name")
    args = list(argv)
    if args[:1] == ["node"]:
        args = args[1:]
    known, rest = parser.parse_known_args(args)
    try:
        options = load(rest, os.environ)
        text = asyncio.run(asyncio.wait_for(explain_node(options, known.name), EXPLAIN_TIMEOUT))
    except NodeNotFoundError as error:
        sys.stderr.write(f"karpy explain node: node {error.args[0]!r} not found\n")
        return 2
    except (OptionsError, KubeConfigError, KubeError, ProviderError, TimeoutError) as error:
        sys.stderr.write(f"karpy explain node: {error}\n")
        return 2
    sys.stdout.write(text)
    return 0
