"""`karpy convert` run in-process the way a user runs it from a folder of manifests, and the
golden check both golden suites (the seeds, v1beta1) make of its output."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from karpy.convert.cli import main


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved, sys.stdin = sys.stdin, io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def run_convert(
    folder: Path, files: list[str], flags: list[str], stdin: str = ""
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `karpy convert FLAGS FILES` run in `folder` (document
    names in messages are the relative file names), with `stdin` as standard input."""
    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
            code = main([*flags, *files])
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def check_golden(golden: Path, code: int, out: str, err: str) -> None:
    """The run's exit code, warnings and output equal `golden`; a missing golden is written
    when KARPY_UPDATE_GOLDEN is set (then review the diff)."""
    actual = f"# exit {code}\n# stderr:\n" + "".join(f"# {line}\n" for line in err.splitlines())
    actual += out
    if not golden.exists() and os.environ.get("KARPY_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")
