"""The concatenation plan: where each source's slab sits in each global array. Pure.

Sources are ordered by their coordinate along the concat dimension (or kept in the order given
when none has one; duplicates set aside by ``--prefer`` rules: ``series_order.py``) and placed end
to end. Where a source does not start on a chunk boundary of its era's grid (monthly files of
daily data, chunk 10 along time), that era gets a rectilinear grid along the axis: the union of
its slabs' chunk edges (``grid.py``), so every source chunk is still exactly one global chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import PlanError
from .grid import edges_to_json, slab_lengths
from .series_order import BY_COORDINATE, OrderKey, OrderRule, PreferRule, SetAside, order_sources

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
    order_keys: Mapping[str, OrderKey] = field(default_factory=dict)
    """First and last values of the 1-D arrays along the concat dim other than its coordinate
    (``scan/_series_facts``): what ``--order-by`` and the CF time fallback order by."""
    digests: Mapping[str, str] = field(default_factory=dict)
    """Digests of the arrays taken once (``scan/_series_facts``); absent: not compared."""


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
    from the era's start, in elements."""
    keys: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    """``keys[(location, array)] = (era, base)``: the global chunk key of a source chunk is
    ``k + base`` on its era's grid (``base = offset // chunk`` on a regular grid; on a rectilinear
    one the number of chunks before the slab)."""
    steps: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)
    """``steps[(location, array)]``: key cells one source chunk spans per dimension, where it is
    not 1 (tiles of different layouts: ``plan/slabs.py``); the global key is ``k * step + base``."""
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


def make_plan(
    sources: Sequence[SourceSlab], concat_dim: str | None, *, prefer: Sequence[PreferRule] = (),
    order: OrderRule = BY_COORDINATE,
) -> Plan:
    """Place every source's arrays in the global arrays, or raise PlanError naming the source.
    ``prefer``: rules choosing among sources with the same coordinate; ``order``: how the
    series is ordered (``series_order``)."""
    if concat_dim is not None:
        _check_dim(sources, concat_dim)
    ordering = order_sources(sources, concat_dim, prefer=prefer, order=order)
    ordered = list(ordering.sources)
    plan = Plan(
        concat_dim=concat_dim, order=tuple(s.location for s in ordered), set_aside=ordering.set_aside,
        ordered_by=ordering.by,
    )  # fmt: skip

    starts: dict[str, int] = {}
    total = 0
    leader = dict(ordering.partners)
    if concat_dim is not None:
        for s in ordered:
            if s.location in leader:  # holds other variables of its leader's step: the same place
                starts[s.location] = starts[leader[s.location]]
                continue
            starts[s.location] = total
            total += _dim_extent(s, concat_dim) or 0
    shadowed = _shadowed(ordered, leader)

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
            if along and meta is not m0 and m0.grid() != meta.grid():  # one instance per recorded text
                raise PlanError(
                    f"array '{name}' is on a different grid in {s.location} than in {s0.location} "
                    f"(transform or CRS differ); such sources cannot share one array"
                )
            if along and m0.dims != meta.dims:
                raise PlanError(
                    f"array '{name}' has dimensions {list(meta.dims)} in {s.location} but {list(m0.dims)} in "
                    f"{s0.location}; such sources cannot share one array"
                )
            if not along:
                _check_taken_once(name, (s0, m0), (s, meta), concat_dim)

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
            plan.keys[(s0.location, name)] = (0, (0,) * m0.ndim)
            continue
        assert concat_dim is not None
        axis = m0.dims.index(concat_dim)
        holders = [s for s in ordered if name in s.arrays and (s.location, name) not in shadowed]
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
            if not eras or (eras[-1]["_meta"] is not meta and eras[-1]["_key"] != meta.era_key()):
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
        rect: dict[int, list[int]] = {}  # era index -> chunk lengths along the axis (rectilinear eras)
        for era in eras:
            chunk = int(era["_meta"].chunks[axis])
            slabs = [(starts[s.location] - era["start"], s.arrays[name].shape[axis]) for s in holders
                     if era_of[s.location] == era["index"]]  # fmt: skip
            if chunk and any(r % chunk for r, _ in slabs):
                rect[era["index"]] = _era_lengths(slabs, era["stop"] - era["start"], chunk)
        for s in holders:
            era = eras[era_of[s.location]]
            start = starts[s.location]
            dest = [0] * m0.ndim
            dest[axis] = start
            plan.placements[(s.location, name)] = tuple(dest)
            rel = list(dest)
            rel[axis] = start - era["start"]
            plan.view[(s.location, name)] = (era["index"], tuple(rel))
            base = [0] * m0.ndim
            lengths = rect.get(era["index"])
            chunk = int(era["_meta"].chunks[axis])
            if lengths is not None:
                base[axis] = _chunks_before(lengths, rel[axis])
            elif chunk:
                base[axis] = rel[axis] // chunk
            plan.keys[(s.location, name)] = (era["index"], tuple(base))
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
                    **({"edges": edges_to_json(_axis_edges(m0.ndim, axis, rect[e["index"]]))}
                       if e["index"] in rect else {}),
                }
                for e in eras
            )
        edges = _axis_edges(m0.ndim, axis, rect[0]) if 0 in rect and not described else ()
        plan.arrays[name] = m0.with_shape(tuple(shape), described, holes, axis, edges)
    return plan


def _shadowed(ordered: Sequence[SourceSlab], leader: Mapping[str, str]) -> set[tuple[str, str]]:
    """``(source, array)`` pairs not placed because an earlier source of the same step (a
    leader and its partners, ``series_order._partners``) holds that array: their shared
    coordinate along the concat dimension and its bounds, equal by digest."""
    held: dict[str, set[str]] = {}
    out: set[tuple[str, str]] = set()
    for s in ordered:
        step = leader.get(s.location, s.location)
        seen = held.setdefault(step, set())
        out.update((s.location, n) for n in s.arrays if n in seen)
        seen.update(s.arrays)
    return out


def _check_taken_once(
    name: str, first: tuple[SourceSlab, ArrayMeta], other: tuple[SourceSlab, ArrayMeta], concat_dim: str | None
) -> None:
    """An array held by several sources and taken once (from the first) must be the same in
    each: dimensions, shape and dtype, and values as far as the sources' digests
    (``scan/_series_facts``) tell; refused naming both sources otherwise. Without a concat
    dimension this is how files holding different variables on one grid merge (their shared
    coordinates taken once); an array whose digests are unknown cannot be merged."""
    (s0, m0), (s, meta) = first, other
    where = f"it has no '{concat_dim}' dimension" if concat_dim is not None else "no --concat-dim"
    d0, d = s0.digests.get(name), s.digests.get(name)
    # a source recorded by an older refstore (no digest) may name a dimension otherwise (phony
    # dimensions are now numbered as netCDF-C numbers them): its shape and dtype still must agree
    dims0, dims = (m0.dims, meta.dims) if d0 is not None and d is not None else ((), ())
    if (dims0, m0.shape, m0.dtype) != (dims, meta.shape, meta.dtype):
        raise PlanError(
            f"array '{name}' is taken once ({where}) but differs between {s0.location} (dims {list(m0.dims)}, "
            f"shape {list(m0.shape)}, {m0.dtype}) and {s.location} (dims {list(meta.dims)}, shape "
            f"{list(meta.shape)}, {meta.dtype})" + _concat_hint(concat_dim)
        )
    if d0 is not None and d is not None and d0[:2] == d[:2]:
        if d0 == d:
            return
        what = "values" if d.startswith("v:") else "stored chunks"
        raise PlanError(
            f"array '{name}' is taken once ({where}) but its {what} differ between {s0.location} and "
            f"{s.location}; one array cannot hold both" + _concat_hint(concat_dim)
        )
    if concat_dim is None:
        raise PlanError(
            f"array '{name}' is in both {s0.location} and {s.location} and refstore cannot compare them "
            "(recorded without a digest: rescan them)" + _concat_hint(concat_dim)
        )


def _concat_hint(concat_dim: str | None) -> str:
    return "; scan with --concat-dim DIM to place such sources along a dimension" if concat_dim is None else ""


def _era_lengths(slabs: list[tuple[int, int]], extent: int, chunk: int) -> list[int]:
    """Chunk lengths along the axis of a rectilinear era: the union of its slabs' chunk edges
    (``slabs``: ``(offset from the era start, extent)`` in order); stretches no slab holds are
    cut into chunks of ``chunk`` from their start (absent chunks: fill)."""
    out: list[int] = []
    pos = 0
    for r, n in slabs:
        out += slab_lengths(r - pos, chunk)
        out += slab_lengths(n, chunk)
        pos = r + n
    return out + slab_lengths(extent - pos, chunk)


def _chunks_before(lengths: list[int], offset: int) -> int:
    """How many chunks of ``lengths`` end at or before element ``offset`` (a chunk start)."""
    at = 0
    for i, n in enumerate(lengths):
        if at >= offset:
            return i
        at += n
    return len(lengths)


def _axis_edges(ndim: int, axis: int, lengths: list[int]) -> tuple[tuple[int, ...] | None, ...]:
    return tuple(tuple(lengths) if d == axis else None for d in range(ndim))


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
