"""HiGHS, the LP solver of the seeded packing pass (karpy.core.scheduling.seeding), writes a
copyright banner to the process's standard output the first time a solver is made in the
process, whatever options that solver is given after it exists. karpy's output is JSON log
lines (and the demo's own text), so the entry points make that first solver here, before
anything else runs, with standard output pointed at /dev/null; later solvers print nothing.
Kept out of the pure core, which does no I/O.
"""

from __future__ import annotations

import ctypes
import os
import sys

import highspy


def silence_solver_banner() -> None:
    """Make the process's first HiGHS solver with file descriptor 1 on /dev/null.

    Side effects: flushes Python's and C's standard output, and swaps descriptor 1 for the
    duration of one constructor call; call it before any other thread writes to stdout.
    """
    sys.stdout.flush()
    libc = ctypes.CDLL(None)
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
            highspy.Highs()  # type: ignore[no-untyped-call]
            libc.fflush(None)  # the banner may still sit in C's buffer: to /dev/null with it
    finally:
        os.dup2(saved, 1)
        os.close(saved)
