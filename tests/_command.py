"""The ``tunekit`` command run in the test's own process, as a new process would run it.

A subprocess per call paid the interpreter start and tunekit's import (~1 s on a busy
2-core machine) about 80 times; in-process, only what the command does is timed. What a
new process would differ in is made the same here: its settings are read afresh from the
environment at first use, its output is what it prints plus what tunekit logs at WARNING and
above (Python's last-resort handler prints those to stderr), and its exit code is what
``main`` returns or argparse's ``SystemExit`` carries. The real entry point, its exit codes,
a closed pipe and Ctrl-C are still tested in real processes (test_cli.py's smoke tests).
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import tunekit._base.settings
from tunekit._cli.main import main


@dataclass(frozen=True)
class Ran:
    """What one run of the command printed and how it ended (the fields of ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


def run(*args: str, check: int | None = 0, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Ran:
    """``tunekit ARGS`` in this process; asserts no traceback and, unless ``check`` is None, the exit code."""
    out, err = io.StringIO(), io.StringIO()
    printed = logging.StreamHandler(err)
    printed.setLevel(logging.WARNING)
    root = logging.getLogger()
    with pytest.MonkeyPatch.context() as patch:
        # Output to a pipe, as a new process's with no terminal: no width unless the test gives one
        # (pytest-xdist sets COLUMNS=80 in its workers, which would fit every table to 80 columns).
        patch.delenv("COLUMNS", raising=False)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        # A new process has no settings yet: it reads them from its environment at first use
        # (and reports a bad one then). The test's own settings come back afterwards.
        patch.setattr(tunekit._base.settings, "_anchor_exponent", 0)
        patch.setattr(tunekit._base.settings, "_current", None)
        root.addHandler(printed)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(args))
                except SystemExit as exit_:  # argparse: --help, a usage error
                    code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
        finally:
            root.removeHandler(printed)
    done = Ran(code, out.getvalue(), err.getvalue())
    assert "Traceback" not in done.stderr, done.stderr
    if check is not None:
        assert done.returncode == check, (done.returncode, done.stdout, done.stderr)
    return done
