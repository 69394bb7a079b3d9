"""Just enough CF time decoding to order sources along a time axis.

``value units`` with units ``<unit> since <date>`` on a standard/gregorian/proleptic_gregorian
calendar becomes seconds since 1970-01-01T00:00:00 UTC. Anything else returns None and the
caller compares raw values (only when all sources share the same units).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

__all__ = ["cf_seconds", "is_cf_time"]

_UNIT_SECONDS = {
    "microsecond": 1e-6, "microseconds": 1e-6, "us": 1e-6,
    "millisecond": 1e-3, "milliseconds": 1e-3, "ms": 1e-3,
    "second": 1.0, "seconds": 1.0, "sec": 1.0, "secs": 1.0, "s": 1.0,
    "minute": 60.0, "minutes": 60.0, "min": 60.0, "mins": 60.0,
    "hour": 3600.0, "hours": 3600.0, "hr": 3600.0, "hrs": 3600.0, "h": 3600.0,
    "day": 86400.0, "days": 86400.0, "d": 86400.0,
    "week": 604800.0, "weeks": 604800.0,
}  # fmt: skip

_SINCE = re.compile(
    r"^\s*(?P<unit>\w+)\s+since\s+(?P<y>-?\d{1,4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:[ T](?P<H>\d{1,2}):(?P<M>\d{1,2})(?::(?P<S>\d{1,2}(?:\.\d*)?))?)?"
    r"\s*(?P<tz>Z|UTC|GMT|[+-]\d{1,2}(?::?\d{2})?)?\s*$",
    re.IGNORECASE,
)
_STANDARD = {"", "standard", "gregorian", "proleptic_gregorian"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cf_seconds(value: float, units: str, calendar: str = "standard") -> float | None:
    """Seconds since the Unix epoch for a CF time value, or None if not decodable here."""
    if calendar.strip().lower() not in _STANDARD:
        return None
    m = _SINCE.match(units)
    if m is None:
        return None
    scale = _UNIT_SECONDS.get(m["unit"].lower())
    if scale is None:
        return None
    try:
        sec = float(m["S"] or 0)
        ref = datetime(int(m["y"]), int(m["m"]), int(m["d"]), int(m["H"] or 0), int(m["M"] or 0), tzinfo=UTC)
        ref += timedelta(seconds=sec)
        tz = m["tz"]
        if tz and tz[0] in "+-":
            sign = 1 if tz[0] == "+" else -1
            digits = tz[1:].replace(":", "")
            hours = int(digits[:-2] or 0) if len(digits) > 2 else int(digits)
            minutes = int(digits[-2:]) if len(digits) > 2 else 0
            ref = ref.replace(tzinfo=timezone(sign * timedelta(hours=hours, minutes=minutes)))
    except ValueError:
        return None
    return (ref - _EPOCH).total_seconds() + float(value) * scale


def is_cf_time(attrs: dict[str, dict[str, object]]) -> bool:
    """Whether typed attributes (``_values``) describe a CF time coordinate: ``standard_name``
    ``time``, ``axis`` ``T`` or units ``<unit> since <date>``."""

    def text(name: str) -> str:
        value = attrs.get(name, {}).get("value")
        return value.strip() if isinstance(value, str) else ""

    return text("standard_name") == "time" or text("axis").upper() == "T" or _SINCE.match(text("units")) is not None
