"""Map coordinates to index ranges: bounding boxes on 1-D lat/lon coordinates or an affine
transform, and ISO dates on a CF time coordinate (several calendars). Pure.

Index ranges are half-open ``(start, stop)`` element ranges along one axis.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import BadInputError

__all__ = ["affine_ranges", "date_to_cf", "interval_ranges", "lon_ranges", "parse_bbox", "parse_time_range"]

_UNIT_SECONDS = {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0, "week": 604800.0}
_NOLEAP_CUM = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]


def parse_bbox(text: str) -> tuple[float, float, float, float]:
    try:
        w, s, e, n = (float(x) for x in text.split(","))
    except ValueError:
        raise BadInputError(f"--bbox {text!r}: give W,S,E,N as four numbers") from None
    if s > n:
        raise BadInputError(f"--bbox {text!r}: south {s} is north of north {n}")
    return w, s, e, n


def parse_time_range(text: str) -> tuple[datetime, datetime]:
    parts = text.split("/")
    if len(parts) != 2:
        raise BadInputError(f"--time {text!r}: give START/END as ISO dates, e.g. 2024-01-01/2024-01-31")
    try:
        a, b = (datetime.fromisoformat(p.strip().replace("Z", "+00:00")).replace(tzinfo=None) for p in parts)
    except ValueError:
        raise BadInputError(f"--time {text!r}: START and END must be ISO dates") from None
    if a > b:
        raise BadInputError(f"--time {text!r}: START is after END")
    return a, b


def interval_ranges(values: np.ndarray[Any, Any], lo: float, hi: float) -> list[tuple[int, int]]:
    """Index ranges of a monotonic (ascending or descending) coordinate with lo <= v <= hi."""
    v = np.asarray(values, dtype=np.float64)
    inside = np.flatnonzero((v >= lo) & (v <= hi))
    if inside.size == 0:
        return []
    return [(int(inside.min()), int(inside.max()) + 1)]


def lon_ranges(values: np.ndarray[Any, Any], west: float, east: float) -> list[tuple[int, int]]:
    """Index ranges of a longitude coordinate inside [west, east] (degrees), whatever convention
    either uses (0..360 or -180..180); a box across the antimeridian (west > east once
    normalised) selects both sides."""
    v = np.mod(np.asarray(values, dtype=np.float64) + 180.0, 360.0) - 180.0  # to -180..180
    if east - west >= 360.0:
        return [(0, len(v))]
    w = (west + 180.0) % 360.0 - 180.0
    e = (east + 180.0) % 360.0 - 180.0
    mask = (v >= w) & (v <= e) if w <= e else (v >= w) | (v <= e)
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return []
    # runs of consecutive indices (a 0..360 grid cut by a -180..180 box gives two)
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate([[idx[0]], idx[breaks + 1]])
    stops = np.concatenate([idx[breaks], [idx[-1]]]) + 1
    return [(int(a), int(b)) for a, b in zip(starts, stops, strict=True)]


def affine_ranges(
    transform: list[float], height: int, width: int, bbox: tuple[float, float, float, float]
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(row range, column range) of the pixels a box touches, for a north-up GDAL transform
    ``x0, dx, 0, y0, 0, dy``. None when the box misses the raster or the grid is rotated."""
    x0, dx, rx, y0, ry, dy = (float(t) for t in transform)
    if rx != 0 or ry != 0 or dx == 0 or dy == 0:
        return None
    w, s, e, n = bbox
    cols = sorted(((w - x0) / dx, (e - x0) / dx))
    rows = sorted(((n - y0) / dy, (s - y0) / dy))
    c0, c1 = max(0, int(np.floor(cols[0]))), min(width, int(np.ceil(cols[1])))
    r0, r1 = max(0, int(np.floor(rows[0]))), min(height, int(np.ceil(rows[1])))
    if c1 <= c0 or r1 <= r0:
        return None
    return (r0, r1), (c0, c1)


_SINCE = re.compile(
    r"^\s*(?P<unit>[a-z]+?)s?\s+since\s+(?P<y>-?\d{1,4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:[ T](?P<H>\d{1,2}):(?P<M>\d{1,2})(?::(?P<S>\d{1,2}(?:\.\d*)?))?)?",
    re.IGNORECASE,
)


def _days(y: int, m: int, d: int, calendar: str) -> int:
    """Day number of a date in a calendar (any fixed origin; only differences are used)."""
    cal = calendar.lower()
    if cal in ("noleap", "365_day"):
        return y * 365 + _NOLEAP_CUM[m - 1] + d - 1
    if cal == "360_day":
        return y * 360 + (m - 1) * 30 + d - 1
    if cal in ("all_leap", "366_day"):
        return y * 366 + [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335][m - 1] + d - 1
    return datetime(y, m, d).toordinal()  # standard, gregorian, proleptic_gregorian


def date_to_cf(when: datetime, units: str, calendar: str = "standard") -> float:
    """The CF value (in ``units`` like ``days since 1978-01-01``) of a date in ``calendar``."""
    m = _SINCE.match(units)
    if m is None or m["unit"].lower() not in _UNIT_SECONDS:
        raise BadInputError(f"time units {units!r} are not '<unit> since <date>'")
    ref_sec = int(m["H"] or 0) * 3600 + int(m["M"] or 0) * 60 + float(m["S"] or 0)
    days = _days(when.year, when.month, when.day, calendar) - _days(int(m["y"]), int(m["m"]), int(m["d"]), calendar)
    secs = days * 86400.0 + when.hour * 3600 + when.minute * 60 + when.second - ref_sec
    return secs / _UNIT_SECONDS[m["unit"].lower()]
