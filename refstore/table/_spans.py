"""Which sources hold the chunks of a box along the concat dimension: the Lance query of a box
asked by ``source`` instead of by the array and its concat-axis key.

A box query (``array = X AND g0 BETWEEN .. AND g1 ..``) is answered by Lance's BITMAP(array),
which selects nearly every row of a one-array series (100M row ids at 100M references), ANDed
with the ZONEMAP(g0) zones, then the key columns of every candidate row are read: ~100 ms at 100M
rows for a box of 750 chunks (``design/scale.md``). The var rows already say which source's slab
covers which chunk keys along the concat axis, so the same rows are found by
``source IN (the few sources whose slab meets the box) AND array = X AND <the other axes>``
(BITMAP(source): a few small bitmaps whatever the table's size), and the concat axis's range is
applied to the answer. ``SourceSpans`` is that map for one array, built once per snapshot from
its var rows (a version is immutable, so it never goes stale); ``tests/test_spans.py`` checks the
rows against a brute-force numpy filter of the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..plan.grid import Grid
from ..scan._types import ArrayMeta
from ..schema import DEST_COLUMNS, NOT_PLACED

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MAX_SOURCES", "SourceSpans"]

MAX_SOURCES = 256
"""Most sources a box is asked by; beyond that the array's own filter is used."""


@dataclass(frozen=True, slots=True)
class SourceSpans:
    """The placed slabs of one array along its concat axis ``axis``: per slab its ``source``,
    ``era`` and the inclusive range ``[lo, hi]`` of chunk keys it covers on that era's grid."""

    axis: int
    source: pa.Array
    era: np.ndarray[Any, Any]
    lo: np.ndarray[Any, Any]
    hi: np.ndarray[Any, Any]

    @classmethod
    def of(cls, meta: ArrayMeta, concat_dim: str | None, var: pa.Table) -> SourceSpans | None:
        """From the array's var rows (``source``, ``meta``, ``era``, ``d{axis}``); None where the
        chunk keys do not follow from the placements (no concat axis, a gridless mosaic, an
        unsupported array, or one with holes from the start and no eras: refstore before issue 12
        keyed those from their first holder)."""
        if concat_dim is None or concat_dim not in meta.dims or meta.gridless or meta.status != "ok":
            return None
        if meta.holes and meta.holes[0][0] == 0 and not meta.eras:
            return None
        axis = meta.dims.index(concat_dim)
        d = var.column(DEST_COLUMNS[axis]).to_numpy()
        placed = d != NOT_PLACED
        var = var.filter(pa.array(placed))
        d = d[placed].astype(np.int64)
        texts = pc.dictionary_encode(var.column("meta")).combine_chunks()
        extents = np.array([ArrayMeta.from_json(t).shape[axis] for t in texts.dictionary.to_pylist()], np.int64)
        stop = d + extents[texts.indices.to_numpy()] - 1
        era = var.column("era").to_numpy().astype(np.int64)
        lo = np.zeros(len(d), np.int64)
        hi = np.zeros(len(d), np.int64)
        for e in np.unique(era).tolist():
            grid = Grid.of_era(meta, e)
            start = int(meta.eras[e]["start"]) if meta.eras else 0
            rows = era == e
            lo[rows] = grid.index(axis, d[rows] - start)
            hi[rows] = grid.index(axis, np.maximum(stop[rows], d[rows]) - start)
        return cls(axis, var.column("source").combine_chunks(), era, lo, hi)

    def sources(self, ranges: Sequence[tuple[int, int]], era: int | None) -> list[str] | None:
        """The sources whose slab meets the inclusive key ranges along the axis (of ``era`` when
        given), or None when more than ``MAX_SOURCES`` do."""
        a, b = ranges[self.axis]
        hit = (self.hi >= a) & (self.lo <= b)
        if era is not None:
            hit &= self.era == era
        if int(hit.sum()) > MAX_SOURCES:
            return None
        return sorted(set(self.source.filter(pa.array(hit)).to_pylist()))
