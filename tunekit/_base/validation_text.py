"""A pydantic ValidationError as one line for a message: where, and what is wrong.

pydantic's own text spans lines, repeats the input (a whole file's worth, for a bad bundle) and
adds a documentation URL; an error naming a file the user gave should say, on one line, which
field is wrong and why.
"""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["validation_text"]

# A location can hold a key read from the file itself ("\n" included): escaped, the text stays one line.
_CONTROL_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}


def validation_text(exc: ValidationError, *, whole: str | None = None, limit: int = 3) -> str:
    """The first ``limit`` errors as ``where: what``, joined by "; ", then how many more there are.

    ``whole`` names the location of an error about the whole input (an empty location); None
    leaves such an error unlocated.
    """
    errors = exc.errors(include_url=False)
    parts = []
    for error in errors[:limit]:
        where = ".".join(str(part) for part in error["loc"]).translate(_CONTROL_ESCAPES) or whole
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    more = len(errors) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
