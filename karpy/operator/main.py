"""The ``karpy`` command line: one entry point that dispatches to each tool.

Subcommands import their implementation lazily, so ``karpy cluster status`` does not pay for
loading the Kubernetes client and ``karpy simulate`` never touches the network stack.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

import karpy

# subcommand -> (module, function, one-line help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("karpy.operator.run", "main", "run the autoscaler daemon against a cluster"),
    "demo": (
        "karpy.operator.demo",
        "main",
        "bring up the local cluster and play the inflate walkthrough",
    ),
    "cluster": (
        "karpy.localcluster.cli",
        "main",
        "manage the local control plane: up | down | status | env | build",
    ),
    "simulate": (
        "karpy.simulate.cli",
        "simulate_main",
        "print the scheduling plan for a scenario file",
    ),
    "convert": (
        "karpy.convert.cli",
        "main",
        "convert Karpenter v0.x (v1alpha5) manifests to karpenter.sh/v1",
    ),
    "explain": (
        "karpy.simulate.cli",
        "explain_main",
        "explain why one pod of a scenario cannot be placed;"
        " 'explain node NAME': why consolidation keeps a node of a running cluster",
    ),
}

# (command, argument) -> (module, function): an argument that hands a command to another tool,
# because that variant connects to a cluster and builds a provider, the operator's business. A
# flag is looked for anywhere after the command, a word only right after it.
_VARIANTS: dict[tuple[str, str], tuple[str, str]] = {
    ("simulate", "--from-cluster"): ("karpy.operator.snapshot", "main"),
    ("explain", "node"): ("karpy.operator.explain", "main"),
}


def _entry(command: str, rest: list[str]) -> tuple[str, str]:
    """The (module, function) that runs `command` with the arguments `rest`."""
    for (name, argument), entry in _VARIANTS.items():
        given = argument in rest if argument.startswith("-") else rest[:1] == [argument]
        if name == command and given:
            return entry
    module_name, function_name, _ = _COMMANDS[command]
    return module_name, function_name


def _usage() -> str:
    width = max(len(name) for name in _COMMANDS)
    lines = [
        f"karpy {karpy.__version__} - group-less Kubernetes node autoscaling",
        "",
        "usage: karpy COMMAND [ARGS...]",
        "",
        "commands:",
        *(f"  {name.ljust(width)}  {help_}" for name, (_, _, help_) in _COMMANDS.items()),
        "",
        "Run 'karpy COMMAND --help' for a command's options.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default: sys.argv[1:]) and return the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        sys.stdout.write(_usage() + "\n")
        return 0
    if args[0] == "--version":
        sys.stdout.write(f"karpy {karpy.__version__}\n")
        return 0
    command, rest = args[0], args[1:]
    if command not in _COMMANDS:
        sys.stderr.write(f"karpy: unknown command {command!r}\n\n{_usage()}\n")
        return 2
    module_name, function_name = _entry(command, rest)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            sys.stderr.write(f"karpy: the {command!r} command is not available in this build\n")
            return 2
        raise
    entry: Callable[[list[str]], int] = getattr(module, function_name)
    return entry(rest)
