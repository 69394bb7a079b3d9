"""The plan of sources appended after the end of a series, from the recorded end alone. Pure.

``make_plan`` orders and places every source of a series: O(sources) work per commit, which at
4,360 daily files is most of a one-day upsert (``design/scale.md``). When every new source sorts
after every recorded one along the concat dimension and continues the last era of each array on
its grid, nothing recorded moves: the new sources' slabs go end to end after the recorded total,
and the global arrays only grow (their shape, and the last era's ``stop``/``last_source``).
``extend_plan`` computes exactly that from the global arrays, the last placed source's arrays and
the new sources, or returns None whenever ``make_plan`` could decide anything else (an overlap or
duplicate, a new era or variable, a hole, an unsupported array, another order): the caller
then plans the whole series. A rectilinear last era (slabs off the chunk grid along the axis)
grows by the new slabs' chunk lengths. Equal to ``make_plan``'s entries for the new sources and
its arrays (``tests/test_append_plan.py`` compares the tables both ways commit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .concat import Plan, SourceSlab
from .grid import edges_from_json, edges_to_json, slab_lengths
from .series_order import span

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..scan._types import ArrayMeta

__all__ = ["SeriesEnd", "extend_plan"]


@dataclass(frozen=True, slots=True)
class SeriesEnd:
    """What the recorded series ends with. ``last``: the last placed source (its location, sort
    value, units and last coordinate value, its arrays as recorded); ``arrays``: the global
    arrays (``Plan.arrays`` of the recorded version)."""

    arrays: Mapping[str, ArrayMeta]
    last: SourceSlab


def extend_plan(end: SeriesEnd, new: Sequence[SourceSlab], concat_dim: str) -> Plan | None:
    """The plan of ``new`` sources placed after ``end`` (``Plan.arrays`` for every array; the
    placements, views and keys of the new sources only), or None where the whole series must be
    planned. ``order``, ``set_aside`` and ``ordered_by`` are the new sources' alone."""
    last = end.last
    if last.sort_value is None or not new:
        return None
    ordered = sorted(new, key=lambda s: (s.sort_value if s.sort_value is not None else 0.0, s.order))
    reach = span(last, concat_dim)[1]
    for s in ordered:
        if s.sort_value is None or s.sort_units != last.sort_units:
            return None
        lo, hi = span(s, concat_dim)
        if lo <= reach:  # a duplicate or an overlap: the series order decides (or refuses)
            return None
        reach = hi
    along = {n: g for n, g in end.arrays.items() if concat_dim in g.dims}
    if not along or any(g.status != "ok" or g.gridless for g in end.arrays.values()):
        return None
    totals = {g.shape[g.dims.index(concat_dim)] for g in along.values()}
    if len(totals) != 1:
        return None
    total = totals.pop()
    lengths: dict[str, list[int] | None] = {}  # the last era's chunk lengths along the axis (None: regular)
    for name, g in along.items():
        axis = g.dims.index(concat_dim)
        if name not in last.arrays or (g.holes and (g.holes[-1][1] >= total or (not g.eras and g.holes[0][0] == 0))):
            return None  # a hole at the end grows; one at the start may need re-keying (upsert._recorded_origins)
        if g.eras and int(g.eras[-1]["stop"]) != total:
            return None
        edges = edges_from_json(g.eras[-1].get("edges")) if g.eras else g.edges
        if any(e is not None for d, e in enumerate(edges) if d != axis):
            return None
        axis_lengths = edges[axis] if edges else None
        lengths[name] = list(axis_lengths) if axis_lengths is not None else None
    plan = Plan(concat_dim=concat_dim, order=tuple(s.location for s in ordered), arrays=dict(end.arrays),
                ordered_by="coordinate")  # fmt: skip
    start = total
    for s in ordered:
        extent = _extent(s, concat_dim)
        if extent is None or set(along) - set(s.arrays):
            return None
        for name, meta in s.arrays.items():
            known = end.arrays.get(name)
            if known is None or meta.status != "ok":
                return None  # a new array, or an unsupported one: make_plan's rules decide
            g = known
            if name not in along:
                if (concat_dim in meta.dims or meta.shape != g.shape or meta.dtype != g.dtype
                        or s.digests.get(name) != last.digests.get(name)):  # fmt: skip
                    return None  # taken once; make_plan refuses one that differs
                continue
            axis = g.dims.index(concat_dim)
            prev = last.arrays[name]
            if meta.dims != g.dims or (meta is not g and meta.grid() != g.grid()):
                return None
            if tuple(n for i, n in enumerate(meta.shape) if i != axis) != tuple(
                n for i, n in enumerate(g.shape) if i != axis
            ):
                return None
            if meta is not prev and meta.era_key() != prev.era_key():
                return None  # a new era
            era = len(g.eras) - 1 if g.eras else 0
            rel = start - (int(g.eras[-1]["start"]) if g.eras else 0)
            chunk = int(g.eras[-1]["chunks"][axis]) if g.eras else int(g.chunks[axis])
            base = [0] * g.ndim
            ls = lengths[name]
            if ls is None and chunk and rel % chunk:  # off the era's grid: it becomes rectilinear
                era_start = start - rel
                if any(b > era_start for _, b in g.holes):
                    return None  # a slab before a hole may end off the grid: make_plan cuts its chunks there
                ls = lengths[name] = slab_lengths(rel, chunk)  # no hole in the era: every chunk before is whole
            if ls is not None:
                if sum(ls) != rel:
                    return None
                base[axis] = len(ls)
                ls += slab_lengths(extent, chunk)
            elif chunk:
                base[axis] = rel // chunk
            dest = [0] * g.ndim
            dest[axis] = start
            offset = [0] * g.ndim
            offset[axis] = rel
            plan.placements[(s.location, name)] = tuple(dest)
            plan.view[(s.location, name)] = (era, tuple(offset))
            plan.keys[(s.location, name)] = (era, tuple(base))
        start += extent
    for name, g in along.items():
        axis = g.dims.index(concat_dim)
        shape = list(g.shape)
        shape[axis] = start
        ls = lengths[name]
        axis_edges = tuple(tuple(ls) if d == axis else None for d in range(g.ndim)) if ls is not None else ()
        eras = tuple(g.eras)
        if eras:
            last_era = {**eras[-1], "stop": start, "last_source": ordered[-1].location}
            if axis_edges:
                last_era["edges"] = edges_to_json(axis_edges)
            plan.arrays[name] = g.with_shape(tuple(shape), (*eras[:-1], last_era), g.holes, axis, g.edges)
        else:
            plan.arrays[name] = g.with_shape(tuple(shape), (), g.holes, axis, axis_edges)
    return plan


def _extent(s: SourceSlab, dim: str) -> int | None:
    """The source's size along ``dim``: every array having it must agree (None: they do not, or
    none has it)."""
    sizes = {m.shape[m.dims.index(dim)] for m in s.arrays.values() if dim in m.dims}
    return sizes.pop() if len(sizes) == 1 else None
