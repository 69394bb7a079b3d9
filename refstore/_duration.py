"""Durations as users write them: ``0``, ``90s``, ``10m``, ``1h``, ``7d``."""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import BadInputError

__all__ = ["parse_duration"]

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, *, name: str = "grace") -> timedelta:
    """``text`` as a timedelta (a bare number is seconds); ``name`` is said when it is refused.

    >>> parse_duration("10m"), parse_duration("0")
    (datetime.timedelta(seconds=600), datetime.timedelta(0))
    """
    m = _DURATION.fullmatch(text)
    if m is None:
        raise BadInputError(f"{name} {text!r}: give a duration such as 0, 90s, 10m, 1h or 7d")
    return timedelta(seconds=float(m.group(1)) * _UNIT[m.group(2)])
