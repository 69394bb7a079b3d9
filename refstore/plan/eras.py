"""Era windows: which part of a selection falls in which era of a global array, and which
positions along the concat axis no source holds. Pure; the one place this arithmetic lives
(the direct reader, the xarray backend, the zarr store, ``verify`` and ``hold`` ask it).

An era is ``[start, stop)`` along the concat axis (elements) with its own chunk grid starting
at ``start``; eras are consecutive and the last one ends at the array's end. Before the first
era (when the first source holding the array does not start on a chunk boundary of its grid)
the array reads as fill. Holes are the ranges no source holds (sources that lack the array);
inside an era they are absent chunks, so raw reads give the fill value there too, but a reader
that decodes like ``xr.concat`` over the files gives them as missing (NaN).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .select import Selection

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..scan._types import ArrayMeta

__all__ = ["EraLayout", "Part", "axis_positions"]


def axis_positions(start: int, stop: int, step: int, lo: int, hi: int) -> tuple[int, int]:
    """Result positions ``[j0, j1)`` of the selected indices ``start, start+step, ... < stop``
    that fall in ``[lo, hi)`` (``j1 <= j0``: none)."""
    j0 = -((start - max(start, lo)) // step)
    j1 = -((start - min(stop, hi)) // step)
    return j0, max(j0, j1)


@dataclass(frozen=True, slots=True)
class Part:
    """The piece of a selection inside one era (``era``: its index; None: before the first era,
    which reads as fill). ``out``: its positions along the axis in the selection's result (no
    axis dropped). ``local``: the piece's box with the axis counted from the era's start."""

    era: int | None
    out: slice
    local: Selection


@dataclass(frozen=True, slots=True)
class EraLayout:
    """Eras and holes of one global array along its concat ``axis``. ``bounds``: ``[start, stop)``
    of each era, in elements (an array without recorded eras is one era: its own grid from 0);
    ``chunks``: each era's chunk shape; ``holes``: ``[start, stop)`` ranges no source holds."""

    axis: int
    extent: int
    bounds: tuple[tuple[int, int], ...]
    chunks: tuple[tuple[int, ...], ...]
    holes: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, meta: ArrayMeta) -> EraLayout | None:
        """The layout recorded for ``meta`` (None: no eras and no holes)."""
        if not meta.eras and not meta.holes:
            return None
        axis = int(meta.eras[0]["axis"]) if meta.eras else int(meta.holes_axis)
        return cls(
            axis=axis,
            extent=int(meta.shape[axis]),
            bounds=tuple((int(e["start"]), int(e["stop"])) for e in meta.eras) or ((0, int(meta.shape[axis])),),
            chunks=tuple(tuple(int(c) for c in e["chunks"]) for e in meta.eras) or (tuple(meta.chunks),),
            holes=tuple((int(a), int(b)) for a, b in meta.holes),
        )

    def parts(self, sel: Selection) -> tuple[Part, ...]:
        """``sel`` (steps kept, ``drop`` ignored) cut at era boundaries; only non-empty parts."""
        ax = self.axis
        a, b, step = sel.start[ax], sel.stop[ax], sel.step[ax]
        segments: list[tuple[int | None, int, int]] = []
        first = self.bounds[0][0]
        if first > 0:
            segments.append((None, 0, first))
        segments += [(i, lo, hi) for i, (lo, hi) in enumerate(self.bounds)]
        out: list[Part] = []
        for era, lo, hi in segments:
            j0, j1 = axis_positions(a, b, step, lo, hi)
            if j1 <= j0:
                continue
            origin = lo if era is not None else 0
            start, stop = list(sel.start), list(sel.stop)
            start[ax], stop[ax] = a + step * j0 - origin, min(b, hi) - origin
            out.append(Part(era, slice(j0, j1), Selection(tuple(start), tuple(stop), sel.step, ())))
        return tuple(out)

    def hole_positions(self, sel: Selection) -> tuple[slice, ...]:
        """Positions along the axis, in the selection's result, that no source holds: before the
        first era and in every hole."""
        ax = self.axis
        a, b, step = sel.start[ax], sel.stop[ax], sel.step[ax]
        ranges = list(self.holes)
        if self.bounds[0][0] > 0:
            ranges.append((0, self.bounds[0][0]))
        out = []
        for lo, hi in sorted(set(ranges)):
            j0, j1 = axis_positions(a, b, step, lo, hi)
            if j1 > j0:
                out.append(slice(j0, j1))
        return tuple(out)

    def chunk_box(self, era: int, key: Sequence[int], shape: Sequence[int]) -> tuple[list[int], list[int]]:
        """Global element box ``[lo, hi)`` of chunk ``key`` (on the grid of ``era``)."""
        lo_e, hi_e = self.bounds[era]
        chunks = self.chunks[era]
        lo = [int(k) * c for k, c in zip(key, chunks, strict=True)]
        limit = list(shape)
        lo[self.axis] += lo_e
        limit[self.axis] = hi_e
        return lo, [min(x + c, n) for x, c, n in zip(lo, chunks, limit, strict=True)]

    def local_boxes(self, lo: Sequence[int], hi: Sequence[int]) -> list[tuple[int, list[int], list[int]]]:
        """A global element box ``[lo, hi)`` cut into ``(era, lo, hi)`` in each era's own
        coordinates (the part before the first era, which holds no chunk, is left out)."""
        out = []
        for i, (e_lo, e_hi) in enumerate(self.bounds):
            a, b = max(lo[self.axis], e_lo), min(hi[self.axis], e_hi)
            if a >= b:
                continue
            l2, h2 = list(lo), list(hi)
            l2[self.axis], h2[self.axis] = a - e_lo, b - e_lo
            out.append((i, l2, h2))
        return out
