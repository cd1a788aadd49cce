"""Where a tunable set was defined, stored with its winners so another operation's row is told from an edit's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from tunekit._base.persisted import Persisted

if TYPE_CHECKING:
    from tunekit._candidates.tunable_set import TunableSet

__all__ = ["SetOrigin"]


_SHOWN = 16
"""Candidate names kept: enough to recognise a set, bounded for a space of thousands of configurations."""


class SetOrigin(Persisted):
    """Where the set that measured a cache row was defined."""

    key_fn: str = Field(max_length=1000, description="The key generator's module:qualname.")
    candidates: tuple[str, ...] = Field(max_length=_SHOWN, description="The set's first candidate names.")
    candidate_count: int = Field(ge=0)

    @classmethod
    def of(cls, tunables: TunableSet[Any, Any]) -> SetOrigin:
        """The origin of ``tunables``."""
        names = tunables.names
        return cls(
            key_fn=_where(tunables.key)[:1000],
            candidates=tuple(n[:1000] for n in names[:_SHOWN]),
            candidate_count=len(names),
        )

    def describe(self) -> str:
        """The definition in a few words, for messages."""
        more = self.candidate_count - len(self.candidates)
        shown = ", ".join(self.candidates) + (f", ... {more} more" if more > 0 else "")
        return f"key generator {self.key_fn} with candidates {shown}"


def _where(fn: object) -> str:
    # No file or line: an edit above the definition moves its line, and the same module has
    # another file on each machine sharing an exported cache.
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"
