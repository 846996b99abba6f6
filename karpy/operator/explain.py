"""`karpy explain node NAME`: why consolidation leaves a node of a running cluster alone.

It lists the cluster once (what the controller keeps in cluster state), asks the cloud provider
for instance types as the disruption controller does, and runs the disruption pass the
controller would run now, deciding and acting on nothing
(karpy.controllers.disruption.controller.explain_pass). It prints the node, its NodeClaim and
NodePool, its price, and one line: what the pass would do with it, or the one reason it is left
alone — the reason the running controller reports in the node's `Unconsolidatable` event.

A process of its own (it connects and builds a provider), hence the operator layer.
Exit codes: 0 when the answer was printed, 2 on failure (no such node, unreachable cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Final

from opentelemetry.metrics import NoOpMeter

from karpy.apis.v1 import labels as wk
from karpy.cloudprovider.registry import ProviderContext, ProviderError, build_provider
from karpy.controllers.disruption.controller import explain_pass
from karpy.core.disruption.candidates import NodeFacts
from karpy.core.disruption.consolidation import Search, Settings
from karpy.core.disruption.decision import Decision
from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeConfigError, KubeError
from karpy.kube.kinds import DAEMONSETS, NODECLAIMS, NODEPOOLS, NODES, PODDISRUPTIONBUDGETS, PODS
from karpy.operator.snapshot import _list_into
from karpy.operator.wiring import (
    _close_provider,
    _extension,
    _nomination_window,
    _resource_kind,
    _scheduler_options,
)
from karpy.runtime.clock import SystemClock
from karpy.runtime.options import Options, OptionsError, load
from karpy.runtime.telemetry import Metrics
from karpy.state.cluster import ClusterState
from karpy.state.snapshot import SnapshotKinds
from karpy.state.view import ClusterView

EXPLAIN_TIMEOUT: Final = 120.0
"""Seconds the whole explanation (lists, instance types, the pass) may take."""


class NodeNotFoundError(LookupError):
    """The node asked about is neither a Node nor a NodeClaim of the cluster."""


def describe(decision: Decision, view: ClusterView, name: str) -> str:
    """What the pass does with node (or NodeClaim) `name`, for a terminal."""
    facts = next(
        (f for f in _facts(decision) if name in (f.nodeclaim, f.node)),
        None,
    )
    claim = next(
        (c for c in view.nodeclaims() if name in (c.metadata.name, c.status.node_name)),
        None,
    )
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


def _facts(decision: Decision) -> list[NodeFacts]:
    """The candidates' facts (priced); a node that is no candidate has none."""
    return [c.facts for c in decision.selection.candidates]


async def explain_node(options: Options, name: str) -> str:
    """Connect, list, decide and describe. Raises KubeError, KubeConfigError, ProviderError,
    NodeNotFoundError."""
    client = await KubeClient.connect(
        options.kube.kubeconfig, request_timeout=options.kube.request_timeout
    )
    try:
        state = ClusterState(metrics=Metrics.create(NoOpMeter("karpy.explain")))
        for kind in (NODES, PODS, NODEPOOLS, NODECLAIMS, DAEMONSETS, PODDISRUPTIONBUDGETS):
            await _list_into(client, state, kind)
        view = ClusterView(state)
        clock = SystemClock()
        provider = await build_provider(
            options.provider.name,
            ProviderContext(
                kube=client,
                view=view,
                clock=clock,
                cluster_name=options.provider.cluster_name,
                settings=options.provider.settings,
            ),
        )
        try:
            for declared in _extension(provider).kinds:
                kind = _resource_kind(declared, provider=options.provider.name)
                if not state.has(kind):
                    await _list_into(client, state, kind)
            decision = await explain_pass(
                view,
                now=clock.now().timestamp(),
                cloudprovider=provider,
                scheduler=_scheduler_options(options),
                consolidation=Settings(
                    search=Search(options.consolidation.search),
                    spot_to_spot=options.feature_gates.spot_to_spot_consolidation,
                ),
                min_improvement=options.consolidation.min_improvement,
                nomination_window=_nomination_window(options),
                snapshot_kinds=SnapshotKinds(daemonsets=DAEMONSETS),
            )
        finally:
            await _close_provider(provider)
    finally:
        await client.close()
    return describe(decision, view, name)


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
