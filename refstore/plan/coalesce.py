"""Byte-range coalescing: merge references into fewer, larger reads. Pure.

Two knobs (the object_store / async-tiff model): ranges merge when the gap between them is at
most ``max_gap`` bytes and the merged read stays within ``max_bytes``. ``max_gap=0`` merges only
adjacent (or overlapping) ranges, so a strided box never over-reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_GAP", "Runs", "coalesce"]

DEFAULT_MAX_GAP = 0
DEFAULT_MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Runs:
    """Merged reads of one source. ``start``/``end``: byte ranges to fetch (half-open).
    ``run``: for each input range, the index of the read holding it."""

    start: np.ndarray[Any, Any]
    end: np.ndarray[Any, Any]
    run: np.ndarray[Any, Any]


def coalesce(
    offsets: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    *,
    max_gap: int = DEFAULT_MAX_GAP,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Runs:
    """Group byte ranges (``offsets``, ``lengths`` in bytes) into reads.

    A single range longer than ``max_bytes`` is read alone, never split.
    """
    if max_gap < 0 or max_bytes <= 0:
        raise ValueError("max_gap must be >= 0 and max_bytes > 0")
    n = len(offsets)
    run = np.empty(n, np.int64)
    if n == 0:
        return Runs(np.empty(0, np.int64), np.empty(0, np.int64), run)
    off = np.asarray(offsets, np.int64)
    end_ = off + np.asarray(lengths, np.int64)
    order = np.argsort(off, kind="stable")
    starts: list[int] = []
    ends: list[int] = []
    cur_start = cur_end = -1
    r = -1
    for i, o, e in zip(order.tolist(), off[order].tolist(), end_[order].tolist(), strict=True):
        if r >= 0 and o - cur_end <= max_gap and max(cur_end, e) - cur_start <= max_bytes:
            cur_end = max(cur_end, e)
            ends[r] = cur_end
        else:
            r += 1
            cur_start, cur_end = o, e
            starts.append(o)
            ends.append(e)
        run[i] = r
    return Runs(np.asarray(starts, np.int64), np.asarray(ends, np.int64), run)
