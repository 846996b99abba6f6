"""Render a plan or an explanation as a table (for people) or JSON (for tools and golden tests).

Pure formatting over the core's ``Results``: stable ordering and fixed float precision so the
same scenario always prints the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Pod
from karpy.core.requirements import Requirement
from karpy.core.resources import CPU, MEMORY, format_quantity
from karpy.core.scheduling.results import Explanation, NodeClaimPlan, Results
from karpy.core.snapshot import Node
from karpy.simulate.consolidate import Report, Step, node_price
from karpy.simulate.overlays import OverlayPlan, describe

MAX_LISTED_TYPES = 3


def _price(value: float) -> float:
    return round(value, 6)


def plan_dict(
    results: Results, pods: tuple[Pod, ...], overlays: OverlayPlan | None = None
) -> dict[str, object]:
    """The plan as plain data (keys and lists in a stable order); with the scenario's
    NodeOverlays when it has any."""
    names: dict[str, str] = {p.uid: p.key for p in pods}
    judged = {} if overlays is None or overlays.empty else {"overlays": overlay_dict(overlays)}
    return judged | {
        "summary": {
            "pods": len(pods),
            "placed": len(results.placed()),
            "unplaced": len(results.unplaced),
            "nodeclaims": len(results.nodeclaims),
            "pricePerHour": _price(results.price),
            "greedyPricePerHour": _price(results.greedy_price),
        },
        "nodeclaims": [claim_dict(c, names) for c in results.nodeclaims],
        "nominations": [
            {"pod": names.get(n.pod, n.pod), "node": n.node} for n in results.nominations
        ],
        "unplaced": [explanation_dict(e) for e in results.unplaced],
        "relaxed": [
            {"pod": names.get(r.pod, r.pod), "steps": list(r.steps)} for r in results.relaxed
        ],
    }


def claim_dict(claim: NodeClaimPlan, names: Mapping[str, str]) -> dict[str, object]:
    """One NodeClaim as plain data."""
    out: dict[str, object] = {
        "name": claim.name,
        "nodepool": claim.nodepool,
        "instanceTypes": list(claim.instance_types),
        "zones": list(claim.zones),
        "capacityTypes": list(claim.capacity_types),
        "requests": claim.requests.render(),
        "pricePerHour": _price(claim.price),
        "pods": [names.get(uid, uid) for uid in claim.pods],
        "requirements": [entry for r in claim.requirements for entry in _requirement(r)],
    }
    if claim.min_values_relaxed:
        out["minValuesRelaxed"] = True
    return out


def _requirement(req: Requirement) -> list[dict[str, object]]:
    """One entry per node-selector expression (a key with bounds needs several)."""
    out: list[dict[str, object]] = []
    for op, values in req.expressions():
        entry: dict[str, object] = {"key": req.key, "operator": op.value, "values": list(values)}
        if req.min_values is not None and not out:
            entry["minValues"] = req.min_values
        out.append(entry)
    return out


def explanation_dict(e: Explanation) -> dict[str, object]:
    """One explanation as plain data."""
    return {
        "pod": e.pod,
        "message": e.message,
        "relaxations": list(e.relaxations),
        "nodepools": [
            {
                "nodepool": p.nodepool,
                "instanceTypes": p.instance_types,
                "steps": [
                    {
                        "reason": s.kind.value,
                        "detail": s.detail,
                        "removed": s.removed,
                        "remaining": s.remaining,
                    }
                    for s in p.steps
                ],
            }
            for p in e.nodepools
        ],
        "existingNodes": [
            {"reason": s.kind.value, "detail": s.detail, "count": s.count} for s in e.existing_nodes
        ],
        "nodeclaims": [
            {"reason": s.kind.value, "detail": s.detail, "count": s.count} for s in e.nodeclaims
        ],
    }


def overlay_dict(plan: OverlayPlan) -> dict[str, object]:
    """Which NodeOverlays apply, and the ones that conflict with the overlay they name."""
    return {
        "applied": [o.name for o in plan.accepted],
        "conflicts": dict(sorted(plan.conflicts.items())),
    }


def to_json(data: object) -> str:
    """Deterministic, indented JSON."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _types(claim: NodeClaimPlan) -> str:
    shown = ", ".join(claim.instance_types[:MAX_LISTED_TYPES])
    more = len(claim.instance_types) - MAX_LISTED_TYPES
    return f"{shown} (+{more})" if more > 0 else shown


def plan_table(results: Results, pods: tuple[Pod, ...], overlays: OverlayPlan | None = None) -> str:
    """The plan for a terminal, after a line per NodeOverlay of the scenario."""
    names = {p.uid: p.key for p in pods}
    lines: list[str] = [] if overlays is None else describe(overlays)
    if results.nodeclaims:
        rows = [
            [
                "NODECLAIM",
                "NODEPOOL",
                "INSTANCE TYPES",
                "ZONES",
                "CAPACITY",
                "PODS",
                "CPU",
                "MEMORY",
                "$/H",
            ]
        ]
        for c in results.nodeclaims:
            rows.append(
                [
                    c.name,
                    c.nodepool,
                    _types(c),
                    ",".join(c.zones),
                    ",".join(c.capacity_types),
                    str(len(c.pods)),
                    format_quantity(CPU, c.requests.get_amount(CPU)),
                    format_quantity(MEMORY, c.requests.get_amount(MEMORY)),
                    f"{c.price:.4f}",
                ]
            )
        lines += _table(rows)
    else:
        lines.append("no new nodeclaims")
    if results.nominations:
        lines.append("")
        rows = [["POD", "NOMINATED NODE"]]
        rows += [[names.get(n.pod, n.pod), n.node] for n in results.nominations]
        lines += _table(rows)
    if results.relaxed:
        lines.append("")
        rows = [["POD", "PLACED AFTER"]]
        rows += [[names.get(r.pod, r.pod), "; ".join(r.steps)] for r in results.relaxed]
        lines += _table(rows)
    if results.unplaced:
        lines.append("")
        lines.append("UNPLACED")
        lines += [f"  {e.message}" for e in results.unplaced]
    placed = len(results.placed())
    lines.append("")
    lines.append(
        f"{placed}/{len(pods)} pods placed, {len(results.nodeclaims)} new nodeclaims,"
        f" {results.price:.4f} $/h (greedy {results.greedy_price:.4f} $/h)"
    )
    return "\n".join(lines) + "\n"


def explanation_text(e: Explanation) -> str:
    """One explanation for a terminal: the line, then the per-NodePool filter steps."""
    lines = [e.message]
    if e.relaxations:
        lines.append("relaxed: " + "; ".join(e.relaxations))
    for pool in e.nodepools:
        lines.append(f'nodepool "{pool.nodepool}" ({pool.instance_types} instance types):')
        for s in pool.steps:
            lines.append(f"  - {s.kind.value}: {s.detail}: removed {s.removed}, {s.remaining} left")
    for label, summary in (("existing nodes", e.existing_nodes), ("new nodeclaims", e.nodeclaims)):
        if summary:
            lines.append(f"{label}:")
            lines += [f"  - {s.count} x {s.kind.value}: {s.detail}" for s in summary]
    return "\n".join(lines) + "\n"


def _node_row(node: Node, types: Mapping[str, Sequence[InstanceType]]) -> list[str]:
    labels = dict(node.labels)
    price = node_price(node, types)
    return [
        node.name,
        node.nodepool or "-",
        labels.get(wk.LABEL_INSTANCE_TYPE, "-"),
        labels.get(wk.LABEL_CAPACITY_TYPE, "-"),
        labels.get(wk.LABEL_TOPOLOGY_ZONE, "-"),
        str(len(node.pods)),
        "-" if price is None else f"{price:.4f}",
    ]


def _command_line(step: Step) -> str:
    command = step.command
    names = ", ".join(command.names)
    if command.replacements:
        plan = command.replacements[0]
        made = ", ".join(step.launched) or plan.name
        return (
            f"{command.method}: replace {names} with {made}"
            f" ({plan.instance_types[0]} {plan.capacity_types[0]}, {plan.price:.4f} $/h)"
        )
    return f"{command.method}: delete {names}"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4f}"


def consolidation_table(report: Report) -> str:
    """What consolidation does, for a terminal: the commands, then the nodes before and after,
    then why each remaining node is kept."""
    types = _types_of(report)
    lines = ["COMMANDS"]
    if not report.steps:
        lines.append("  (none)")
    for i, step in enumerate(report.steps, 1):
        lines.append(f"  {i}. {_command_line(step)} -> {step.price_after:.4f} $/h")
    header = ["NODE", "NODEPOOL", "INSTANCE TYPE", "CAPACITY", "ZONE", "PODS", "$/H"]
    for title, nodes in (("BEFORE", report.before), ("AFTER", report.after)):
        lines.append("")
        lines.append(title)
        lines += _table([header, *(_node_row(n, types) for n in nodes)])
    lines.append("")
    lines.append("KEPT")
    if not report.kept:
        lines.append("  (none)")
    lines += [f"  {k.nodeclaim}: {k.reason.value}: {k.message}" for k in report.kept]
    lines.append("")
    lines.append(
        f"{len(report.before)} -> {len(report.after)} nodes,"
        f" {_money(report.price_before)} -> {_money(report.price_after)} $/h,"
        f" {len(report.steps)} commands"
    )
    return "\n".join(lines) + "\n"


def _types_of(report: Report) -> Mapping[str, Sequence[InstanceType]]:
    return report.instance_types


def consolidation_dict(report: Report) -> dict[str, object]:
    """What consolidation does, as plain data."""
    types = _types_of(report)

    def nodes(found: Sequence[Node]) -> list[dict[str, object]]:
        header = ["name", "nodePool", "instanceType", "capacityType", "zone", "pods"]
        out: list[dict[str, object]] = []
        for node in found:
            row: dict[str, object] = dict(zip(header, _node_row(node, types)[:6], strict=True))
            row["pods"] = len(node.pods)
            price = node_price(node, types)
            row["pricePerHour"] = None if price is None else _price(price)
            out.append(row)
        return out

    return {
        "commands": [
            {
                "method": s.command.method,
                "decision": s.command.decision.value,
                "nodes": list(s.command.names),
                "launched": list(s.launched),
                "replacements": [
                    {
                        "instanceTypes": list(p.instance_types),
                        "capacityTypes": list(p.capacity_types),
                        "pricePerHour": _price(p.price),
                    }
                    for p in s.command.replacements
                ],
                "pricePerHourAfter": _price(s.price_after),
            }
            for s in report.steps
        ],
        "before": nodes(report.before),
        "after": nodes(report.after),
        "pricePerHourBefore": None if report.price_before is None else _price(report.price_before),
        "pricePerHourAfter": None if report.price_after is None else _price(report.price_after),
        "kept": [
            {"node": k.nodeclaim, "reason": k.reason.value, "message": k.message}
            for k in report.kept
        ],
    }
