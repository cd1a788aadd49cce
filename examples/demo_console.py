"""The console the demos print to: the terminal's width on a terminal, no wrapping when piped.

rich assumes 80 columns when the output is no terminal, so a piped demo (`make demo | tee log`)
would cut a trial log's path or a candidate's name in two inside a table cell. Piped without
``COLUMNS``, the demos print each row whole, as the ``tunekit`` command's listings do.

Markup is off: the demos print text they did not write (an install hint such as
``pip install 'tunekit[opencl]'``, a candidate named ``kernel[block=64]``, a path), and rich's
markup would take each lowercase ``[word]`` in it for a style tag and drop it. The demos colour
their own words with ``style=`` and ``Text.assemble`` instead.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPED_WIDTH = 10_000
"""Wide enough that no table of the demos wraps; tables take their natural width, not this."""


def demo_console() -> Console:
    """A console for the demos' tables and lines (see the module's docstring)."""
    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(width=PIPED_WIDTH, markup=False) if piped else Console(markup=False)
