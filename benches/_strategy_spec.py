"""A strategy named with some constructor arguments changed, as the strategy benches take it.

``model_ils@gp_guesses=0+gp_wide=True`` is ``model_ils`` sized for the budget, with those
keywords (values as Python literals): two versions of one strategy side by side in one run and one
results file, where a name alone would stand for whichever version the checkout holds.
"""

from __future__ import annotations

import ast
import functools
from typing import Any


def split(spec: str) -> tuple[str, dict[str, Any]]:
    """The strategy's name and the keywords ``spec`` changes (none for a plain name)."""
    name, _, options = spec.partition("@")
    changed: dict[str, Any] = {}
    for option in filter(None, options.split("+")):
        key, sep, value = option.partition("=")
        if not sep:
            raise ValueError(f"{spec!r}: {option!r} is not KEY=VALUE (e.g. model_ils@gp_guesses=0)")
        changed[key] = ast.literal_eval(value)
    return name, changed


def strategy(spec: str, budget: int) -> Any:
    """What ``tk.search(strategy=...)`` takes for ``spec``: the plain name, or a factory with the keywords changed."""
    from tunekit._search.strategies import make_strategy

    name, changed = split(spec)
    if not changed:
        return name
    if name == "auto":
        raise ValueError(f"{spec!r}: auto is resolved per space and takes no keywords; name the strategy itself")
    return functools.partial(make_strategy(name, budget), **changed)
