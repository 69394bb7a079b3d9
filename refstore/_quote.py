"""Untrusted text inside an error message: one line, bounded length.

A reference store chooses its keys, URLs and template values; an error that quotes one must
stay one line (control characters escaped, a newline as ``\\n``) and short (a 100 MB template
value gives a 100 MB URL): ``quote`` keeps the first ``limit`` characters and says how many
were left out. The CLI passes every error message through ``one_line`` as a last guard.
"""

from __future__ import annotations

import re

__all__ = ["LIMIT", "one_line", "quote", "quoted"]

LIMIT = 200
"""Characters of one quoted value."""

_LINE_LIMIT = 2000
"""Characters of a whole error line."""

_CONTROL = re.compile("[\x00-\x1f\x7f\u2028\u2029\x85]")


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")


def quote(value: object, limit: int = LIMIT) -> str:
    """``value`` as text on one line, cut to ``limit`` characters (``... (N more characters)``)."""
    text = value if isinstance(value, str) else str(value)
    cut = text[:limit]
    rest = len(text) - len(cut)
    out = _CONTROL.sub(_escape, cut)
    return out + (f"... ({rest} more characters)" if rest else "")


def quoted(value: object) -> str:
    """``repr(value)``, bounded as ``quote`` bounds it."""
    return quote(repr(value))


def one_line(message: str) -> str:
    """An error message as one bounded line (see ``quote``)."""
    return quote(message, _LINE_LIMIT)
