"""Chunk grids of a global array: regular or rectilinear per dimension. Pure.

A regular dimension has chunks of ``size`` elements from 0 (the last one cut by the extent). A
rectilinear dimension lists every chunk's length (they sum to the extent): where sources are
placed at offsets that are not multiples of their chunk size (monthly files of daily data,
chunk 10 along time), the grid along that dimension is the union of the slabs' chunk edges, so
each source chunk is exactly one global chunk. The codec's buffer (``codec_shape``) stays the
source's chunk shape: a chunk shorter than that mid-array (an HDF5 partial last chunk, stored
padded) decodes to the full buffer and readers crop it to its length (``data_size``).

Every reader asks this model (``Grid``); nobody redoes the arithmetic. Rectilinear lengths are
stored run-length encoded as the zarr rectilinear chunk grid extension has them: a list whose
items are a length or ``[length, count]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..scan._types import ArrayMeta
    from .select import Selection

__all__ = ["Grid", "edges_from_json", "edges_to_json", "rle_decode", "rle_encode", "slab_lengths"]


def rle_encode(lengths: Sequence[int]) -> list[Any]:
    """Chunk lengths -> the zarr rectilinear extension's run-length form (``[10, 10, 1]`` ->
    ``[[10, 2], 1]``)."""
    out: list[Any] = []
    for n in lengths:
        n = int(n)
        if out and (out[-1] == n or (isinstance(out[-1], list) and out[-1][0] == n)):
            if isinstance(out[-1], list):
                out[-1][1] += 1
            else:
                out[-1] = [n, 2]
        else:
            out.append(n)
    return out


def rle_decode(items: Sequence[Any]) -> tuple[int, ...]:
    """The inverse of ``rle_encode``."""
    out: list[int] = []
    for it in items:
        if isinstance(it, (list, tuple)):
            out.extend([int(it[0])] * int(it[1]))
        else:
            out.append(int(it))
    return tuple(out)


def slab_lengths(extent: int, chunk: int) -> list[int]:
    """Chunk lengths of one slab of ``extent`` elements on chunks of ``chunk``: full ones, then the
    partial last one."""
    if extent <= 0:
        return []
    n = -(-extent // chunk)
    return [chunk] * (n - 1) + [extent - (n - 1) * chunk]


def edges_to_json(edges: Sequence[Sequence[int] | None]) -> list[Any]:
    """Rectilinear lengths per dimension as array metadata stores them: null (regular) or run-length
    encoded (``[[10, 3], 1]``)."""
    return [None if ls is None else rle_encode(ls) for ls in edges]


def edges_from_json(items: Any) -> tuple[tuple[int, ...] | None, ...]:
    """The inverse of ``edges_to_json`` (None or [] -> ``()``: regular everywhere)."""
    return tuple(None if it is None else rle_decode(it) for it in items or ())


@dataclass(frozen=True, slots=True)
class Grid:
    """The chunk grid of one array (or one era of it). ``shape``: extent per dimension, in
    elements; ``chunks``: the codec's chunk shape (what one stored chunk decodes to); ``lengths``:
    per dimension, None (regular at ``chunks[i]``) or each chunk's length in elements (rectilinear;
    they sum to ``shape[i]``). An empty ``lengths`` means every dimension is regular."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    lengths: tuple[tuple[int, ...] | None, ...] = ()
    _starts: tuple[np.ndarray[Any, Any] | None, ...] = field(init=False, repr=False, compare=False)
    """Per rectilinear dimension, chunk start positions plus the extent (``n + 1`` values)."""

    def __post_init__(self) -> None:
        starts: list[np.ndarray[Any, Any] | None] = []
        for i in range(len(self.shape)):
            ls = self.lengths[i] if i < len(self.lengths) else None
            if ls is None:
                starts.append(None)
                continue
            if sum(ls) != self.shape[i] or any(n <= 0 or n > self.chunks[i] for n in ls):
                raise ValueError(f"dimension {i}: chunk lengths {list(ls)[:8]} do not fit extent {self.shape[i]}")
            starts.append(np.concatenate([[0], np.cumsum(np.asarray(ls, np.int64))]))
        object.__setattr__(self, "_starts", tuple(starts))

    @classmethod
    def of(cls, meta: ArrayMeta) -> Grid:
        """The grid ``meta`` records (its own dimension lengths; eras: use ``meta.era_meta``)."""
        return cls(tuple(int(n) for n in meta.shape), tuple(int(c) for c in meta.chunks), tuple(meta.edges))

    @classmethod
    def of_era(cls, meta: ArrayMeta, era: int | None) -> Grid:
        """The grid of era ``era`` of a global array (its axis counted from the era's start), or
        of the array itself when it has no eras (``era`` ignored)."""
        return cls.of(meta.era_meta(meta.eras[int(era or 0)]) if meta.eras else meta)

    @classmethod
    def whole(cls, meta: ArrayMeta) -> Grid:
        """The grid of a whole global array. With eras, along their axis: the chunks before the
        first era (fill: none stored) on the first era's chunk size, then each era's chunks; the
        codec shape is then the largest chunk of any era."""
        if not meta.eras:
            return cls.of(meta)
        axis = int(meta.eras[0]["axis"])
        first = int(meta.eras[0]["start"])
        lengths: list[int] = slab_lengths(first, int(meta.eras[0]["chunks"][axis]))
        chunks = [int(c) for c in meta.chunks]
        for e in meta.eras:
            lengths += cls.of_era(meta, int(e["index"])).dim_lengths(axis)
            chunks = [max(a, int(b)) for a, b in zip(chunks, e["chunks"], strict=True)]
        edges = tuple(tuple(lengths) if d == axis else None for d in range(len(meta.shape)))
        return cls(tuple(int(n) for n in meta.shape), tuple(chunks), edges)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def regular(self) -> bool:
        return all(ls is None for ls in self.lengths)

    def rectilinear(self, dim: int) -> bool:
        return dim < len(self.lengths) and self.lengths[dim] is not None

    def nchunks(self, dim: int) -> int:
        s = self._starts[dim]
        if s is not None:
            return len(s) - 1
        c = self.chunks[dim]
        return -(-self.shape[dim] // c) if c else 0

    def dim_lengths(self, dim: int) -> tuple[int, ...]:
        """Every chunk's length along ``dim`` (the last regular one cut by the extent)."""
        ls = self.lengths[dim] if dim < len(self.lengths) else None
        return ls if ls is not None else tuple(slab_lengths(self.shape[dim], self.chunks[dim]))

    def index(self, dim: int, pos: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Chunk index holding each element position ``pos`` (int64, inside the extent)."""
        s = self._starts[dim]
        p = np.asarray(pos, np.int64)
        if s is None:
            return p // self.chunks[dim]
        return np.searchsorted(s, p, side="right") - 1

    def index_of(self, dim: int, pos: int) -> int:
        """Chunk index holding element ``pos`` along ``dim``."""
        return int(self.index(dim, np.asarray([pos], np.int64))[0])

    def chunk_ranges(self, sel: Selection) -> list[tuple[int, int]] | None:
        """Inclusive chunk-index range per dimension of the selection's box, None if empty."""
        return self.box_ranges(sel.start, sel.stop)

    def box_ranges(self, lo: Sequence[int], hi: Sequence[int]) -> list[tuple[int, int]] | None:
        """Inclusive chunk-index range per dimension of the element box ``[lo, hi)``."""
        if any(b <= a for a, b in zip(lo, hi, strict=True)):
            return None
        return [(self.index_of(d, a), self.index_of(d, b - 1)) for d, (a, b) in enumerate(zip(lo, hi, strict=True))]

    def needed(self, sel: Selection) -> list[np.ndarray[Any, Any]]:
        """Per dimension, the chunk indices holding at least one selected element."""
        return [
            np.unique(self.index(d, np.arange(a, b, s, dtype=np.int64)))
            for d, (a, b, s) in enumerate(zip(sel.start, sel.stop, sel.step, strict=True))
        ]

    def boxes(self, keys: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """Element boxes of chunks ``keys`` (n x ndim): ``origin`` and ``size`` (n x ndim), the
        size being what the chunk contributes (``data_size``: cut by the extent or by the next
        chunk's start), never more than ``chunks``."""
        k = np.asarray(keys, np.int64).reshape(len(keys), self.ndim)
        origin = np.empty_like(k)
        size = np.empty_like(k)
        for d in range(self.ndim):
            s = self._starts[d]
            if s is None:
                c = self.chunks[d]
                origin[:, d] = k[:, d] * c
                size[:, d] = np.minimum(c, self.shape[d] - origin[:, d])
            else:
                origin[:, d] = s[k[:, d]]
                size[:, d] = s[k[:, d] + 1] - origin[:, d]
        return origin, size

    def describe(self) -> list[dict[str, Any]]:
        """Per dimension ``{"kind": "regular", "chunk": c}`` or ``{"kind": "rectilinear",
        "chunks": [run-length lengths], "count": n}`` (what ``info`` shows)."""
        out: list[dict[str, Any]] = []
        for d in range(self.ndim):
            ls = self.lengths[d] if d < len(self.lengths) else None
            if ls is not None and (len(ls) > 1 and (len(set(ls[:-1])) > 1 or ls[-1] > ls[0])):
                out.append({"kind": "rectilinear", "count": len(ls), "chunks": rle_encode(ls)})
            elif ls is not None:  # a rectilinear dimension that happens to be regular
                out.append({"kind": "regular", "chunk": int(ls[0]) if ls else int(self.chunks[d])})
            else:
                out.append({"kind": "regular", "chunk": int(self.chunks[d])})
        return out
