"""The concatenation plan: where each source's slab sits in each global array. Pure.

Sources are ordered by their coordinate along the concat dimension (or kept in the order given
when none has one) and placed end to end. A placement must fall on chunk boundaries of every
array along that dimension, or the plan is refused: a wrong store is never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import PlanError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..scan._types import ArrayMeta

__all__ = ["Plan", "SourceSlab", "make_plan"]


@dataclass(frozen=True, slots=True)
class SourceSlab:
    """One source as the plan sees it. ``order``: position given by the user (ties, fallbacks)."""

    location: str
    order: int
    arrays: Mapping[str, ArrayMeta]
    sort_value: float | None = None
    sort_units: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """``order``: locations in placement order. ``arrays``: global array metadata.
    ``placements[(location, array)]``: offset of the source's slab in the global array, in
    elements per dimension; pairs absent from the mapping are not in the view."""

    concat_dim: str | None
    order: tuple[str, ...]
    arrays: dict[str, ArrayMeta] = field(default_factory=dict)
    placements: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)


def _ordered(sources: Sequence[SourceSlab], concat_dim: str | None) -> list[SourceSlab]:
    by_given = sorted(sources, key=lambda s: s.order)
    if concat_dim is None:
        return by_given
    with_coord = [s for s in by_given if s.sort_value is not None]
    if not with_coord:
        return by_given
    if len(with_coord) != len(by_given):
        lacking = next(s for s in by_given if s.sort_value is None)
        raise PlanError(
            f"{lacking.location}: has no coordinate variable '{concat_dim}' while other sources do; "
            "cannot order it along the concat dimension"
        )
    units = {s.sort_units for s in with_coord}
    if len(units) > 1:
        a = with_coord[0]
        b = next(s for s in with_coord if s.sort_units != a.sort_units)
        raise PlanError(
            f"{b.location}: coordinate '{concat_dim}' has units {b.sort_units!r}, but {a.location} has "
            f"{a.sort_units!r}; they cannot be ordered together"
        )
    return sorted(with_coord, key=lambda s: (s.sort_value, s.order))


def _dim_extent(src: SourceSlab, dim: str) -> int | None:
    """Size of ``dim`` in a source; every array that has it must agree."""
    extent: int | None = None
    holder = ""
    for meta in src.arrays.values():
        if dim in meta.dims:
            n = meta.shape[meta.dims.index(dim)]
            if extent is None:
                extent, holder = n, meta.name
            elif n != extent:
                raise PlanError(
                    f"{src.location}: dimension '{dim}' has size {extent} in '{holder}' but {n} in '{meta.name}'"
                )
    return extent


def make_plan(sources: Sequence[SourceSlab], concat_dim: str | None) -> Plan:
    """Place every source's arrays in the global arrays, or raise PlanError naming the source."""
    ordered = _ordered(sources, concat_dim)
    plan = Plan(concat_dim=concat_dim, order=tuple(s.location for s in ordered))

    starts: dict[str, int] = {}
    total = 0
    if concat_dim is not None:
        for s in ordered:
            starts[s.location] = total
            total += _dim_extent(s, concat_dim) or 0

    first: dict[str, tuple[SourceSlab, ArrayMeta]] = {}
    for s in ordered:
        for name, meta in s.arrays.items():
            if name not in first:
                first[name] = (s, meta)
                continue
            s0, m0 = first[name]
            if m0.status != "ok" or meta.status != "ok":
                continue
            along = concat_dim is not None and concat_dim in meta.dims
            if along and m0.grid() != meta.grid():
                raise PlanError(
                    f"array '{name}' is on a different grid in {s.location} than in {s0.location} "
                    f"(transform or CRS differ); such sources cannot share one array"
                )
            if along and m0.structure() != meta.structure():
                raise PlanError(
                    f"array '{name}' differs between {s0.location} and {s.location} "
                    f"(dtype {m0.dtype} vs {meta.dtype}, chunks {list(m0.chunks)} vs {list(meta.chunks)}, "
                    f"codecs or dimensions); such sources cannot share one array"
                )
            if not along and (m0.shape != meta.shape or m0.dtype != meta.dtype):
                raise PlanError(
                    f"array '{name}' is taken once (it has no '{concat_dim}' dimension) but differs between "
                    f"{s0.location} (shape {list(m0.shape)}, {m0.dtype}) and {s.location} "
                    f"(shape {list(meta.shape)}, {meta.dtype})"
                    if concat_dim is not None
                    else f"array '{name}' is in both {s0.location} and {s.location} with different shape or "
                    f"dtype; scan with --concat-dim to combine them"
                )

    for name, (s0, m0) in first.items():
        unsupported = next(
            (s.arrays[name] for s in ordered if name in s.arrays and s.arrays[name].status != "ok"), None
        )
        if unsupported is not None:
            plan.arrays[name] = unsupported
            continue
        along = concat_dim is not None and concat_dim in m0.dims
        if not along:
            plan.arrays[name] = m0
            plan.placements[(s0.location, name)] = (0,) * m0.ndim
            continue
        assert concat_dim is not None
        axis = m0.dims.index(concat_dim)
        chunk = m0.chunks[axis]
        holders = [s for s in ordered if name in s.arrays]
        for s in holders:
            meta = s.arrays[name]
            other = tuple(n for i, n in enumerate(meta.shape) if i != axis)
            other0 = tuple(n for i, n in enumerate(m0.shape) if i != axis)
            if other != other0:
                raise PlanError(
                    f"array '{name}' has shape {list(meta.shape)} in {s.location} but {list(m0.shape)} in "
                    f"{s0.location}: only '{concat_dim}' may differ"
                )
        for i, s in enumerate(ordered):
            start = starts[s.location]
            if name in s.arrays and start % chunk != 0:
                prev = ordered[i - 1]
                raise PlanError(
                    f"{prev.location}: {_dim_extent(prev, concat_dim)} elements along '{concat_dim}' is not a "
                    f"multiple of the chunk size {chunk} of array '{name}'; placing the next source would "
                    "not be chunk-aligned"
                )
            if name in s.arrays:
                dest = [0] * m0.ndim
                dest[axis] = start
                plan.placements[(s.location, name)] = tuple(dest)
        shape = list(m0.shape)
        shape[axis] = total
        plan.arrays[name] = m0.with_shape(tuple(shape))
    return plan
