"""A per-version chunk index: the chunk rows of one array (one era) held in memory, columnar,
sorted by their flat global key, so that a box of chunk keys is found with a binary search
instead of a Lance pushdown query (~30-70 ms at 1M rows, whatever the box; ``design/scale.md``).

A ``Snapshot`` is one immutable version, so an index built from it never goes stale. It is
built on the second query of an array by the same snapshot (a one-off read keeps the pushdown)
and only for arrays whose chunk grid has at most ``MAX_ROWS`` cells (memory: ~30 bytes a row;
larger arrays rely on Lance's scalar indices).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["INDEXED_COLUMNS", "MAX_ROWS", "ChunkIndex", "IndexCache"]

MAX_ROWS = 4_000_000
"""Largest chunk grid (cells) an index is built for."""

INDEXED_COLUMNS = ("source", "offset", "length", "filter_mask", "inline", "held_at")
"""The columns an index holds (those the readers ask for), besides the key and ``_rowid``."""


class ChunkIndex:
    """Chunk rows of one array (one era), sorted by flat key over the grid the rows span."""

    def __init__(self, table: pa.Table, ndim: int) -> None:
        self.ndim = ndim
        keys = [table.column(GLOBAL_KEY_COLUMNS[i]).to_numpy().astype(np.int64) for i in range(ndim)]
        self.extent = tuple(int(k.max()) + 1 if len(k) else 0 for k in keys)
        flat = (
            np.ravel_multi_index(keys, self.extent) if ndim and table.num_rows else np.zeros(table.num_rows, np.int64)
        )
        order = np.argsort(flat, kind="stable")
        self.flat = np.asarray(flat, np.int64)[order]
        t = table.take(pa.array(order))
        # one location string per row would cost ~60 bytes a row: keep them dictionary-encoded
        src = t.column("source").combine_chunks()
        self._source_field = t.schema.field("source")
        self.table = t.set_column(t.schema.get_field_index("source"), "source", pc.dictionary_encode(src))
        self.nbytes = int(self.table.nbytes + self.flat.nbytes)

    def positions(self, ranges: Sequence[tuple[int, int]] | None) -> np.ndarray[Any, Any]:
        """Row positions (ascending) whose key lies in the inclusive ``ranges`` per axis (the
        leading axes; axes past them are not constrained)."""
        n = len(self.flat)
        if ranges is None or not self.ndim or n == 0:
            return np.arange(n)
        # ranges on the leading axes only (as ``Snapshot.view_filter`` takes them): the rest whole
        ranges = [*ranges, *[(0, e - 1) for e in self.extent[len(ranges) :]]]
        lo = [max(int(a), 0) for a, _ in ranges]
        hi = [min(int(b), e - 1) for (_, b), e in zip(ranges, self.extent, strict=True)]
        if any(b < a for a, b in zip(lo, hi, strict=True)):
            return np.zeros(0, np.int64)
        cells = math.prod(b - a + 1 for a, b in zip(lo, hi, strict=True))
        if cells <= 4 * n:  # enumerate the box's flat keys (ascending), find them
            axes = np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(lo, hi, strict=True)], indexing="ij")
            want = np.ravel_multi_index([x.ravel() for x in axes], self.extent)
            at = np.searchsorted(self.flat, want)
            hit = at < n
            hit[hit] = self.flat[at[hit]] == want[hit]
            return at[hit]
        keep = np.ones(n, bool)  # a box larger than the index: test each row
        keys = np.unravel_index(self.flat, self.extent)
        for k, a, b in zip(keys, lo, hi, strict=True):
            keep &= (k >= a) & (k <= b)
        return np.flatnonzero(keep)

    def rows(self, ranges: Sequence[tuple[int, int]] | None, columns: Sequence[str], *, with_row_id: bool) -> pa.Table:
        """The rows in ``ranges``: key columns, ``columns``, then ``_rowid`` (as a pushdown gives them)."""
        t = self.table.take(pa.array(self.positions(ranges)))
        names = [*GLOBAL_KEY_COLUMNS[: self.ndim], *columns, *(["_rowid"] if with_row_id else [])]
        out = t.select(names)
        if "source" in columns:
            i = out.schema.get_field_index("source")
            out = out.set_column(i, self._source_field, out.column("source").combine_chunks().dictionary_decode())
        return out


class IndexCache:
    """The indices of one snapshot, built on the second query of an array (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked: dict[tuple[str, int | None], int] = {}
        self._built: dict[tuple[str, int | None], ChunkIndex | None] = {}

    def get(
        self, array: str, era: int | None, cells: int, ndim: int, load: Callable[[], pa.Table]
    ) -> ChunkIndex | None:
        """The index of ``array`` (``era``), or None when the caller should query Lance."""
        key = (array, era)
        with self._lock:
            if key in self._built:
                return self._built[key]
            self._asked[key] = self._asked.get(key, 0) + 1
            if self._asked[key] < 2 or cells > MAX_ROWS:
                return None
            index = ChunkIndex(load(), ndim)
            self._built[key] = index
            return index
