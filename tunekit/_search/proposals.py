"""What a strategy may propose: new, distinct points of the space, no more than asked for."""

from __future__ import annotations

from tunekit._base.errors import TunekitError
from tunekit._candidates.config import Config
from tunekit._candidates.space import Space

__all__ = ["check_proposals"]

_VALID_POINTS = (
    "space.sample(n, rng), space.config(...), space.neighbours(config) or iter(space) give only points the "
    "space's restrictions allow; space.at(i) and space.from_positions(...) give any Cartesian point, so keep "
    "those for which space.allows(config) holds"
)
"""How a strategy gets valid configurations; ``space.at(i)`` alone also gives restricted-out ones."""


def check_proposals(strategy: str, space: Space, proposals: object, want: int, proposed: set[Config]) -> None:
    """Refuse a strategy's answer to ``propose(want)`` that breaks its contract; ``proposed`` takes the new ones.

    Each fault is the strategy's (a user-written one, often), so the error names it and says what to
    propose instead, rather than failing later in the driver or the trial log.
    """
    if not isinstance(proposals, list | tuple):  # a generator is always truthy and has no len()
        raise TunekitError(
            f"strategy {strategy!r} proposed a {type(proposals).__name__}; propose(n) returns a list of tk.Config"
        )
    if len(proposals) > want:
        raise TunekitError(f"strategy {strategy!r} proposed {len(proposals)} configurations when asked for {want}")
    for config in proposals:
        if not isinstance(config, Config):
            raise TunekitError(
                f"strategy {strategy!r} proposed {config!r}, a {type(config).__name__}, not a tk.Config; "
                f"make it propose points of the space: {_VALID_POINTS}"
            )
        if config in proposed:
            raise TunekitError(f"strategy {strategy!r} proposed {config.name} twice")
        if config not in space:
            raise TunekitError(_not_in_space(strategy, space, config))
        proposed.add(config)


def _not_in_space(strategy: str, space: Space, config: Config) -> str:
    """Why ``config``, proposed by ``strategy``, is no point of ``space``, and how to propose one."""
    try:
        space.config(config)
    except ValueError as exc:
        why = str(exc)
    else:  # not reached: `config in space` asks space.config too
        why = "the space refuses it"
    return f"strategy {strategy!r} proposed {config!r}, which is not in the space ({why}); {_VALID_POINTS}"
