"""Committing a scan: one transaction, one Lance version, whatever the number of sources.

The new state of everything a scan touches (sources, their chunk rows, per-source array rows
with placements, global array rows, the collection row) is computed from the latest version,
then replaces the rows it supersedes in one transaction (``_replace.py``): rows of unchanged
sources are not touched, so a rescan of unchanged files changes nothing and one rewritten file
changes only its rows. Every commit rewrites the collection row, so two racing writers always
conflict; the loser recomputes from the winner's version and tries again.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PlanError
from ..plan.concat import Plan, SourceSlab, make_plan
from ..plan.eras import EraLayout
from ..plan.grid import Grid
from ..plan.mosaic import make_mosaic_plan
from ..plan.placement import complete_grid
from ..plan.series_order import OrderKey, OrderRule, parse_prefer
from ..plan.slabs import coarse_base, key_steps
from ..scan._intern import MetaTexts
from ..scan._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ScanResult, chunk_table
from ..schema import (
    DEST_COLUMNS,
    GLOBAL_KEY_COLUMNS,
    MAX_DIMS,
    NO_DIM,
    NO_OFFSET,
    NOT_PLACED,
    SOURCE_KEY_COLUMNS,
    Kind,
)
from ._commit import commit, head_row, retry_on_conflict
from ._replace import replace_rows
from ._rows import rows, values_equal
from .collection import Collection, Snapshot, sql_str

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["PrewrittenChunks", "ScanReport", "SourcesNoLongerNew", "commit_scan", "diff_counts"]

View = dict[tuple[str, str], tuple[int, tuple[int, ...]]]
"""(source, array) -> (era, chunk-key base of the source's slab on the era's grid): ``Plan.keys``."""
Steps = dict[tuple[str, str], tuple[int, ...]]
"""``Plan.steps``: key cells a source chunk spans per dimension (tiles of different layouts)."""


class PrewrittenChunks(Protocol):
    """Chunk rows of NEW sources written as Lance fragments elsewhere (Dask workers), added to
    the scan's one commit. ``locations``: those sources (their results reach the commit without
    chunk rows). ``fragments(view)``: the fragments holding their rows placed by ``view`` (the
    plan's entries for those sources), and how many rows they hold."""

    locations: frozenset[str]

    def fragments(self, view: View, steps: Steps | None = None) -> tuple[list[Any], int]: ...


class SourcesNoLongerNew(RuntimeError):
    """Raised instead of committing when a concurrent writer recorded some of the prewritten
    sources first: their rows must go through the upsert instead."""


@dataclass(frozen=True, slots=True)
class ScanReport:
    """What one scan call did. ``version``: the version after the call (unchanged if nothing
    was committed)."""

    version: int
    committed: bool
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    failed: tuple[tuple[str, str], ...] = ()
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unsupported: tuple[tuple[str, str, str], ...] = field(default=())
    removed: tuple[str, ...] = ()
    """Sources no longer found under the scanned paths, removed with ``prune``."""
    missing: tuple[str, ...] = ()
    """Sources no longer found under the scanned paths, kept (scan with ``prune`` to remove them)."""
    set_aside: tuple[tuple[str, str, str], ...] = ()
    """(source, source placed instead, deciding ``--prefer`` rule) newly set aside by this scan."""
    ordered_by: str | None = None
    """``"coordinate"``, ``"given"`` (no source has a coordinate along the concat dim) or None."""
    concat_dim: str | None = None
    mosaic: dict[str, Any] | None = None
    """With ``--mosaic``: the mosaic's tiles, shape, transform, CRS, dates, gap pixels and the
    levels left out (``MosaicPlan.summary``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "committed": self.committed,
            "sources": {
                "new": self.new,
                "changed": self.changed,
                "unchanged": self.unchanged,
                "failed": len(self.failed),
            },
            "refs": {"inserted": self.inserted, "updated": self.updated, "deleted": self.deleted},
            "failed": [{"source": s, "reason": r} for s, r in self.failed],
            "unsupported": [{"source": s, "array": a, "reason": r} for s, a, r in self.unsupported],
            "removed": list(self.removed),
            "missing": list(self.missing),
            "set_aside": [{"source": s, "for": k, "rule": r} for s, k, r in self.set_aside],
            "ordered_by": self.ordered_by,
            "concat_dim": self.concat_dim,
            "mosaic": self.mosaic,
        }


# --------------------------------------------------------------------------- diffs
def diff_counts(old: pa.Table, new: pa.Table, keys: Sequence[str], values: Sequence[str]) -> tuple[int, int, int]:
    """(inserted, updated, deleted) going from ``old`` to ``new`` rows, matched on ``keys``."""
    if old.num_rows == 0 or new.num_rows == 0:
        return new.num_rows, 0, old.num_rows
    o = old.select(list(keys)).append_column("__o", pa.array(np.arange(old.num_rows)))
    n = new.select(list(keys)).append_column("__n", pa.array(np.arange(new.num_rows)))
    j = n.join(o, keys=list(keys), join_type="full outer")
    io = j.column("__o")
    inn = j.column("__n")
    inserted = int(pc.sum(pc.is_null(io)).as_py() or 0)
    deleted = int(pc.sum(pc.is_null(inn)).as_py() or 0)
    both = pc.and_(pc.is_valid(io), pc.is_valid(inn))
    jb = j.filter(both)
    oi = jb.column("__o")
    ni = jb.column("__n")
    same = np.ones(jb.num_rows, bool)
    for c in values:
        same &= values_equal(new.column(c).take(ni), old.column(c).take(oi))
    return inserted, int((~same).sum()), deleted


# --------------------------------------------------------------------------- rows
def _global_keys(
    chunks: pa.Table,
    view: Mapping[tuple[str, str], tuple[int, tuple[int, ...]]],
    metas: Mapping[tuple[str, str], ArrayMeta],
    steps: Mapping[tuple[str, str], tuple[int, ...]] | None = None,
) -> dict[str, pa.Array]:
    """g0..g7 and era for chunk rows (columns ``source``, ``array``, ``k0..k7``):
    ``k * step + base`` on the era's grid where the (source, array) is in ``view`` (``Plan.keys``:
    ``(era, base)``; ``steps``: ``Plan.steps``, 1 where absent),
    NOT_PLACED where it is not. Vectorised: Python only loops over (source, array) pairs."""
    n = chunks.num_rows
    if n == 0:
        return {c: pa.array([], pa.int32()) for c in (*GLOBAL_KEY_COLUMNS, "era")}
    src = pc.dictionary_encode(chunks.column("source")).combine_chunks()
    arr = pc.dictionary_encode(chunks.column("array")).combine_chunks()
    s_pos = {v: i for i, v in enumerate(src.dictionary.to_pylist())}
    a_pos = {v: i for i, v in enumerate(arr.dictionary.to_pylist())}
    na = len(a_pos)
    size = len(s_pos) * na
    dest = np.zeros((size, MAX_DIMS), np.int64)
    ndim = np.zeros(size, np.int64)
    placed = np.zeros(size, bool)
    era = np.zeros(size, np.int32)
    step = np.ones((size, MAX_DIMS), np.int64)
    for (loc, name), m in metas.items():
        if loc not in s_pos or name not in a_pos:
            continue
        i = s_pos[loc] * na + a_pos[name]
        ndim[i] = m.ndim
        v = view.get((loc, name))
        if v is not None:
            placed[i] = True
            era[i] = v[0]
            dest[i, : m.ndim] = v[1]
        st = (steps or {}).get((loc, name))
        if st is not None:
            step[i, : m.ndim] = st
    idx = src.indices.to_numpy().astype(np.int64) * na + arr.indices.to_numpy().astype(np.int64)
    row_placed = placed[idx]
    out: dict[str, pa.Array] = {}
    for d, c in enumerate(GLOBAL_KEY_COLUMNS):
        k = chunks.column(SOURCE_KEY_COLUMNS[d]).to_numpy().astype(np.int64)
        g = np.where(ndim[idx] > d, k * step[idx, d] + dest[idx, d], NO_DIM)
        out[c] = pa.array(np.where(row_placed, g, NOT_PLACED).astype(np.int32), pa.int32())
    out["era"] = pa.array(era[idx], pa.int32())
    return out


_COMBINE_ROWS = 1 << 18
"""Chunk rows of a batch up to which they are copied into one Arrow chunk (~25 MB at most)."""


def _with_source(results: Sequence[ScanResult]) -> pa.Table:
    """The chunk tables of scanned sources as one table with a ``source`` column."""
    if not results:
        return CHUNK_BATCH_SCHEMA.empty_table().append_column("source", pa.array([], pa.string()))
    big = chunk_table([r.refs for r in results])  # sources' numpy columns joined: one Arrow table
    if big.num_rows <= _COMBINE_ROWS:  # many small files: one Arrow chunk, so each later call runs once, not per file
        big = big.combine_chunks()
    counts = np.array([r.refs.num_rows for r in results], np.int64)
    locs = pa.array([r.source.location for r in results], pa.string())
    return big.append_column("source", locs.take(pa.array(np.repeat(np.arange(len(results)), counts))))


def _held_of(snap: Snapshot, old: pa.Table) -> dict[str, Any]:
    """Held columns of existing rows that only move (their source did not change): the held
    bytes stay valid, so they are carried over."""
    held_at = old.column("held_at").to_numpy()
    data: list[bytes | None] = [None] * old.num_rows
    idx = np.flatnonzero(held_at >= 0)
    if len(idx):
        blobs = snap.ds.read_blobs("held", ids=old.column("_rowid").take(pa.array(idx)), preserve_order=True)
        for i, (_addr, raw) in zip(idx.tolist(), blobs, strict=True):
            data[i] = raw
    from lance.blob import blob_array

    return {
        "held_at": old.column("held_at"),
        "held_ns": old.column("held_ns"),
        "held_digest": old.column("held_digest"),
        "held": blob_array(data),
    }


def _chunk_rows(chunks: pa.Table, g: dict[str, pa.Array], held: dict[str, Any] | None = None) -> pa.Table:
    n = chunks.num_rows
    inline = chunks.column("inline")
    cols: dict[str, Any] = {
        "array": chunks.column("array"),
        "source": chunks.column("source"),
        **{c: chunks.column(c) for c in SOURCE_KEY_COLUMNS},
        **g,
        "offset": pc.fill_null(chunks.column("offset"), NO_OFFSET),
        "length": pc.if_else(
            pc.is_null(chunks.column("length")),
            pc.cast(pc.binary_length(pc.fill_null(inline, pa.scalar(b"", inline.type))), pa.int64()),
            chunks.column("length"),
        ),
        "filter_mask": pc.fill_null(chunks.column("filter_mask"), 0),
        "inline": pc.fill_null(inline, pa.scalar(b"", pa.large_binary())),
        **(held or {}),
    }
    return rows(Kind.CHUNK, n, **cols)


def _source_rows(results: Sequence[ScanResult], orders: Sequence[int]) -> pa.Table:
    """The source rows of scanned ``results`` (``orders``: each one's place in the series)."""
    return rows(
        Kind.SOURCE,
        len(results),
        source=[r.source.location for r in results],
        size=[r.source.size for r in results],
        mtime_ns=[r.source.mtime_ns for r in results],
        etag=[r.source.etag or "" for r in results],
        sort_value=[math.nan if r.sort_value is None else r.sort_value for r in results],
        meta=[_source_meta(o, r) for o, r in zip(orders, results, strict=True)],
    )


def _source_meta(order: int, r: ScanResult) -> str:
    """A source row's ``meta``: its place in the series, group attributes and, from scans since
    the VRT stopped opening sources at emit, its ``format`` and ``layout`` (``ScanResult``);
    since duplicates are refused, ``sort_last`` (the last coordinate value)."""
    meta: dict[str, Any] = {"order": order, "sort_units": r.sort_units, "groups": r.groups}
    if r.sort_last is not None:
        meta["sort_last"] = r.sort_last
    if r.format is not None:
        meta["format"] = r.format
    if r.layout:
        meta["layout"] = r.layout
    if r.order_keys:
        meta["order_keys"] = r.order_keys
    if r.digests:
        meta["digests"] = r.digests
    if r.source.checksum is not None:
        meta["checksum"] = r.source.checksum
    return json.dumps(meta, sort_keys=True)


def _new_order(settings: dict[str, Any], cfg: dict[str, Any]) -> bool:
    """Whether the scan gives an order rule other than the recorded one (``--order``, ``--order-by``)."""
    given = settings.get("order")
    return given is not None and OrderRule.parse(given) != OrderRule.parse(cfg.get("order"))


def _order_keys(recorded: dict[str, list[Any]]) -> dict[str, OrderKey]:
    """A source's ``order_keys`` (``ScanResult``, source row meta) as the series order reads them."""
    return {name: OrderKey(float(k[0]), float(k[1]), k[2], bool(k[3])) for name, k in recorded.items()}


@dataclass
class _State:
    """The latest version as the scan commit needs it."""

    snap: Snapshot
    concat_dim: str | None
    sources: dict[str, dict[str, Any]]
    vars: dict[tuple[str, str], tuple[ArrayMeta, tuple[int, tuple[int, ...]] | None]]
    """(source, array) -> (metadata in that source, (era, offset from the era start) or None)."""
    keys: dict[tuple[str, str], tuple[int, tuple[int, ...]]]
    """(source, array) -> (era, base) as its chunk rows were keyed (``Plan.keys``), placed ones only."""
    steps: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)
    """(source, array) -> key steps its chunk rows were keyed with, where not 1 (``Plan.steps``)."""


def _load(snap: Snapshot) -> _State:
    sources: dict[str, dict[str, Any]] = {}
    for r in snap.sources().to_pylist():
        meta = json.loads(r["meta"] or "{}")
        sv = r["sort_value"]
        sources[r["source"]] = {
            **r,
            "sort_value": None if sv is None or math.isnan(sv) else sv,
            "order": meta.get("order", 0),
            "sort_units": meta.get("sort_units"),
            "sort_last": meta.get("sort_last"),
            "order_keys": meta.get("order_keys", {}),
            "digests": meta.get("digests", {}),
        }
    vars_: dict[tuple[str, str], tuple[ArrayMeta, tuple[int, tuple[int, ...]] | None]] = {}
    keys: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = {}
    steps: dict[tuple[str, str], tuple[int, ...]] = {}
    arrays = snap.arrays()
    var_rows = snap.vars().to_pylist()
    origins = _recorded_origins(snap, arrays, var_rows)
    for r in var_rows:
        m = ArrayMeta.from_json(r["meta"])
        v: tuple[int, tuple[int, ...]] | None = None
        if r["d0"] != NOT_PLACED:
            d = [int(r[c]) for c in DEST_COLUMNS[: m.ndim]]
            g = arrays.get(r["array"])
            layout = EraLayout.of(g) if g is not None and g.eras else None
            if layout is not None:
                d[layout.axis] -= layout.bounds[int(r["era"])][0]
            elif r["array"] in origins:
                axis, origin = origins[r["array"]]
                d[axis] -= origin
            v = (int(r["era"]), tuple(d))
            if g is not None:
                keys[(r["source"], r["array"])] = (v[0], _base(g, v[0], v[1]))
                if g.cell and len(g.cell) == m.ndim and any(x != 1 for x in key_steps(m.chunks, g.cell)):
                    steps[(r["source"], r["array"])] = key_steps(m.chunks, g.cell)
        vars_[(r["source"], r["array"])] = (m, v)
    return _State(snap, snap.concat_dim, sources, vars_, keys, steps)


def _base(g: ArrayMeta, era: int, offset: tuple[int, ...]) -> tuple[int, ...]:
    """The chunk-key base of a slab at ``offset`` (from its era's start) on the recorded grid."""
    if g.cell and len(offset) == len(g.cell):  # tiles of different layouts: counted in the key cell
        return coarse_base(offset, g.cell)
    grid = Grid.of(g.era_meta(g.eras[era]) if g.eras and era < len(g.eras) else g)
    if len(offset) != grid.ndim:
        return tuple(offset)
    return tuple(grid.index_of(d, int(o)) if grid.chunks[d] else 0 for d, o in enumerate(offset))


def _needs_rekeying(snap: Snapshot) -> bool:
    """Whether chunk rows written by an older refstore must be re-keyed (see ``_recorded_origins``)."""
    if snap.concat_dim is None or not snap.count(Kind.SOURCE):
        return False
    return bool(_recorded_origins(snap, snap.arrays(), snap.vars().to_pylist()))


def _recorded_origins(
    snap: Snapshot, arrays: dict[str, ArrayMeta], var_rows: list[dict[str, Any]]
) -> dict[str, tuple[int, int]]:
    """``{array: (axis, origin)}`` for arrays whose chunk rows are keyed from ``origin`` instead of
    0 along the concat axis: refstore before issue 12 keyed an array absent from the first
    sources, with one era, from its first holder (it read shifted to the start). Found from one
    chunk row of the first holder (``g - k`` on the axis); a scan then sees those rows as moved
    and re-keys them (``design/formats.md``)."""
    dim = snap.concat_dim
    out: dict[str, tuple[int, int]] = {}
    if dim is None:
        return out
    first: dict[str, tuple[int, str]] = {}
    for r in var_rows:
        g = arrays.get(r["array"])
        if r["d0"] == NOT_PLACED or g is None or g.eras or g.status != "ok" or dim not in g.dims:
            continue
        d = int(r[DEST_COLUMNS[g.dims.index(dim)]])
        if r["array"] not in first or d < first[r["array"]][0]:
            first[r["array"]] = (d, r["source"])
    for name, (d, source) in first.items():
        if d == 0:
            continue
        axis = arrays[name].dims.index(dim)
        t = snap.ds.to_table(columns=[f"k{axis}", f"g{axis}"], limit=1,
                             filter=f"kind = 'chunk' AND array = {sql_str(name)} AND source = {sql_str(source)} "
                                    "AND g0 >= -1")  # fmt: skip
        if t.num_rows:
            origin = d - (int(t.column(f"g{axis}")[0].as_py()) - int(t.column(f"k{axis}")[0].as_py())) * int(
                arrays[name].chunks[axis]
            )
            if origin != 0:
                out[name] = (axis, origin)
    return out


def _var_rows(plan: Plan, slabs: Sequence[SourceSlab], texts: MetaTexts) -> pa.Table:
    arrays, sources, status, meta, eras = [], [], [], [], []
    dest: list[list[int]] = [[] for _ in DEST_COLUMNS]
    for s in slabs:
        for name, m in s.arrays.items():
            p = plan.placements.get((s.location, name))
            arrays.append(name)
            sources.append(s.location)
            status.append(m.status)
            meta.append(texts.text(m))
            eras.append(plan.view.get((s.location, name), (0, ()))[0])
            for i in range(MAX_DIMS):
                dest[i].append(NOT_PLACED if p is None else (p[i] if i < len(p) else 0))
    n = len(arrays)
    return rows(
        Kind.VAR, n, array=arrays, source=sources, status=status, meta=meta, era=pa.array(eras, pa.int32()),
        **{c: pa.array(dest[i], pa.int64()) for i, c in enumerate(DEST_COLUMNS)},
    )  # fmt: skip


def _array_rows(plan: Plan, texts: MetaTexts) -> pa.Table:
    names = sorted(plan.arrays)
    return rows(
        Kind.ARRAY,
        len(names),
        array=names,
        status=[plan.arrays[n].status for n in names],
        meta=[texts.text(plan.arrays[n]) for n in names],
    )


# --------------------------------------------------------------------------- commit
def _still_changed(
    state: _State, results: Sequence[ScanResult], counts: dict[str, Any]
) -> tuple[Sequence[ScanResult], dict[str, Any]]:
    """The results whose source differs from what ``state`` recorded, and the counts with the
    others as unchanged: after losing a race to a scan of the same files, the retry must not
    replace the winner's rows (nor drop what was held on them since)."""
    from ..read.fetch import change_since_scan

    def same(r: ScanResult) -> bool:
        old = state.sources.get(r.source.location)
        if old is None:
            return False
        known = (int(old["size"]), int(old["mtime_ns"]), str(old["etag"] or ""))
        if r.source.checksum is not None and r.source.checksum != json.loads(old["meta"] or "{}").get("checksum"):
            return False  # same size and mtime, other bytes (or a first checksum): scan --checksum
        return change_since_scan(known, (r.source.size, r.source.mtime_ns, r.source.etag)) is None

    kept = [r for r in results if not same(r)]
    return kept, {**counts, "unchanged": counts["unchanged"] + len(results) - len(kept)}


def _attempt(
    col: Collection,
    results: Sequence[ScanResult],
    concat_dim: str | None,
    counts: dict[str, Any],
    settings: dict[str, Any],
    prewritten: PrewrittenChunks | None = None,
    prune: Sequence[str] = (),
) -> ScanReport:
    from . import _append

    snap = col.snapshot()
    report = _append.append_commit(col, snap, results, concat_dim, counts, settings, prewritten, prune)
    if report is None:
        report = _append.rescan_commit(col, snap, results, concat_dim, counts, settings, prune)
    if report is not None:  # new sources after the end of the series, or files rewritten in place
        return report
    _append.STATS["planned"] += 1
    state = _load(snap)
    scanned = len(results)
    results, counts = _still_changed(state, results, counts)
    pending = bool(set(prune) & state.sources.keys()) or (
        settings.get("prefer") is not None and list(settings["prefer"]) != snap.config().get("prefer", [])
    ) or _new_order(settings, snap.config())  # sources to remove or new --prefer/--order rules: a version
    if scanned and not results and not pending and not _needs_rekeying(snap):  # a concurrent scan recorded them
        return ScanReport(version=snap.version, committed=False, unchanged=counts["unchanged"],
                          failed=tuple(counts["failed"]), missing=tuple(counts.get("missing", ())))  # fmt: skip
    if state.sources and concat_dim is not None and concat_dim != state.concat_dim:
        was = f"--concat-dim {state.concat_dim}" if state.concat_dim else "no --concat-dim"
        raise PlanError(f"{col.uri}: collection was built with {was}; cannot scan with --concat-dim {concat_dim}")
    dim = state.concat_dim if state.sources else concat_dim
    was_mosaic = bool(snap.config().get("mosaic"))
    if state.sources and settings.get("mosaic") and not was_mosaic:
        raise PlanError(f"{col.uri}: collection was built without --mosaic; cannot scan with --mosaic")
    mosaic = bool(settings.get("mosaic")) or was_mosaic

    by_loc = {r.source.location: r for r in results}
    changed = [loc for loc in by_loc if loc in state.sources]
    removed = sorted(loc for loc in set(prune) if loc in state.sources and loc not in by_loc)
    prefer = settings.get("prefer")
    rules = parse_prefer(prefer if prefer is not None else snap.config().get("prefer", []))
    order_rule = OrderRule.parse(settings.get("order") or snap.config().get("order"))
    next_order = 1 + max((s["order"] for s in state.sources.values()), default=-1)

    texts = MetaTexts()  # one instance per recorded text: the plan compares by identity, var rows reuse the JSON
    by_source: dict[str, dict[str, ArrayMeta]] = {}
    for (src, a), (m, _) in state.vars.items():
        by_source.setdefault(src, {})[a] = texts.canon(m)
    slabs: list[SourceSlab] = []
    for loc, s in state.sources.items():
        if loc in by_loc or loc in removed:
            continue
        arrays = by_source.get(loc, {})
        slabs.append(SourceSlab(loc, s["order"], arrays, s["sort_value"], s["sort_units"], s["sort_last"],
                                int(s["mtime_ns"]), order_keys=_order_keys(s["order_keys"]),
                                digests=s["digests"]))  # fmt: skip
    orders: dict[str, int] = {}
    for i, r in enumerate(results):
        loc = r.source.location
        orders[loc] = state.sources[loc]["order"] if loc in state.sources else next_order + i
        slabs.append(SourceSlab(loc, orders[loc], {a.name: texts.canon(a) for a in r.arrays}, r.sort_value,
                                r.sort_units, r.sort_last, r.source.mtime_ns, order_keys=_order_keys(r.order_keys),
                                digests=r.digests))  # fmt: skip
    mosaic_info: dict[str, Any] | None = None
    if mosaic:
        mp = make_mosaic_plan(slabs, dim, prefer=rules, require_aligned=False)
        plan, mosaic_info = mp.plan, mp.summary()
    else:
        plan = make_plan(slabs, dim, prefer=rules, order=order_rule)
    plan = complete_grid(plan, slabs)  # grids and keys for plans that give placements only (mosaics)
    extra_fragments: list[Any] = []
    extra_rows = 0
    if prewritten is not None:
        if prewritten.locations & state.sources.keys():
            raise SourcesNoLongerNew(sorted(prewritten.locations & state.sources.keys())[0])
        view = {k: v for k, v in plan.keys.items() if k[0] in prewritten.locations}
        steps = {k: v for k, v in plan.steps.items() if k[0] in prewritten.locations}
        extra_fragments, extra_rows = prewritten.fragments(view, steps) if steps else prewritten.fragments(view)

    # chunk rows: scanned sources, plus existing sources whose placement moved
    metas: dict[tuple[str, str], ArrayMeta] = {(r.source.location, a.name): a for r in results for a in r.arrays}
    scanned = _with_source(results)
    new_chunks = [_chunk_rows(scanned, _global_keys(scanned, plan.keys, metas, plan.steps))]
    moved: list[tuple[str, str]] = []
    for (loc, name), (m, old_view) in state.vars.items():
        if loc in by_loc or loc in removed or m.status != "ok":
            continue
        if (plan.view.get((loc, name)) != old_view or plan.keys.get((loc, name)) != state.keys.get((loc, name))
                or plan.steps.get((loc, name)) != state.steps.get((loc, name))):  # fmt: skip
            moved.append((loc, name))
    old_cols = ["array", "source", *SOURCE_KEY_COLUMNS, *GLOBAL_KEY_COLUMNS, "era", "offset", "length",
                "filter_mask", "inline"]  # fmt: skip
    if moved:
        moved_sources = sorted({loc for loc, _ in moved})
        old = snap.rows_of_sources(Kind.CHUNK, moved_sources, [*old_cols, "held_at", "held_ns", "held_digest"],
                                   with_row_id=True)  # fmt: skip
        pairs = pa.array([f"{loc}\x00{name}" for loc, name in moved])
        old = old.filter(
            pc.is_in(pc.binary_join_element_wise(old.column("source"), old.column("array"), "\x00"), pairs)
        )
        moved_metas = {(loc, name): state.vars[(loc, name)][0] for loc, name in moved}
        new_chunks.append(_chunk_rows(old, _global_keys(old, plan.keys, moved_metas, plan.steps),
                                      held=_held_of(snap, old)))  # fmt: skip

    # what the chunk rows were before, for the report
    touched = sorted({*changed, *removed, *(loc for loc, _ in moved)})
    old_chunk = snap.rows_of_sources(Kind.CHUNK, touched, old_cols) if touched else rows(Kind.CHUNK, 0).select(old_cols)
    new_chunk = pa.concat_tables(new_chunks) if new_chunks else rows(Kind.CHUNK, 0)
    if moved:  # of a moved source only its moved arrays count; changed sources count whole
        pair = pc.binary_join_element_wise(old_chunk.column("source"), old_chunk.column("array"), "\x00")
        keep = pc.or_(
            pc.is_in(old_chunk.column("source"), pa.array([*changed, *removed], pa.string())),
            pc.is_in(pair, pa.array([f"{loc}\x00{name}" for loc, name in moved], pa.string())),
        )
        old_chunk = old_chunk.filter(keep)
    key = ["array", "source", *SOURCE_KEY_COLUMNS]
    ins, upd, dele = diff_counts(old_chunk, new_chunk.select(old_cols), key, old_cols[len(key) :])
    ins += extra_rows  # rows of new sources: inserted by definition

    all_slabs = sorted(slabs, key=lambda s: s.order)
    source_rows = _source_rows(results, [orders[r.source.location] for r in results])
    was_aside: dict[str, str] = snap.config().get("set_aside", {})
    set_aside = {a.location: a for a in plan.set_aside}
    newly_aside = tuple(
        (a.location, a.kept, a.rule) for loc, a in sorted(set_aside.items()) if was_aside.get(loc) != a.kept
    )
    head = head_row(snap, {**{k: v for k, v in settings.items() if v is not None}, "concat_dim": dim,
                           **({"mosaic": True} if mosaic else {}),
                           "set_aside": {loc: a.kept for loc, a in sorted(set_aside.items())}})  # fmt: skip
    var_rows = _var_rows(plan, all_slabs, texts)
    upsert = pa.concat_tables([head, source_rows, var_rows, _array_rows(plan, texts), new_chunk])

    unsupported = tuple(
        (r.source.location, a.name, a.reason or "") for r in results for a in r.arrays if a.status != "ok"
    )
    record: dict[str, Any] = {
        "sources": {
            "new": len(results) - len(changed),
            "changed": len(changed),
            "unchanged": counts["unchanged"],
            "failed": len(counts["failed"]),
        },
        "refs": {"inserted": ins, "updated": upd, "deleted": dele},
        "failed": [{"source": s, "reason": r} for s, r in counts["failed"]],
        "removed": removed,
        "set_aside": [{"source": s, "for": k, "rule": r} for s, k, r in newly_aside],
        "prefer": [str(r) for r in rules],
        "order": str(order_rule),
        "ordered_by": plan.ordered_by,
        **({"mosaic": mosaic_info} if mosaic_info is not None else {}),
    }
    # The rows this commit replaces: the collection row, every var and array row, the source and
    # chunk rows of changed sources and the chunk rows of moved arrays. All of them are in
    # ``upsert`` (rewritten) unless they must disappear; everything else is untouched.
    scope = ["kind IN ('collection', 'var', 'array')"]
    if changed or removed:
        gone = ", ".join(sql_str(s) for s in [*changed, *removed])
        scope.append(f"(kind IN ('chunk', 'source') AND source IN ({gone}))")
    by_moved: dict[str, list[str]] = {}
    for loc, name in moved:
        by_moved.setdefault(loc, []).append(name)
    for loc, names in sorted(by_moved.items()):
        arrays_in = ", ".join(sql_str(n) for n in sorted(names))
        scope.append(f"(kind = 'chunk' AND source = {sql_str(loc)} AND array IN ({arrays_in}))")
    txn = replace_rows(snap, upsert, " OR ".join(scope))
    if extra_fragments:
        txn = _with_fragments(txn, extra_fragments)
    message = (
        f"scan: {record['sources']['new']} new, {record['sources']['changed']} changed, "
        f"{record['sources']['unchanged']} unchanged, {record['sources']['failed']} failed sources; "
        f"refs +{ins} ~{upd} -{dele}"
        + "".join(f"; removed {loc} (gone)" for loc in removed)
        + "".join(f"; set aside {s} for {k} (--prefer {r})" for s, k, r in newly_aside)
    )
    return ScanReport(
        version=commit(col, txn, "scan", message, record, parent=snap),
        committed=True,
        new=len(results) - len(changed),
        changed=len(changed),
        unchanged=counts["unchanged"],
        failed=tuple(counts["failed"]),
        inserted=ins,
        updated=upd,
        deleted=dele,
        unsupported=unsupported,
        removed=tuple(removed),
        missing=tuple(counts.get("missing", ())),
        set_aside=newly_aside,
        ordered_by=plan.ordered_by,
        concat_dim=dim,
        mosaic=mosaic_info,
    )


def _with_fragments(txn: Any, fragments: list[Any]) -> Any:
    """The merge_insert transaction with more new fragments: one commit, one version. Lance
    assigns their row ids and row versions at commit, like the upsert's own new rows."""
    import dataclasses

    from lance import LanceOperation

    op = txn.operation
    if isinstance(op, LanceOperation.Update):
        op = dataclasses.replace(op, new_fragments=[*op.new_fragments, *fragments])
    elif isinstance(op, LanceOperation.Append):
        op = dataclasses.replace(op, fragments=[*op.fragments, *fragments])
    else:  # pragma: no cover - merge_insert yields Update or Append
        raise TypeError(f"cannot add fragments to a {type(op).__name__} transaction")
    return dataclasses.replace(txn, operation=op)


def commit_scan(
    col: Collection,
    results: Sequence[ScanResult],
    *,
    concat_dim: str | None,
    unchanged: int,
    failed: Sequence[tuple[str, str]],
    settings: dict[str, Any] | None = None,
    prewritten: PrewrittenChunks | None = None,
    prune: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> ScanReport:
    """Commit scanned sources as one new version (none if nothing changed). ``settings`` are
    collection settings to keep (e.g. ``time_from_name``, ``prefer``: the ``--prefer`` rules as
    given, None to keep the recorded ones). ``prewritten``: the chunk rows of some new sources
    come as fragments (their ``results`` carry no chunk rows); raises ``SourcesNoLongerNew`` if
    a concurrent writer recorded one of them first. ``prune``: sources to remove (gone from
    the scanned paths) in the same version; ``missing``: gone sources kept, for the report."""
    counts = {"unchanged": unchanged, "failed": list(failed), "missing": list(missing)}
    settings = settings or {}
    snap0 = col.snapshot()
    new_rules = settings.get("prefer") is not None and list(settings["prefer"]) != snap0.config().get("prefer", [])
    new_rules = new_rules or _new_order(settings, snap0.config())
    if not results and not prune and not new_rules and not _needs_rekeying(snap0):
        snap = snap0
        if snap.count(Kind.SOURCE) and concat_dim is not None and concat_dim != snap.concat_dim:
            raise PlanError(f"{col.uri}: collection was built with --concat-dim {snap.concat_dim}; cannot scan "
                            f"with --concat-dim {concat_dim}")  # fmt: skip
        return ScanReport(version=snap.version, committed=False, unchanged=unchanged, failed=tuple(failed),
                          missing=tuple(missing))  # fmt: skip
    return retry_on_conflict(col, lambda: _attempt(col, results, concat_dim, counts, settings, prewritten, prune))
