"""An observer's or a record sink's exception, told apart from the one tunekit was handling when it called it."""

from __future__ import annotations

__all__ = ["detach_from"]


def detach_from(handling: BaseException | None, exc: BaseException) -> None:
    """Leave ``handling`` out of ``exc``'s logged traceback when it is only where ``exc`` was raised.

    A tuner notifies observers and emits records from its own ``except`` blocks (a cache miss is a
    ``KeyError``): chained to that, a callback's failure reads as tunekit's. ``handling`` is
    ``sys.exc_info()[1]`` taken before the callbacks run.
    """
    if handling is not None and exc.__context__ is handling:
        exc.__suppress_context__ = True
