"""``tunekit demo``: run ``examples/demo.py`` from the source checkout."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from tunekit._cli.error import CliError

__all__ = ["demo"]

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def demo(_: argparse.Namespace) -> int:
    """Tune the examples on this machine; the demo prints its table and where it wrote things."""
    script = _EXAMPLES / "demo.py"
    if not script.exists():
        raise CliError(f"the demo needs the examples/ folder of a source checkout ({script} is missing)")
    sys.argv = [str(script)]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0
