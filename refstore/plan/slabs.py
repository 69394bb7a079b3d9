"""Arrays no chunk grid expresses: every chunk placed by its source's slab. Pure.

When tiles sit at arbitrary offsets (a brick layout: a row shifted by half a tile), a tile's
chunk can straddle another tile's chunk edge, so no global grid (regular or rectilinear) has one
global chunk per source chunk (``placement.complete_grid`` then marks the array ``gridless``).
The table still holds everything a reader needs (``design/schema.md``, "Placements no grid
expresses"): each slab's element offset (the var row's ``d0..``) and extent, and each chunk's
key within its source (``k0..``). A chunk's box is then

    origin = d + k * chunks,   size = min(chunks, extent - k * chunks)   (per dimension)

and its chunk row's global key ``g`` is *coarse*: the cell of the regular grid of ``chunks``
holding the chunk's origin, ``g = k + d // chunks``. A chunk's origin lies in ``[g * c, g * c +
c)`` and its length is at most ``c``, so the chunks touching ``[lo, hi)`` have ``lo // c - 1 <= g
<= (hi - 1) // c``: the same pushdown filter on ``g0..`` (ZONEMAP on ``g0``) as on a grid, one
cell wider, then the exact boxes (``boxes``) drop the few rows that only came with the margin.

Tiles of one mosaic may differ in layout (tiled 256, striped, tiled 128 with another codec):
each slab then has its own chunk shape ``c_s`` (and codecs, which the reader takes from the
slab), and the coarse keys are counted in a ``cell`` dividing every ``c_s`` (their greatest
common divisor): ``g = (d + k * c_s) // cell = k * (c_s / cell) + d // cell``, still the cell
holding the chunk's origin. A chunk is at most ``max c_s`` long, so the chunks touching ``[lo,
hi)`` have ``(lo - max c_s) // cell <= g <= (hi - 1) // cell`` (with one layout: the bounds above).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .select import box_slices

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .select import Selection

__all__ = ["SlabLayout", "coarse_base", "key_cell", "key_steps"]


def coarse_base(offset: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    """The coarse key base of a slab at ``offset`` (elements): ``offset // chunks`` (0 where a
    chunk size is 0)."""
    return tuple(int(o) // int(c) if c else 0 for o, c in zip(offset, chunks, strict=True))


def key_cell(chunk_shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The coarse key cell of slabs of different chunk shapes: per dimension the greatest common
    divisor of their chunk sizes (0 where every size is 0)."""
    return tuple(math.gcd(*(int(c) for c in col)) for col in zip(*chunk_shapes, strict=True))


def key_steps(chunks: Sequence[int], cell: Sequence[int]) -> tuple[int, ...]:
    """How many key cells one chunk of a slab spans per dimension: ``g = k * step + base``."""
    return tuple(int(c) // int(e) if e else 1 for c, e in zip(chunks, cell, strict=True))


@dataclass(frozen=True, slots=True)
class SlabLayout:
    """The placed slabs of one gridless array. ``sources``: locations, sorted; ``offset`` and
    ``extent``: (n, ndim) int64, each slab's element offset in the global array and its shape;
    ``chunks``: the codec's chunk shape (every slab's, unless ``own`` gives each slab's).
    ``own``: (n, ndim) int64, each slab's chunk shape, and ``codecs`` each slab's codecs, when
    the slabs differ in layout (``cell``: the coarse key cell); else None, ``()``, ``()``."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    sources: tuple[str, ...]
    offset: np.ndarray[Any, Any]
    extent: np.ndarray[Any, Any]
    own: np.ndarray[Any, Any] | None = None
    codecs: tuple[tuple[dict[str, Any], ...], ...] = ()
    cell: tuple[int, ...] = ()
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n, nd = len(self.sources), len(self.shape)
        for a in (self.offset, self.extent, *(() if self.own is None else (self.own,))):
            if a.shape != (n, nd):
                raise ValueError(f"slab placements must be ({n}, {nd}), not {a.shape}")
        if list(self.sources) != sorted(self.sources):
            raise ValueError("slab sources must be sorted")
        object.__setattr__(self, "_index", {s: i for i, s in enumerate(self.sources)})

    @classmethod
    def of(cls, shape: Sequence[int], chunks: Sequence[int],
           slabs: Sequence[tuple[str, Sequence[int], Sequence[int]]], *,
           layouts: Sequence[tuple[str, Sequence[int], Sequence[dict[str, Any]]]] = (),
           cell: Sequence[int] = ()) -> SlabLayout:  # fmt: skip
        """From ``(location, offset, extent)`` per slab, in any order; ``layouts``:
        ``(location, chunks, codecs)`` of every slab when they differ (``cell``: the key cell)."""
        nd = len(shape)
        items = sorted(slabs, key=lambda s: s[0])
        own: np.ndarray[Any, Any] | None = None
        codecs: tuple[tuple[dict[str, Any], ...], ...] = ()
        if layouts:
            by = {loc: (c, k) for loc, c, k in layouts}
            own = np.asarray([list(by[s[0]][0]) for s in items], np.int64).reshape(len(items), nd)
            codecs = tuple(tuple(by[s[0]][1]) for s in items)
        return cls(
            tuple(int(s) for s in shape), tuple(int(c) for c in chunks), tuple(s[0] for s in items),
            np.asarray([list(s[1]) for s in items], np.int64).reshape(len(items), nd),
            np.asarray([list(s[2]) for s in items], np.int64).reshape(len(items), nd),
            own, codecs, tuple(int(c) for c in cell) if layouts else (),
        )  # fmt: skip

    def chunks_of(self, slab: int) -> tuple[int, ...]:
        """The chunk shape of slab ``slab`` (its own when the slabs differ in layout)."""
        return self.chunks if self.own is None else tuple(int(c) for c in self.own[slab])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def key_ranges(self, lo: Sequence[int], hi: Sequence[int]) -> list[tuple[int, int]] | None:
        """Inclusive coarse key range per dimension of the chunk rows that may touch the element
        box ``[lo, hi)`` (None if it is empty): one cell wider than the box's own cells."""
        if any(b <= a for a, b in zip(lo, hi, strict=True)):
            return None
        cell = [max(1, x) for x in (self.cell or self.chunks)]
        longest = self.chunks if self.own is None or not len(self.own) else self.own.max(axis=0).tolist()
        return [(max(0, (a - max(1, int(m))) // n), (b - 1) // n)
                for a, b, n, m in zip(lo, hi, cell, longest, strict=True)]  # fmt: skip

    def slab_of(self, sources: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, Any]:
        """Index of each row's slab (int64; -1 for a source with no placement), without a Python
        string per row (the column is dictionary-encoded first)."""
        col = sources.combine_chunks() if isinstance(sources, pa.ChunkedArray) else sources
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        lookup = np.asarray([self._index.get(str(s), -1) for s in col.dictionary.to_pylist()], np.int64)
        idx = col.indices.to_numpy(zero_copy_only=False)
        return lookup[idx] if len(lookup) else np.zeros(len(idx), np.int64)

    def boxes(
        self, slab: np.ndarray[Any, Any], k: np.ndarray[Any, Any]
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """Element boxes of chunks ``k`` (n x ndim, keys within their sources) of slabs ``slab``
        (n): ``origin`` and ``size`` (what the chunk contributes: cut by its slab's extent)."""
        k = np.asarray(k, np.int64).reshape(len(slab), self.ndim)
        if (np.asarray(slab) < 0).any():
            raise ValueError("a chunk row of a source with no placement")
        c = np.asarray(self.chunks, np.int64) if self.own is None else self.own[slab]
        within = k * c
        origin = self.offset[slab] + within
        size = np.minimum(c, self.extent[slab] - within)
        return origin, size

    def rows_boxes(self, rows: pa.Table) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``boxes`` of chunk rows with ``source`` and ``k0..k{ndim-1}`` columns."""
        k = np.column_stack([rows.column(f"k{i}").to_numpy().astype(np.int64) for i in range(self.ndim)]) \
            if self.ndim else np.zeros((rows.num_rows, 0), np.int64)
        return self.boxes(self.slab_of(rows.column("source")), k)

    @staticmethod
    def touching(origin: np.ndarray[Any, Any], size: np.ndarray[Any, Any], sel: Selection) -> np.ndarray[Any, Any]:
        """Which chunks hold at least one element the selection takes (steps included)."""
        _, _, d_lo, d_hi = box_slices(origin, size, sel)
        return np.all(d_hi > d_lo, axis=1) if origin.shape[1] else np.ones(len(origin), bool)
