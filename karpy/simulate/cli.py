"""``karpy simulate FILE`` and ``karpy explain FILE POD``: the solver from the command line.

Reads a scenario, runs the pure solver and prints the plan or one pod's explanation; with
``--consolidate``, runs consolidation over the scenario's existing nodes and prints its commands,
the nodes and $/h before and after, and why each remaining node is kept (exit 0). Exit codes:
0 when every pod was placed (simulate) or the explanation was printed (explain), 1 when some pod
stayed unplaced (simulate), 2 on bad input (unreadable or malformed scenario, unknown pod).
"""

from __future__ import annotations

import argparse
import sys

from karpy.core.buffers import solve_with_buffers, with_buffers
from karpy.core.disruption.consolidation import Search, Settings
from karpy.core.scheduling import solve
from karpy.simulate import overlays, render
from karpy.simulate.consolidate import consolidate
from karpy.simulate.reader import Node, ScenarioError
from karpy.simulate.scenario import load

EXIT_OK = 0
EXIT_UNPLACED = 1
EXIT_BAD_INPUT = 2


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("file", help="scenario file (YAML, or JSON when it ends in .json)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    return parser


def simulate_main(argv: list[str]) -> int:
    """Print the plan for a scenario, or with --consolidate what consolidation would do."""
    parser = _parser("karpy simulate", "Plan where a scenario's pending pods would go.")
    parser.add_argument(
        "--consolidate",
        action="store_true",
        help="print what consolidation would do to the scenario's existing nodes instead",
    )
    parser.add_argument(
        "--search",
        choices=[s.value for s in Search],
        default=Search.KARPY.value,
        help="consolidation search (as karpy run's --consolidation-search)",
    )
    parser.add_argument(
        "--spot-to-spot",
        action="store_true",
        help="allow replacing spot nodes by spot (the SpotToSpotConsolidation feature gate)",
    )
    parser.add_argument(
        "--now",
        metavar="TIME",
        help="the scenario's clock for --consolidate, an RFC 3339 time such as"
        " 2030-01-01T09:30:00Z (default: the scenario's `now`, else 2030-01-01T00:00:00Z)",
    )
    args = parser.parse_args(argv)
    try:
        scenario = load(args.file)
        now = scenario.now if args.now is None else _now(args.now)
    except ScenarioError as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_BAD_INPUT
    if args.consolidate:
        # A buffer's chunks are load where their room is now, as in the running disruption.
        report = consolidate(
            with_buffers(scenario.snapshot, scenario.pods, scenario.buffers, scenario.options),
            scenario.disruption,
            options=scenario.options,
            settings=Settings(search=Search(args.search), spot_to_spot=args.spot_to_spot),
            now=now,
            protection=scenario.protection,
            pending=scenario.pods,
        )
        if args.output == "json":
            sys.stdout.write(render.to_json(render.consolidation_dict(report)))
        else:
            sys.stdout.write(render.consolidation_table(report))
        return EXIT_OK
    results = solve_with_buffers(
        scenario.snapshot, scenario.pods, scenario.buffers, scenario.options
    )
    every = (*scenario.pods, *scenario.buffers)
    if args.output == "json":
        sys.stdout.write(render.to_json(render.plan_dict(results, every, scenario.overlays)))
    else:
        sys.stdout.write(render.plan_table(results, every, scenario.overlays))
    return EXIT_UNPLACED if results.unplaced else EXIT_OK


def _now(text: str) -> float:
    """`--now`: an RFC 3339 time with a zone offset, as epoch seconds."""
    return Node(text, "--now").time().timestamp()


def explain_main(argv: list[str]) -> int:
    """Print why one pod of a scenario goes where it goes, or why it cannot be placed."""
    parser = _parser("karpy explain", "Explain the placement of one pod of a scenario.")
    parser.add_argument("pod", help="pod as namespace/name (namespace defaults to 'default')")
    args = parser.parse_args(argv)
    try:
        scenario = load(args.file)
    except ScenarioError as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_BAD_INPUT
    key = args.pod if "/" in args.pod else f"default/{args.pod}"
    pod = next((p for p in scenario.pods if p.key == key), None)
    if pod is None:
        sys.stderr.write(f"error: pod {key!r} is not a pending pod of {args.file}\n")
        return EXIT_BAD_INPUT
    results = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    found = next((e for e in results.unplaced if e.uid == pod.uid), None)
    if found is not None:
        if args.output == "json":
            sys.stdout.write(render.to_json(render.explanation_dict(found)))
        else:
            sys.stdout.write(render.explanation_text(found))
        return EXIT_OK
    target = results.placed().get(pod.uid)
    claim = next((c for c in results.nodeclaims if c.name == target), None)
    if args.output == "json":
        data: dict[str, object] = {"pod": key, "placedOn": target}
        if claim is not None:
            data["nodeclaim"] = render.claim_dict(claim, {p.uid: p.key for p in scenario.pods})
            what = scenario.overlays.applied_to(claim.nodepool, claim.instance_types[0])
            if what.overlays:
                data["overlays"] = {
                    "instanceType": claim.instance_types[0],
                    "prices": {f"{z}/{ct}": n for (z, ct), n in sorted(what.prices.items())},
                    "capacity": dict(sorted(what.capacity.items())),
                }
        sys.stdout.write(render.to_json(data))
    elif claim is not None:
        sys.stdout.write(
            f"pod {key} is placed on new nodeclaim {claim.name} (nodepool {claim.nodepool},"
            f" {len(claim.instance_types)} instance types from {claim.instance_types[0]},"
            f" zones {','.join(claim.zones)}, {claim.price:.4f} $/h)\n"
        )
        sys.stdout.write(
            overlays.applied_text(scenario.overlays, claim.nodepool, claim.instance_types[0])
        )
    else:
        sys.stdout.write(f"pod {key} is nominated to existing node {target}\n")
    return EXIT_OK
