"""Selections: a window over a global array -> chunk keys and the slices that move bytes. Pure.

Bounds are half-open element ranges ``[start, stop)``; chunk index ranges are inclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInputError

__all__ = ["Selection", "box_slices", "chunk_slices", "needed_chunks", "parse_window", "select"]


@dataclass(frozen=True, slots=True)
class Selection:
    """A box with steps. ``start``/``stop`` in elements (half-open), ``step`` >= 1; ``drop``:
    axes indexed by an integer (removed from the result shape)."""

    start: tuple[int, ...]
    stop: tuple[int, ...]
    step: tuple[int, ...]
    drop: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the result."""
        out = []
        for i, (a, b, s) in enumerate(zip(self.start, self.stop, self.step, strict=True)):
            if i not in self.drop:
                out.append(max(0, -(-(b - a) // s)))
        return tuple(out)

    def chunk_ranges(self, chunks: tuple[int, ...]) -> list[tuple[int, int]] | None:
        """Inclusive chunk-index range per dimension, or None if the box is empty."""
        if any(b <= a for a, b in zip(self.start, self.stop, strict=True)):
            return None
        return [(a // c, (b - 1) // c) for a, b, c in zip(self.start, self.stop, chunks, strict=True)]


def parse_window(spec: str | None) -> tuple[Any, ...]:
    """numpy-style text (``0:10,:,5``) -> a tuple of slices and ints."""
    if spec is None or spec.strip() == "":
        return ()
    out: list[Any] = []
    for part in spec.split(","):
        p = part.strip()
        try:
            if p == "...":
                out.append(Ellipsis)
            elif ":" in p:
                bits = [int(b) if b.strip() else None for b in p.split(":")]
                if len(bits) > 3:
                    raise ValueError(p)
                out.append(slice(*bits))
            else:
                out.append(int(p))
        except ValueError:
            raise BadInputError(f"--window {spec!r}: cannot read {p!r} (use numpy style, e.g. 0:10,:,5)") from None
    return tuple(out)


def select(key: Any, shape: tuple[int, ...]) -> Selection:
    """Normalise a numpy basic index (ints, slices with step > 0, Ellipsis) against ``shape``."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise BadInputError("an index can only have a single ellipsis ('...')")
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
    if len(key) > len(shape):
        raise BadInputError(f"too many indices: {len(key)} for an array of {len(shape)} dimensions")
    key = key + (slice(None),) * (len(shape) - len(key))
    start, stop, step, drop = [], [], [], []
    for axis, (k, n) in enumerate(zip(key, shape, strict=True)):
        if isinstance(k, (int, np.integer)):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise BadInputError(f"index {int(k)} is out of bounds for axis {axis} with size {n}")
            start.append(i)
            stop.append(i + 1)
            step.append(1)
            drop.append(axis)
        elif isinstance(k, slice):
            if k.step == 0:
                raise BadInputError(f"axis {axis}: a slice step cannot be zero")
            a, b, s = k.indices(n)
            if s <= 0:
                raise BadInputError(f"axis {axis}: only positive steps are supported")
            start.append(a)
            stop.append(max(a, b))
            step.append(s)
        else:
            raise BadInputError(f"axis {axis}: unsupported index {k!r} (use ints and slices)")
    return Selection(tuple(start), tuple(stop), tuple(step), tuple(drop))


def chunk_slices(
    keys: np.ndarray[Any, Any], chunks: tuple[int, ...], shape: tuple[int, ...], sel: Selection
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """For chunk keys (n x ndim): which selected elements each chunk holds, and where they go.

    Returns (src_lo, src_hi, dst_lo, dst_hi), each n x ndim: within the decoded chunk take
    ``src_lo:src_hi:step`` (the selection's step), and put it at ``dst_lo:dst_hi`` of the result
    (the selection's shape before dropped axes). Where a chunk holds no selected element on an
    axis, ``dst_hi <= dst_lo``.
    """
    c = np.asarray(chunks, np.int64)
    origin = keys.astype(np.int64) * c
    return box_slices(origin, np.minimum(c, np.asarray(shape, np.int64) - origin), sel)


def box_slices(
    origin: np.ndarray[Any, Any], size: np.ndarray[Any, Any], sel: Selection
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``chunk_slices`` for chunks given by their element boxes (``origin``, ``size``: n x ndim,
    the size being what each chunk contributes: ``Grid.boxes``), on any grid."""
    a = np.asarray(sel.start, np.int64)
    st = np.asarray(sel.step, np.int64)
    lo = np.maximum(origin, a)
    hi = np.minimum(origin + size, np.asarray(sel.stop, np.int64))
    j0 = -((a - lo) // st)  # ceil((lo - a) / step): first selected index at or after lo
    j1 = -((a - hi) // st)
    return a + st * j0 - origin, hi - origin, j0, np.maximum(j1, j0)


def needed_chunks(sel: Selection, chunks: tuple[int, ...]) -> list[np.ndarray[Any, Any]]:
    """Per axis, the chunk indices that hold at least one selected element (all of the range
    for step 1; fewer for strided selections, which then never fetch chunks they skip)."""
    out = []
    for a, b, s, c in zip(sel.start, sel.stop, sel.step, chunks, strict=True):
        idx = np.arange(a, b, s, dtype=np.int64) // c
        out.append(np.unique(idx))
    return out
