"""Map coordinates to index ranges: bounding boxes on 1-D lat/lon coordinates or an affine
transform, and ISO dates on a CF time coordinate (several calendars). Pure.

Index ranges are half-open ``(start, stop)`` element ranges along one axis.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ..errors import BadInputError

__all__ = ["affine_ranges", "date_to_cf", "interval_ranges", "lon_ranges", "parse_bbox", "parse_time_range"]


def parse_bbox(text: str) -> tuple[float, float, float, float]:
    try:
        w, s, e, n = (float(x) for x in text.split(","))
    except ValueError:
        raise BadInputError(f"--bbox {text!r}: give W,S,E,N as four numbers") from None
    if not all(np.isfinite([w, s, e, n])):
        raise BadInputError(f"--bbox {text!r}: the four numbers must be finite")
    if s > n:
        raise BadInputError(f"--bbox {text!r}: south {s} is north of north {n}")
    return w, s, e, n


def parse_time_range(text: str) -> tuple[datetime, datetime]:
    parts = [p.strip() for p in text.split("/")]
    if len(parts) != 2:
        raise BadInputError(f"--time {text!r}: give START/END as ISO dates, e.g. 2024-01-01/2024-01-31")
    try:
        a, b = (_utc_naive(datetime.fromisoformat(p.replace("Z", "+00:00"))) for p in parts)
    except ValueError:
        raise BadInputError(f"--time {text!r}: START and END must be ISO dates") from None
    if len(parts[1]) <= 10:  # a date without a time: the whole day
        b = b + timedelta(days=1) - timedelta(microseconds=1)
    if a > b:
        raise BadInputError(f"--time {text!r}: START is after END")
    return a, b


def _utc_naive(d: datetime) -> datetime:
    return d.astimezone(UTC).replace(tzinfo=None) if d.tzinfo is not None else d


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
    transform: list[float],
    height: int,
    width: int,
    bbox: tuple[float, float, float, float],
    *,
    geographic: bool = False,
) -> tuple[tuple[int, int], list[tuple[int, int]]] | None:
    """(row range, column ranges) of the pixels a box touches, for a north-up GDAL transform
    ``x0, dx, 0, y0, 0, dy``; None when the box misses the raster. On a geographic grid a box
    with W > E crosses the antimeridian (two column ranges), and boxes are also tried shifted
    by 360 degrees."""
    x0, dx, rx, y0, ry, dy = (float(t) for t in transform)
    if rx != 0 or ry != 0 or dx == 0 or dy == 0:
        raise BadInputError("--bbox on a rotated or sheared raster grid is not supported")
    w, s, e, n = bbox
    rows = sorted(((n - y0) / dy, (s - y0) / dy))
    r0, r1 = max(0, int(np.floor(rows[0]))), min(height, int(np.ceil(rows[1])))
    if r1 <= r0:
        return None
    if geographic and w > e:  # across the antimeridian: one interval on the circle, W to E + 360
        e += 360.0
    found: list[tuple[int, int]] = []
    for shift in (0.0, -360.0, 360.0) if geographic else (0.0,):  # the grid's longitudes may be either convention
        lo, hi = sorted(((w + shift - x0) / dx, (e + shift - x0) / dx))
        c0, c1 = max(0, int(np.floor(lo))), min(width, int(np.ceil(hi)))
        if c0 < c1:
            found.append((c0, c1))
    cols: list[tuple[int, int]] = []
    for c0, c1 in sorted(found):  # each column once: overlapping ranges merged
        if cols and c0 <= cols[-1][1]:
            cols[-1] = (cols[-1][0], max(cols[-1][1], c1))
        else:
            cols.append((c0, c1))
    return ((r0, r1), cols) if cols else None


def date_to_cf(when: datetime, units: str, calendar: str = "standard") -> float:
    """The CF value (in ``units`` like ``days since 1978-01-01``) of a date in ``calendar``
    (cftime does the calendar arithmetic: mixed Julian/Gregorian standard, noleap, 360_day...)."""
    import cftime

    try:
        d = cftime.datetime(when.year, when.month, when.day, when.hour, when.minute, when.second,
                            when.microsecond, calendar=calendar or "standard")  # fmt: skip
        return float(cftime.date2num(d, units, calendar=calendar or "standard"))
    except (ValueError, TypeError) as e:
        raise BadInputError(f"cannot place {when.isoformat()} on '{units}' ({calendar}): {e}") from None
