"""Held bytes: copy the bytes of selected chunks into the collection's blob column (one version),
or drop them again. A held chunk reads without its source, and a tag that held it keeps it."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from itertools import product
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._held_digest import digests
from ..errors import BadInputError, SourceReadError
from ..plan.coalesce import coalesce
from ..plan.eras import EraLayout
from ..plan.grid import Grid
from ..plan.region import affine_ranges, date_to_cf, interval_ranges, lon_ranges
from ..plan.select import Selection, select
from ..schema import HELD_COLUMNS, SCHEMA, Kind
from ._commit import commit, head_row, retry_on_conflict
from ._replace import replace_rows_at
from ._rows import rows

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from datetime import datetime

    from ..read.fetch import Fetcher
    from ..scan._types import ArrayMeta
    from .collection import Collection, Snapshot

__all__ = ["HoldReport", "HoldSelection", "hold", "release"]

_ROW_COLUMNS = [f.name for f in SCHEMA if f.name not in HELD_COLUMNS]


@dataclass(frozen=True, slots=True)
class HoldSelection:
    """Which chunks: ``arrays`` (default: every array the other selectors apply to), ``bbox``
    (W, S, E, N in the array's own horizontal coordinates), ``time`` (start, end; inclusive),
    ``window`` (a numpy-style index applied to each array)."""

    arrays: tuple[str, ...] = ()
    bbox: tuple[float, float, float, float] | None = None
    time: tuple[datetime, datetime] | None = None
    window: tuple[Any, ...] | None = None


@dataclass(frozen=True, slots=True)
class HoldReport:
    version: int
    chunks: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "chunks": self.chunks, "bytes": self.bytes}


# --------------------------------------------------------------------------- selection
def _attr(meta: ArrayMeta, name: str) -> Any:
    a = meta.attrs.get(name)
    return None if a is None else a.get("value")


_GEOGRAPHIC_EPSG = {4326, 4269, 4267, 4258, 4283, 4617, 4674, 4019, 4030, 4035, 4047, 4979, 4055}


def _coord_kind(meta: ArrayMeta) -> str | None:
    """lat/lon (degrees: wrap-aware), x/y (projected: plain intervals) or time."""
    units = str(_attr(meta, "units") or "").lower()
    std = str(_attr(meta, "standard_name") or "").lower()
    axis = str(_attr(meta, "axis") or "").upper()
    if std == "latitude" or units in ("degrees_north", "degree_north", "degrees_n", "degree_n"):
        return "lat"
    if std == "longitude" or units in ("degrees_east", "degree_east", "degrees_e", "degree_e"):
        return "lon"
    if " since " in units:
        return "time"
    if axis in ("X", "Y") or std in ("projection_x_coordinate", "projection_y_coordinate"):
        return "x" if axis == "X" or std.startswith("projection_x") else "y"
    return None


def _unpacked(meta: ArrayMeta, values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Coordinate values in their real units (CF scale_factor / add_offset applied)."""
    v = np.asarray(values, dtype=np.float64)
    scale, offset = _attr(meta, "scale_factor"), _attr(meta, "add_offset")
    if scale is not None:
        v = v * float(scale)
    if offset is not None:
        v = v + float(offset)
    return v


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for x0, x1 in a:
        for y0, y1 in b:
            lo, hi = max(x0, y0), min(x1, y1)
            if lo < hi:
                out.append((lo, hi))
    return out


def _axis_ranges(
    snap: Snapshot, meta: ArrayMeta, sel: HoldSelection, read: Callable[[str], Any], used: set[str]
) -> list[list[tuple[int, int]]] | None:
    """Element ranges per axis selected by ``sel`` (None: the selectors do not apply). Names of
    the coordinate arrays consulted are added to ``used``."""
    per_axis: list[list[tuple[int, int]]] = [[(0, n)] for n in meta.shape]
    if sel.window is not None:
        win = select(sel.window, meta.shape)
        per_axis = [[(a, b)] for a, b in zip(win.start, win.stop, strict=True)]
    arrays = snap.arrays()
    if sel.bbox is not None:
        w, s, e, n = sel.bbox
        done = False
        transform = _attr(meta, "transform")
        ys = [i for i, d in enumerate(meta.dims) if d.startswith("y")]
        xs = [i for i, d in enumerate(meta.dims) if d.startswith("x")]
        if transform is not None and ys and xs:
            crs = str(_attr(meta, "crs") or "")
            geographic = crs.startswith("EPSG:") and int(crs[5:]) in _GEOGRAPHIC_EPSG
            found = affine_ranges(
                list(transform), meta.shape[ys[0]], meta.shape[xs[0]], sel.bbox, geographic=geographic
            )
            per_axis[ys[0]] = _intersect(per_axis[ys[0]], [found[0]]) if found else []
            per_axis[xs[0]] = _intersect(per_axis[xs[0]], found[1]) if found else []
            done = True
        else:
            for i, d in enumerate(meta.dims):
                c = arrays.get(d)
                kind = _coord_kind(c) if c is not None and len(c.shape) == 1 else None
                if c is None or kind not in ("lat", "lon", "x", "y"):
                    continue
                values = _unpacked(c, read(d))
                used.add(d)
                if kind == "lon":
                    found_r = lon_ranges(values, w, e)
                elif kind == "lat":
                    found_r = interval_ranges(values, s, n)
                else:
                    lo, hi = (w, e) if kind == "x" else (s, n)
                    found_r = interval_ranges(values, min(lo, hi), max(lo, hi))
                per_axis[i] = _intersect(per_axis[i], found_r)
                done = True
        if not done:
            return None
    if sel.time is not None:
        done = False
        for i, d in enumerate(meta.dims):
            c = arrays.get(d)
            if c is None or len(c.shape) != 1 or _coord_kind(c) != "time":
                continue
            units = str(_attr(c, "units"))
            cal = str(_attr(c, "calendar") or "standard")
            lo_t, hi_t = date_to_cf(sel.time[0], units, cal), date_to_cf(sel.time[1], units, cal)
            per_axis[i] = _intersect(per_axis[i], interval_ranges(_unpacked(c, read(d)), lo_t, hi_t))
            used.add(d)
            done = True
        if not done:
            return None
    return per_axis


def _rows_in(
    snap: Snapshot, name: str, meta: ArrayMeta, per_axis: list[list[tuple[int, int]]], held: bool
) -> list[pa.Table]:
    """Chunk rows of ``name`` whose chunks meet the boxes ``per_axis`` (per era), with their
    row addresses (``_rowaddr``: the commit replaces exactly those rows)."""
    out: list[pa.Table] = []
    layout = EraLayout.of(meta)
    for box in product(*per_axis):
        lo, hi = [a for a, _ in box], [b for _, b in box]
        # (era, box on the era's grid): one grid from 0 when the array has no eras
        pieces = layout.local_boxes(lo, hi) if layout is not None else [(None, lo, hi)]
        for era, e_lo, e_hi in pieces:
            if any(b <= a for a, b in zip(e_lo, e_hi, strict=True)):
                continue
            if meta.gridless:  # coarse keys, then each chunk's box through its slab (``plan/slabs.py``)
                slabs = snap.slab_layout(name)
                rng = slabs.key_ranges(e_lo, e_hi)
            else:
                rng = Grid.of_era(meta, era).box_ranges(e_lo, e_hi)
            flt = snap.view_filter(name, rng if meta.shape else None, era)
            flt += " AND held_at >= 0" if held else " AND held_at < 0"
            t = snap.ds.to_table(columns=_ROW_COLUMNS, filter=flt, with_row_address=True, late_materialization=True)
            if meta.gridless and t.num_rows:
                origin, size = slabs.rows_boxes(t)
                whole = Selection(tuple(e_lo), tuple(e_hi), (1,) * len(e_lo), ())
                t = t.filter(pa.array(slabs.touching(origin, size, whole)))
            out.append(t)
    return out


def _selected_rows(snap: Snapshot, sel: HoldSelection, *, held: bool) -> pa.Table:
    """Full chunk rows (no blob) of the selection, with their ``_rowaddr``; only held
    (``held``) or only unheld ones.

    The coordinate arrays a --bbox/--time selection consults are selected whole as well, so the
    same selection still works (to read, release or hold again) with the sources gone."""
    from ..read.array import Array

    arrays = snap.arrays()
    for n in sel.arrays:
        snap.array(n)  # NotFoundError for unknown names
    names = list(sel.arrays) or [n for n, m in arrays.items() if m.status == "ok"]
    cache: dict[str, np.ndarray[Any, Any]] = {}

    def read(name: str) -> Any:
        if name not in cache:
            cache[name] = Array(snap, snap.array(name))[...]
        return cache[name]

    axes = sum(1 for k in (sel.window or ()) if k is not Ellipsis)
    tables: list[pa.Table] = []
    used: set[str] = set()
    for name in names:
        meta = arrays[name]
        named = name in sel.arrays
        if meta.status != "ok":
            if named:
                raise BadInputError(f"array {name!r} cannot be held: {meta.reason}")
            continue
        if sel.window is not None and not named and axes > len(meta.shape):
            continue  # a window for arrays of another rank
        per_axis = _axis_ranges(snap, meta, sel, read, used)
        if per_axis is None:
            if named:
                raise BadInputError(f"array {name!r}: no coordinates to apply --bbox/--time to")
            continue
        tables.extend(_rows_in(snap, name, meta, per_axis, held))
    for name in sorted(used):  # the coordinates consulted, whole
        meta = arrays[name]
        tables.extend(_rows_in(snap, name, meta, [[(0, n)] for n in meta.shape], held))
    if not tables:
        empty = rows(Kind.CHUNK, 0).select(_ROW_COLUMNS)
        return empty.append_column("_rowaddr", pa.array([], pa.uint64()))
    t = pa.concat_tables(tables)
    if t.num_rows:  # boxes may overlap (a window and two longitude runs): keep each chunk once
        ks = [pc.cast(t.column(f"k{i}"), pa.string()) for i in range(8)]
        key = pc.binary_join_element_wise(t.column("array"), t.column("source"), *ks, "\x00")
        _, first = np.unique(key.to_numpy(zero_copy_only=False), return_index=True)
        t = t.take(pa.array(np.sort(first)))
    return t


# --------------------------------------------------------------------------- commit
def _commit(
    col: Collection,
    snap: Snapshot,
    table: pa.Table | Iterator[pa.Table],
    addresses: Any,
    op: str,
    record: dict[str, Any],
) -> int:
    """Replace the chunk rows at ``addresses`` (``table`` holds them rewritten, or yields them
    batch by batch) and the collection row as one version: deletion files on the fragments
    holding them and new fragments (``table/_replace.py``), not a merge_insert, whose join reads
    the key of every row of the table."""
    addrs = np.append(np.asarray(addresses, np.uint64), np.uint64(snap.head_address()))
    head = head_row(snap)
    if isinstance(table, pa.Table):
        new: pa.Table | pa.RecordBatchReader = pa.concat_tables([head, table])
    else:
        parts = itertools.chain([head], table)
        new = pa.RecordBatchReader.from_batches(SCHEMA, (b for t in parts for b in t.to_batches()))
    txn = replace_rows_at(snap, new, addrs)
    return commit(col, txn, op, f"{op}: {record['chunks']} chunks, {record['bytes']} bytes", record, parent=snap)


def _inline_blobs(data: np.ndarray[Any, Any], offsets: np.ndarray[Any, Any]) -> pa.Array:
    """A Lance blob v2 array of inline values: value ``i`` is ``data[offsets[i]:offsets[i+1]]``
    (the buffer is shared, not copied)."""
    from lance.blob import BlobType

    n = len(offsets) - 1
    buffers = [None, pa.py_buffer(np.ascontiguousarray(offsets, np.int64)), pa.py_buffer(data)]
    values = pa.Array.from_buffers(pa.large_binary(), n, buffers)
    storage = pa.StructArray.from_arrays(
        [values, pa.nulls(n, pa.utf8()), pa.nulls(n, pa.uint64()), pa.nulls(n, pa.uint64())],
        names=["data", "uri", "position", "size"],
    )
    return pa.ExtensionArray.from_storage(BlobType(), storage)


def _fetch_into(
    f: Fetcher, src: str, offsets: np.ndarray[Any, Any], pos: np.ndarray[Any, Any], buf: memoryview
) -> None:
    """Read the ranges of one source (``offsets`` ascending; range ``i`` goes to
    ``buf[pos[i]:pos[i+1]]``). Adjacent ranges are one read straight into the buffer; a run of
    overlapping ranges is read range by range."""
    lengths = np.diff(pos)
    runs = coalesce(offsets, lengths, max_gap=0)
    first = np.flatnonzero(np.diff(runs.run, prepend=-1))  # the first range of each run
    last = np.append(first[1:], len(offsets))
    starts: list[int] = []
    views: list[memoryview] = []
    for r, (a, b) in enumerate(zip(first.tolist(), last.tolist(), strict=True)):
        if int(runs.end[r] - runs.start[r]) == int(pos[b] - pos[a]):  # back to back: one read
            starts.append(int(runs.start[r]))
            views.append(buf[int(pos[a]) : int(pos[b])])
        else:
            starts.extend(offsets[a:b].tolist())
            views.extend(buf[int(pos[j]) : int(pos[j + 1])] for j in range(a, b))
    f.read_into(src, starts, views)


def hold(
    col: Collection,
    sel: HoldSelection,
    *,
    fetcher: Fetcher | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> HoldReport:
    """Copy the bytes of the selected (not yet held) chunks into the collection: one version.
    Every source is checked unchanged since its scan and every range for its length first; any
    failure commits nothing."""
    from ..read.fetch import Fetcher as _Fetcher
    from ..read.fresh import SourceCheck

    f = fetcher or _Fetcher()

    def attempt(snap: Snapshot) -> HoldReport:
        t = _selected_rows(snap, sel, held=False)
        inline = t.column("offset").to_numpy() < 0
        t = t.filter(pa.array(~inline))  # inline chunks are already in the row
        if t.num_rows == 0:
            return HoldReport(version=snap.version, chunks=0, bytes=0)
        # file order: the bytes of adjacent chunks are read in one go straight into the buffer
        t = t.take(pc.sort_indices(t, [("source", "ascending"), ("offset", "ascending")]))
        check = SourceCheck(snap.source_identity(), f, checksums=snap.source_checksums(), action="hold")
        sources = t.column("source").to_numpy(zero_copy_only=False)
        pos = np.zeros(t.num_rows + 1, np.int64)
        np.cumsum(t.column("length").to_numpy(), out=pos[1:])
        cuts = np.flatnonzero(sources[1:] != sources[:-1]) + 1
        starts = np.array([0, *cuts.tolist()], np.int64)
        for a in starts.tolist():  # every source before anything is written
            check(str(sources[a]))
        version = snap.version + 1
        batches = _HeldBatches(t, pos, starts, f, version, progress)
        record = {"chunks": t.num_rows, "bytes": int(pos[-1])}
        try:
            v = _commit(col, snap, batches.tables(), t.column("_rowaddr").to_numpy(), "hold", record)
        except Exception:
            if batches.error is not None:  # raised while Lance was reading the batches: as itself
                raise batches.error from None
            raise
        return HoldReport(version=v, chunks=t.num_rows, bytes=int(pos[-1]))

    return retry_on_conflict(col, lambda: attempt(col.snapshot()))


HOLD_BATCH_BYTES = 8 << 20
"""Held bytes read (and hashed) per batch of rows handed to Lance: memory is bounded by a few
batches, not by the selection, and the next batches are read while Lance writes the last."""

HOLD_THREADS = 2
"""Batches read and hashed at once, each in a thread of its own, while Lance writes."""


class _HeldBatches:
    """The rewritten rows of a hold, in batches of about ``HOLD_BATCH_BYTES`` of held bytes
    (rows in file order: ``t``, cumulative byte positions ``pos``, first row of each source
    ``starts``). ``HOLD_THREADS`` worker threads read and hash batches k+1, k+2, ... while Lance
    writes batch k (``preadv``, blake3 and Lance's writer release the GIL). Hashing one batch in a
    pool of threads of its own cost more than it saved: a thread hand-off per slice of every
    batch, against Lance's writer, for the same 2 cores."""

    def __init__(self, t: pa.Table, pos: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], fetcher: Fetcher,
                 version: int, progress: Callable[[int, int], None] | None) -> None:  # fmt: skip
        self.t, self.pos, self.fetcher, self.version, self.progress = t, pos, fetcher, version, progress
        self.sources = t.column("source").to_numpy(zero_copy_only=False)
        self.offsets = t.column("offset").to_numpy()
        self.source_start = starts
        self.now = time.time_ns()
        self.error: Exception | None = None
        # a batch starts at each row whose bytes start past a multiple of HOLD_BATCH_BYTES
        step = np.flatnonzero(np.diff(pos[:-1] // HOLD_BATCH_BYTES)) + 1
        self.cuts = [0, *step.tolist(), t.num_rows]

    def _batch(self, a: int, b: int) -> pa.Table:
        """Rows ``a:b`` with their held bytes read and hashed."""
        pos = self.pos[a : b + 1] - self.pos[a]
        data = np.empty(int(pos[-1]), np.uint8)
        buf = memoryview(data)
        # the sources met in a:b: each run of rows of one source is read by one call
        inner = self.source_start[(self.source_start > a) & (self.source_start < b)]
        bounds = [a, *inner.tolist(), b]
        for lo, hi in itertools.pairwise(bounds):
            p = pos[lo - a : hi - a + 1]
            try:
                _fetch_into(
                    self.fetcher, str(self.sources[lo]), self.offsets[lo:hi], p - p[0], buf[int(p[0]) : int(p[-1])]
                )
            except SourceReadError as e:
                raise SourceReadError(f"{e} (nothing was held)") from None
        t = self.t.slice(a, b - a)
        return rows(
            Kind.CHUNK, b - a,
            **{c: t.column(c) for c in _ROW_COLUMNS if c != "kind"},
            held_at=pa.array(np.full(b - a, self.version, np.int32)),
            held_ns=pa.array(np.full(b - a, self.now, np.int64)),
            held_digest=digests(buf, pos),
            held=_inline_blobs(data, pos),
        )  # fmt: skip

    def tables(self) -> Iterator[pa.Table]:
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        spans = list(itertools.pairwise(self.cuts))
        with ThreadPoolExecutor(HOLD_THREADS, thread_name_prefix="refstore-hold") as ex:
            ahead: deque[Future[pa.Table]] = deque(ex.submit(self._batch, *s) for s in spans[:HOLD_THREADS])
            try:
                for k in range(len(spans)):
                    try:
                        cur = ahead.popleft().result()
                    except Exception as e:  # Lance would wrap it in an error of its own
                        self.error = e
                        raise
                    if k + HOLD_THREADS < len(spans):
                        ahead.append(ex.submit(self._batch, *spans[k + HOLD_THREADS]))
                    if self.progress is not None:
                        self.progress(spans[k][1], self.t.num_rows)
                    yield cur
            finally:  # a failed batch or a stopped write: the batches not started are not read
                for f in ahead:
                    f.cancel()


def release(col: Collection, sel: HoldSelection) -> HoldReport:
    """Drop the held bytes of the selected chunks (one version); older versions keep them."""

    def attempt(snap: Snapshot) -> HoldReport:
        t = _selected_rows(snap, sel, held=True)
        if t.num_rows == 0:
            return HoldReport(version=snap.version, chunks=0, bytes=0)
        nbytes = int(pc.sum(t.column("length")).as_py() or 0)
        freed = rows(Kind.CHUNK, t.num_rows, **{c: t.column(c) for c in _ROW_COLUMNS if c != "kind"})
        record = {"chunks": t.num_rows, "bytes": nbytes}
        v = _commit(col, snap, freed, t.column("_rowaddr").to_numpy(), "release", record)
        return HoldReport(version=v, chunks=t.num_rows, bytes=nbytes)

    return retry_on_conflict(col, lambda: attempt(col.snapshot()))
