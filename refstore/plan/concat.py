"""The concatenation plan: where each source's slab sits in each global array. Pure.

Sources are ordered by their coordinate along the concat dimension (or kept in the order given
when none has one; duplicates set aside by ``--prefer`` rules: ``series_order.py``) and placed end
to end. A placement must fall on chunk boundaries of every
array along that dimension, or the plan is refused: a wrong store is never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import PlanError
from .series_order import PreferRule, SetAside, order_sources

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..scan._types import ArrayMeta

__all__ = ["Plan", "PreferRule", "SetAside", "SourceSlab", "make_plan"]


@dataclass(frozen=True, slots=True)
class SourceSlab:
    """One source as the plan sees it. ``order``: position given by the user (ties, fallbacks)."""

    location: str
    order: int
    arrays: Mapping[str, ArrayMeta]
    sort_value: float | None = None
    sort_units: str | None = None
    sort_last: float | None = None
    """Last coordinate value along the concat dim (same units as ``sort_value``); None: unknown."""
    mtime_ns: int = -1
    """Modification time (ns since the epoch, -1 unknown): what ``--prefer newest`` compares."""


@dataclass(frozen=True, slots=True)
class Plan:
    """``order``: locations in placement order. ``arrays``: global array metadata (with eras when
    codecs, chunks or encoding attributes change along the concat dimension, or when the first
    source holding an array is not on a chunk boundary of its grid; with the holes no source holds).
    ``placements[(location, array)]``: offset of the source's slab in the global array, in
    elements per dimension; pairs absent from the mapping are not in the view."""

    concat_dim: str | None
    order: tuple[str, ...]
    arrays: dict[str, ArrayMeta] = field(default_factory=dict)
    placements: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)
    view: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    """``view[(location, array)] = (era, offset)``: the era the slab belongs to and its offset
    from the era's start, in elements: the global key is ``k + offset // chunk`` on the era's grid."""
    set_aside: tuple[SetAside, ...] = ()
    """Sources not placed because another with the same coordinate was preferred."""
    ordered_by: str | None = None
    """``"coordinate"``, ``"given"`` (no source has a coordinate along the concat dim) or None."""


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


def _check_dim(sources: Sequence[SourceSlab], concat_dim: str) -> None:
    """The concat dimension must be a dimension of some array in some source."""
    if not sources or any(concat_dim in m.dims for s in sources for m in s.arrays.values()):
        return
    dims = sorted({d for s in sources for m in s.arrays.values() for d in m.dims})
    s0 = min(sources, key=lambda s: s.order)
    more = f" or the {len(sources) - 1} other sources" if len(sources) > 1 else ""
    raise PlanError(
        f"--concat-dim {concat_dim}: no array in {s0.location}{more} has a dimension '{concat_dim}' "
        f"(dimensions there: {', '.join(dims) or 'none'})"
    )


def make_plan(sources: Sequence[SourceSlab], concat_dim: str | None, *, prefer: Sequence[PreferRule] = ()) -> Plan:
    """Place every source's arrays in the global arrays, or raise PlanError naming the source.
    ``prefer``: rules choosing among sources with the same coordinate (``series_order``)."""
    if concat_dim is not None:
        _check_dim(sources, concat_dim)
    ordering = order_sources(sources, concat_dim, prefer=prefer)
    ordered = list(ordering.sources)
    plan = Plan(
        concat_dim=concat_dim, order=tuple(s.location for s in ordered), set_aside=ordering.set_aside,
        ordered_by=ordering.by,
    )  # fmt: skip

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
            if along and m0.dims != meta.dims:
                raise PlanError(
                    f"array '{name}' has dimensions {list(meta.dims)} in {s.location} but {list(m0.dims)} in "
                    f"{s0.location}; such sources cannot share one array"
                )
            if concat_dim is None:
                raise PlanError(
                    f"array '{name}' is in both {s0.location} and {s.location}; scan with --concat-dim DIM to "
                    "combine sources into one array (without it, each array must come from one source)"
                )
            if not along and (m0.shape != meta.shape or m0.dtype != meta.dtype):
                raise PlanError(
                    f"array '{name}' is taken once (it has no '{concat_dim}' dimension) but differs between "
                    f"{s0.location} (shape {list(m0.shape)}, {m0.dtype}) and {s.location} "
                    f"(shape {list(meta.shape)}, {meta.dtype})"
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
            plan.view[(s0.location, name)] = (0, (0,) * m0.ndim)
            continue
        assert concat_dim is not None
        axis = m0.dims.index(concat_dim)
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
        # eras: runs of holders whose codecs, chunks, dtype, fill and packing attributes agree
        eras: list[dict[str, Any]] = []
        era_of: dict[str, int] = {}
        for s in holders:
            meta = s.arrays[name]
            if not eras or eras[-1]["_key"] != meta.era_key():
                eras.append({"_key": meta.era_key(), "_meta": meta, "index": len(eras), "axis": axis,
                             "start": starts[s.location], "first_source": s.location})  # fmt: skip
            eras[-1]["last_source"] = s.location
            era_of[s.location] = len(eras) - 1
        first_chunk = eras[0]["_meta"].chunks[axis]
        if first_chunk and eras[0]["start"] % first_chunk == 0:
            eras[0]["start"] = 0  # sources before the first holder: absent chunks of its grid
        for k, era in enumerate(eras):
            era["stop"] = eras[k + 1]["start"] if k + 1 < len(eras) else total
        holes = _holes([(starts[s.location], s.arrays[name].shape[axis]) for s in holders], total)
        prev_loc: str | None = None
        for s in ordered:
            if name in s.arrays:
                era = eras[era_of[s.location]]
                chunk = era["_meta"].chunks[axis]
                start = starts[s.location]
                if (start - era["start"]) % chunk != 0:
                    assert prev_loc is not None
                    raise PlanError(
                        f"{prev_loc}: {_dim_extent(next(x for x in ordered if x.location == prev_loc), concat_dim)} "
                        f"elements along '{concat_dim}' is not a multiple of the chunk size {chunk} of array "
                        f"'{name}'; placing the next source would not be chunk-aligned"
                    )
                dest = [0] * m0.ndim
                dest[axis] = start
                plan.placements[(s.location, name)] = tuple(dest)
                rel = list(dest)
                rel[axis] = start - era["start"]
                plan.view[(s.location, name)] = (era["index"], tuple(rel))
            prev_loc = s.location
        shape = list(m0.shape)
        shape[axis] = total
        described: tuple[dict[str, Any], ...] = ()
        if len(eras) > 1 or eras[0]["start"] > 0:  # one era from 0 is the array's own grid
            described = tuple(
                {
                    "index": e["index"],
                    "axis": axis,
                    "start": e["start"],
                    "stop": e["stop"],
                    "first_source": e["first_source"],
                    "last_source": e["last_source"],
                    "dtype": e["_meta"].dtype,
                    "chunks": list(e["_meta"].chunks),
                    "codecs": list(e["_meta"].codecs),
                    "fill_value": e["_meta"].fill_value,
                    "attrs": e["_meta"].attrs,
                }
                for e in eras
            )
        plan.arrays[name] = m0.with_shape(tuple(shape), described, holes, axis)
    return plan


def _holes(slabs: list[tuple[int, int]], total: int) -> tuple[tuple[int, int], ...]:
    """``[start, stop)`` ranges of ``[0, total)`` that no ``(start, extent)`` slab covers."""
    out: list[tuple[int, int]] = []
    at = 0
    for start, extent in sorted(slabs):
        if start > at:
            out.append((at, start))
        at = max(at, start + extent)
    if at < total:
        out.append((at, total))
    return tuple(out)
