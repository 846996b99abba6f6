"""`--help` works for every command and subcommand of the `karpy` CLI and documents every flag.

The commands come from the dispatcher's own tables and the subcommands from each command's
argparse parser, so a command or subcommand added later is covered without editing this file.
argparse %-formats help text, so a bare `%` in any help string fails here, not in a user's shell.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import IO

import pytest

from karpy.operator import main as cli
from karpy.runtime.options import documented

Words = tuple[str, ...]

COMMANDS: list[Words] = [(name,) for name in cli._COMMANDS] + list(cli._VARIANTS)


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[argparse.ArgumentParser]:
    """The parsers that print help from now on, in order."""
    parsers: list[argparse.ArgumentParser] = []
    original = argparse.ArgumentParser.print_help

    def print_help(parser: argparse.ArgumentParser, file: IO[str] | None = None) -> None:
        parsers.append(parser)
        original(parser, file)

    monkeypatch.setattr(argparse.ArgumentParser, "print_help", print_help)
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside a flag's or variable's name
    return parsers


def _help(
    words: Words, shown: list[argparse.ArgumentParser], capsys: pytest.CaptureFixture[str]
) -> tuple[argparse.ArgumentParser, str]:
    """Run `karpy WORDS --help`; the parser that printed the help and what it printed."""
    shown.clear()
    try:
        code: object = cli.main([*words, "--help"])
    except SystemExit as exit_:
        code = exit_.code
    output = capsys.readouterr()
    assert code == 0, f"karpy {' '.join(words)} --help exited {code}: {output.err}"
    assert len(shown) == 1, f"karpy {' '.join(words)} --help printed {len(shown)} helps"
    return shown[0], output.out


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices


def _shown_names(parser: argparse.ArgumentParser) -> Iterator[str]:
    """What help must show of each argument: its flags, a positional's name, subcommands."""
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices
        elif action.option_strings:
            yield from action.option_strings
        else:
            yield str(action.metavar or action.dest)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_and_subcommand_shows_help_with_every_flag(
    command: Words, shown: list[argparse.ArgumentParser], capsys: pytest.CaptureFixture[str]
) -> None:
    pending, helped = [command], []
    while pending:
        words = pending.pop()
        parser, text = _help(words, shown, capsys)
        missing = [name for name in _shown_names(parser) if name not in text]
        assert not missing, f"karpy {' '.join(words)} --help does not show {missing}"
        pending += [(*words, name) for name in _subcommands(parser)]
        helped.append(words)
    if command == ("cluster",):  # the walk reaches subcommands through the parser itself
        assert ("cluster", "up") in helped


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(f"  {name}  " in text for name in cli._COMMANDS), text


def test_run_help_names_every_setting_flag_and_variable(
    shown: list[argparse.ArgumentParser], capsys: pytest.CaptureFixture[str]
) -> None:
    _, text = _help(("run",), shown, capsys)
    for flag, variable, _ in documented():
        assert flag in text
        assert f"[env {variable}]" in text
    assert "(count or %)" in text  # a literal % shows as one
