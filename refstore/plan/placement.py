"""Chunk grids for slabs placed anywhere in N dimensions (mosaics). Pure.

``make_plan`` keys the slabs of a concatenation itself (``Plan.keys``). A plan built elsewhere
(``plan/mosaic.py``: tiles at element offsets in ``(row, col)`` or ``(date, row, col)``) gives
only placements; ``complete_grid`` then chooses each array's global grid and keys:

- per dimension, when every slab starts on a multiple of the chunk size and ends on one (or at
  the array's end), the grid stays regular and ``base = offset // chunk``;
- otherwise that dimension is rectilinear: its chunk edges are the union of every slab's chunk
  edges (stretches no slab covers are cut into chunks of the chunk size from their start), and a
  slab's ``base`` is the number of chunks before its offset;
- this keeps one global chunk per source chunk only when no edge of another slab falls inside
  a slab's chunk (tiles in rows and columns that line up). When one does (tiles at arbitrary
  2-D offsets: a brick layout), no grid expresses the placement: the array is marked
  ``gridless``, each slab keyed by its coarse base ``offset // chunk`` (``slabs.py``), and
  readers place each chunk by its slab (``design/schema.md``, "Placements no grid expresses").
- tiles of different layouts (``ArrayMeta.cell``: chunk shapes or codecs differ) are gridless
  too, each keeping its own chunks: keys counted in the cell (``Plan.steps``, ``slabs.py``).
"""

from __future__ import annotations

import dataclasses
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from .grid import slab_lengths
from .slabs import coarse_base, key_steps

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .concat import Plan, SourceSlab

__all__ = ["complete_grid", "dimension_edges"]


def dimension_edges(
    slabs: Sequence[tuple[int, int]], extent: int, chunk: int
) -> tuple[tuple[int, ...] | None, list[int]]:
    """One dimension: ``slabs`` as ``(offset, extent)`` in elements. Returns the rectilinear chunk
    lengths (None: the regular grid of ``chunk`` fits every slab: each starts on a chunk boundary
    and ends on one or at the array's end) and each slab's key base."""
    if all(o % chunk == 0 and ((o + n) % chunk == 0 or o + n == extent) for o, n in slabs):
        return None, [o // chunk for o, _ in slabs]
    cuts = {0, extent}
    for o, n in slabs:
        cuts.update(range(o, o + n, chunk))
        cuts.add(o + n)
    # a stretch inside a slab is at most ``chunk`` long (the slab's chunk starts are cuts): one
    # chunk; a stretch no slab covers: chunks of ``chunk`` from its start (absent: fill)
    out: list[int] = []
    for a, b in pairwise(sorted(cuts)):
        out += slab_lengths(b - a, chunk)
    starts = np.concatenate([[0], np.cumsum(out)])
    bases = [int(np.searchsorted(starts, o)) for o, _ in slabs]
    return tuple(out), bases


def _split_chunk(slabs: Sequence[tuple[int, int]], lengths: tuple[int, ...], chunk: int) -> int | None:
    """The first slab one of whose chunks spans more than one chunk of ``lengths``, else None."""
    starts = np.concatenate([[0], np.cumsum(np.asarray(lengths, np.int64))])
    for i, (o, n) in enumerate(slabs):  # per slab only the starts inside it (no set of every start)
        inside = starts[np.searchsorted(starts, o, side="right") : np.searchsorted(starts, o + n, side="left")]
        if ((inside - o) % chunk).any():
            return i
    return None


def complete_grid(plan: Plan, slabs: Sequence[SourceSlab]) -> Plan:
    """``plan`` with a grid and keys for every placed slab that ``Plan.keys`` lacks (in place:
    the plan's dicts are updated and the plan returned). Arrays with eras are keyed by
    ``make_plan`` already and are left alone."""
    metas = {(s.location, name): m for s in slabs for name, m in s.arrays.items()}
    by_array: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for (loc, name), (_era, offset) in plan.view.items():
        if (loc, name) not in plan.keys:
            by_array.setdefault(name, []).append((loc, offset))
    for name, placed in sorted(by_array.items()):
        g = plan.arrays[name]
        if g.status != "ok" or g.eras:
            for loc, offset in placed:
                plan.keys[(loc, name)] = (0, tuple(0 for _ in offset))
            continue
        if g.cell:  # tiles of different layouts: each keeps its own, placed by its slab
            for loc, offset in placed:
                plan.keys[(loc, name)] = (0, coarse_base(offset, g.cell))
                step = key_steps(metas[(loc, name)].chunks, g.cell)
                if any(x != 1 for x in step):
                    plan.steps[(loc, name)] = step
            plan.arrays[name] = dataclasses.replace(g, edges=(), gridless=True)
            continue
        chunks = tuple(int(c) for c in g.chunks)
        bases = [[0] * g.ndim for _ in placed]
        edges: list[tuple[int, ...] | None] = []
        crossing = False
        for d in range(g.ndim):
            dim_slabs = [(int(off[d]), int(metas[(loc, name)].shape[d])) for loc, off in placed]
            if not chunks[d]:
                edges.append(None)
                continue
            lengths, b = dimension_edges(dim_slabs, int(g.shape[d]), chunks[d])
            if lengths is not None and _split_chunk(dim_slabs, lengths, chunks[d]) is not None:
                crossing = True
                break
            edges.append(lengths)
            for i, k in enumerate(b):
                bases[i][d] = k
        if crossing:  # no grid has one global chunk per source chunk: coarse keys (``slabs.py``)
            for loc, offset in placed:
                plan.keys[(loc, name)] = (0, coarse_base(offset, chunks))
            plan.arrays[name] = dataclasses.replace(g, edges=(), gridless=True)
            continue
        for (loc, _), slab_base in zip(placed, bases, strict=True):
            plan.keys[(loc, name)] = (0, tuple(slab_base))
        if any(e is not None for e in edges):
            plan.arrays[name] = dataclasses.replace(g, edges=tuple(edges))
    return plan
