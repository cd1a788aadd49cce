"""The ``tunekit`` command."""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _demo(_: argparse.Namespace) -> int:
    script = _EXAMPLES / "demo.py"
    if not script.exists():
        print(
            f"tunekit: the demo needs the examples/ folder of a source checkout ({script} is missing)", file=sys.stderr
        )
        return 2
    sys.argv = [str(script)]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tunekit`` command; returns the exit code."""
    parser = argparse.ArgumentParser(prog="tunekit", description="Autotuning that measures on the real device.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="tune the examples on this machine and print a table")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
