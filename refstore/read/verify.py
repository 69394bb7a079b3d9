"""verify: chunks read through the table must equal the source read by its own library (h5py for
netCDF4/HDF5, netCDF4-python with masking and scaling off for netCDF3, tifffile), raw values
(no scale/offset/mask), bit for bit.

Held chunks are checked against their ``held_digest`` (``_held_digest``) and, where the source
still has the identity its scan recorded, decoded and compared with the oracle too; a source
that is gone is reported apart (its held chunks are still checked from their bytes). Chunks
are planned as columns (never an object per chunk) and compared in batches: neighbouring
chunks of one array, era and source are read in one box from each side, at most
``BATCH_BYTES`` at a time.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _held_digest as held_digest
from .._keys import DEST_COLUMNS, GLOBAL_KEY_COLUMNS, NOT_PLACED, SOURCE_KEY_COLUMNS
from ..errors import SourceMissingError, SourceReadError, StaleSourceError
from ..plan.eras import EraLayout
from ..plan.grid import Grid
from .array import Array, ReadOptions
from .fetch import Fetcher, change_since_scan

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["BATCH_BYTES", "VerifyReport", "verify"]

BATCH_BYTES = 32 << 20
"""Largest box, in decoded bytes, read at once from the oracle and through the table (a single
larger chunk is still read whole): verify's memory does not grow with the number of chunks."""

_COLUMNS = ("source", "offset", "length", "filter_mask", "inline", "era", "held_at", "held_digest")


def _stored(snap: Snapshot, cols: Sequence[str]) -> list[str]:
    """``cols`` as ``snap``'s version names them: a format-1 version (``schema.FORMAT_VERSION``)
    calls the held bytes' digest ``held_sha256``."""
    old = snap.digest_column
    return [old if c == "held_digest" else c for c in cols]


def _current(t: pa.Table) -> pa.Table:
    """``t`` with a format-1 version's ``held_sha256`` named ``held_digest``."""
    return t.rename_columns(["held_digest" if c == "held_sha256" else c for c in t.column_names])


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """``checked``: chunks verified (held ones included); ``mismatches``: chunks read from their
    source that differ (or cannot be read); ``held_mismatches``: held chunks whose bytes differ
    from their checksum or, where the source is unchanged, from the source; ``held_checked``:
    held chunks checked, ``held_checksum_only`` of them by checksum alone (source changed or
    gone); ``missing``: source -> chunks not verified because the source is gone (and they are
    not held); ``skipped``: chunks the format's own reader has no counterpart for (a TIFF
    series' dates; the inline chunks of an imported store, ``design/import.md``)."""

    checked: int
    mismatched: int
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    held_checked: int = 0
    held_checksum_only: int = 0
    held_mismatches: list[dict[str, Any]] = field(default_factory=list)
    missing: dict[str, int] = field(default_factory=dict)

    @property
    def held_mismatched(self) -> int:
        return len(self.held_mismatches)

    @property
    def exit_code(self) -> int:
        """1 on any mismatch (held or not), else 2 when a source is gone, else 0."""
        if self.mismatched or self.held_mismatches:
            return 1
        return 2 if self.missing else 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"checked": self.checked, "mismatched": self.mismatched, "mismatches": self.mismatches}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.held_checked:
            out["held"] = {
                "checked": self.held_checked,
                "checksum_only": self.held_checksum_only,
                "mismatched": self.held_mismatched,
                "mismatches": self.held_mismatches,
            }
        if self.missing:
            out["missing_sources"] = [{"source": s, "chunks": n} for s, n in sorted(self.missing.items())]
        return out


@dataclass(slots=True)
class _Picked:
    """The chunk rows of one array to check, as columns, ordered by source."""

    meta: ArrayMeta
    rows: pa.Table  # global keys, _COLUMNS, _rowid
    order: np.ndarray[Any, Any]  # row indices grouped by source
    bounds: dict[str, tuple[int, int]]  # source -> its slice of ``order``


def _boxes(meta: ArrayMeta, era: int, keys: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Element boxes [lo, hi) in the global array of the chunks ``keys`` (n, ndim) of ``era``
    (``EraLayout.chunk_box`` for many chunks at once)."""
    layout = EraLayout.of(meta)
    lo, size = Grid.of_era(meta, era if layout is not None else None).boxes(keys)
    if layout is not None and meta.eras:
        lo[:, layout.axis] += layout.bounds[era][0]
    return lo, lo + size


def _pick(snap: Snapshot, arrays: Sequence[str] | None, sample: int | None, seed: int) -> list[_Picked]:
    """Every chunk of the arrays (or ``sample`` of them chosen with ``seed``): one table query
    per array, none per chunk; only the picked rows are kept."""
    names = list(arrays) if arrays else [n for n, m in snap.arrays().items() if m.status == "ok"]
    metas = [m for m in (snap.array(n) for n in names) if m.status == "ok"]
    if sample is not None:
        drawn = _draw(snap, metas, sample, seed)
        if drawn is not None:
            mine = (_columns_of(m, drawn.filter(pc.equal(drawn.column("array"), m.name))) for m in metas)
            return [p for m, t in zip(metas, mine, strict=True) if (p := _picked(m, t)) is not None]
    sizes = np.array([snap.ds.count_rows(filter=snap.view_filter(m.name)) for m in metas], np.int64)
    total = int(sizes.sum())
    pick = None
    if sample is not None and sample < total:
        pick = np.sort(np.random.default_rng(seed).choice(total, size=sample, replace=False))
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    out: list[_Picked] = []
    for meta, lo, hi in zip(metas, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        local = None if pick is None else pick[(pick >= lo) & (pick < hi)] - lo
        if local is not None and not len(local):
            continue
        if local is None:
            t = snap.chunk_rows(meta.name, columns=_stored(snap, _COLUMNS), with_row_id=True)
        else:  # only the picked rows are read (100M rows of an array would not fit)
            t = snap.chunk_rows_at(meta.name, local, _stored(snap, _COLUMNS))
        t = _current(t)
        picked = _picked(meta, t)
        if picked is not None:
            out.append(picked)
    return out


_MIN_HIT_RATE = 0.05
"""Below this share of the table's rows being chunk rows of the arrays verified, a sample is
drawn from their counted rows instead (``_draw``)."""


def _draw(snap: Snapshot, metas: list[ArrayMeta], sample: int, seed: int) -> pa.Table | None:
    """``sample`` chunk rows of ``metas`` in the view, uniformly at random without counting them
    (a filtered count reads the ``kind``/``array`` columns of every row: ~40 s at 100M rows):
    random positions among all the version's rows (their number is in the manifest) are taken,
    those that are such chunk rows kept, in the order drawn, and more drawn until there are
    ``sample``. None when the table has fewer rows than ``sample`` (every chunk is checked) or
    too few of its rows are such chunk rows for this to pay."""
    total = snap.ds.count_rows()
    if sample >= total or not metas:
        return None
    names = pa.array([m.name for m in metas])
    cols = ["kind", "array", *GLOBAL_KEY_COLUMNS, *SOURCE_KEY_COLUMNS, *_COLUMNS, "_rowid"]
    rng = np.random.default_rng(seed)
    seen = np.empty(0, np.int64)
    kept: list[pa.Table] = []
    n_kept = 0
    while n_kept < sample and len(seen) < total:
        rate = n_kept / len(seen) if len(seen) else 1.0
        if len(seen) >= 2 * sample and rate < _MIN_HIT_RATE:
            return None
        k = min(total - len(seen), int((sample - n_kept) / max(rate, _MIN_HIT_RATE) * 1.2) + 16)
        cand = rng.integers(0, total, 2 * k + 16)
        _u, first = np.unique(cand, return_index=True)
        cand = cand[np.sort(first)]  # distinct, in the order drawn
        cand = cand[~np.isin(cand, seen)][:k]
        if not len(cand):
            continue
        seen = np.concatenate([seen, cand])
        order = np.argsort(cand, kind="stable")
        t = _current(snap.ds.take(pa.array(cand[order]), columns=_stored(snap, cols)))
        t = t.take(pa.array(np.argsort(order, kind="stable")))  # back to the order drawn
        hit = pc.and_(pc.and_(pc.equal(t.column("kind"), "chunk"), pc.is_in(t.column("array"), names)),
                      pc.greater_equal(t.column("g0"), -1))  # the view's chunk rows (``view_filter``)  # fmt: skip
        t = t.filter(hit).slice(0, sample - n_kept)
        kept.append(t)
        n_kept += t.num_rows
    return pa.concat_tables(kept) if kept else None


def _columns_of(meta: ArrayMeta, t: pa.Table) -> pa.Table:
    """The columns ``Snapshot.chunk_rows`` gives for ``meta`` (with ``_rowid``)."""
    cols = [*GLOBAL_KEY_COLUMNS[: meta.ndim], *_COLUMNS]
    if meta.gridless:
        cols += [c for c in ("source", *SOURCE_KEY_COLUMNS[: meta.ndim]) if c not in cols]
    return t.select([*cols, "_rowid"])


def _picked(meta: ArrayMeta, t: pa.Table) -> _Picked | None:
    """The rows ``t`` of ``meta`` grouped by source (no Python string per row)."""
    if not t.num_rows:
        return None
    codes = t.column("source").combine_chunks().dictionary_encode()
    which = codes.indices.to_numpy()
    order = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[order], np.arange(len(codes.dictionary) + 1))
    spans = {str(s): (int(cuts[i]), int(cuts[i + 1])) for i, s in enumerate(codes.dictionary.to_pylist())}
    return _Picked(meta, t, order, spans)


def _batches(
    lo: np.ndarray[Any, Any], hi: np.ndarray[Any, Any], itemsize: int, budget: int, slack: int = 2
) -> Iterator[np.ndarray[Any, Any]]:
    """Runs of consecutive chunks (in key order) whose common box stays within ``budget`` bytes
    and is mostly theirs: at most ``slack`` times their own elements, so the scattered chunks of
    a sample are not read as the boxes around them (a box of 1,000 chunks for one)."""
    n = len(lo)
    if not n:
        return
    sizes = np.prod(hi - lo, axis=1)
    start, box_lo, box_hi, own = 0, lo[0].copy(), hi[0].copy(), int(sizes[0])
    for i in range(1, n):
        new_lo, new_hi = np.minimum(box_lo, lo[i]), np.maximum(box_hi, hi[i])
        box = int(np.prod(new_hi - new_lo))
        if box * itemsize > budget or box > slack * (own + int(sizes[i])):
            yield np.arange(start, i)
            start, box_lo, box_hi, own = i, lo[i].copy(), hi[i].copy(), int(sizes[i])
        else:
            box_lo, box_hi, own = new_lo, new_hi, own + int(sizes[i])
    yield np.arange(start, n)


def tiff_window(page: Any, fh: Any, sel: tuple[slice, ...]) -> np.ndarray[Any, Any]:
    """``page.asarray()[sel]`` decoding only the segments (tiles or strips) the window touches,
    each with tifffile's own ``page.decode``."""
    shape = tuple(int(n) for n in page.shape)
    sel = (*sel, *(slice(None),) * (len(shape) - len(sel)))
    lo = [s.indices(n)[0] for s, n in zip(sel, shape, strict=True)]
    hi = [s.indices(n)[1] for s, n in zip(sel, shape, strict=True)]
    separate = int(page.planarconfig) == 2 and int(page.samplesperpixel) > 1
    y_ax, x_ax = (1, 2) if separate else (0, 1)
    seg_h = int(page.tilelength) if page.is_tiled else int(min(page.rowsperstrip or shape[y_ax], shape[y_ax]))
    seg_w = int(page.tilewidth) if page.is_tiled else shape[x_ax]
    ny, nx = -(-shape[y_ax] // seg_h), -(-shape[x_ax] // seg_w)
    full = np.zeros([b - a for a, b in zip(lo, hi, strict=True)], dtype=page.dtype)
    decode, tables = page.decode, page.jpegtables  # lazy: they may move the file position, so before seeking
    planes = range(int(page.samplesperpixel)) if separate else range(1)
    for plane in planes:
        if separate and not lo[0] <= plane < hi[0]:
            continue
        for ty in range(lo[y_ax] // seg_h, -(-hi[y_ax] // seg_h)):
            for tx in range(lo[x_ax] // seg_w, -(-hi[x_ax] // seg_w)):
                index = plane * ny * nx + ty * nx + tx
                count = int(page.databytecounts[index])
                if count == 0:
                    continue
                fh.seek(int(page.dataoffsets[index]))
                seg, _idx, _shape = decode(fh.read(count), index, jpegtables=tables)
                seg = np.asarray(seg)[0]  # (h, w, samples)
                h, w = min(seg_h, shape[y_ax] - ty * seg_h), min(seg_w, shape[x_ax] - tx * seg_w)
                seg = seg[:h, :w]
                y0, x0 = ty * seg_h, tx * seg_w
                ya, yb = max(lo[y_ax], y0), min(hi[y_ax], y0 + h)
                xa, xb = max(lo[x_ax], x0), min(hi[x_ax], x0 + w)
                part = seg[ya - y0 : yb - y0, xa - x0 : xb - x0]
                if separate:
                    full[plane - lo[0], ya - lo[1] : yb - lo[1], xa - lo[2] : xb - lo[2]] = part[..., 0]
                elif len(shape) == 3:
                    full[ya - lo[0] : yb - lo[0], xa - lo[1] : xb - lo[1], :] = part[..., lo[2] : hi[2]]
                else:
                    full[ya - lo[0] : yb - lo[0], xa - lo[1] : xb - lo[1]] = part[..., 0]
    return full


class _GribOracle:
    """ecCodes over a GRIB file: where each message sits in which array comes from the file's
    messages grouped again (``scan.grib``), its values from ecCodes over the message read from the
    file again (``values`` cast to the array's dtype, missing points NaN, in row-major grid order,
    as ``_grib.decode_message`` gives them)."""

    def __init__(self, fh: Any, location: str, concat_dim: str | None) -> None:
        from ..errors import RefstoreError
        from ..scan._types import SourceInfo
        from ..scan.grib import GribScanner

        fh.seek(0, 2)
        size = fh.tell()
        try:
            res = GribScanner(concat_dim=concat_dim).scan_file(fh, SourceInfo(location, size, -1))
        except RefstoreError as e:  # damaged since the scan, or ecCodes missing: the oracle cannot open it
            raise OSError(str(e).removeprefix(f"{location}: ")) from None
        self.fh = fh
        self.metas = {a.name: a for a in res.arrays}
        t = res.chunks.filter(pc.is_valid(res.chunks.column("offset")))
        self.rows: dict[str, list[tuple[tuple[int, ...], int, int]]] = {}
        cols = [t.column(c).to_pylist() for c in ("array", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "offset",
                                                  "length")]  # fmt: skip
        for name, *rest in zip(*cols, strict=True):
            nd = self.metas[name].ndim
            self.rows.setdefault(name, []).append((tuple(rest[:nd]), rest[8], rest[9]))

    def read(self, name: str, sel: tuple[slice, ...]) -> np.ndarray[Any, Any] | None:
        from .._grib import decode_message

        meta = self.metas.get(name)
        if meta is None or name not in self.rows:
            return None  # coordinates made by the scan (no message holds them)
        box = [s.indices(n)[:2] for s, n in zip(sel, meta.shape, strict=True)]
        out = np.full([b - a for a, b in box], np.nan, dtype=meta.dtype)
        for key, offset, length in self.rows[name]:
            lo = [k * c for k, c in zip(key, meta.chunks, strict=True)]
            a = [max(x, s0) for x, (s0, _) in zip(lo, box, strict=True)]
            b = [min(x + c, s1) for x, c, (_, s1) in zip(lo, meta.chunks, box, strict=True)]
            if any(x >= y for x, y in zip(a, b, strict=True)):
                continue
            self.fh.seek(offset)
            field = decode_message(self.fh.read(length), meta.dtype).reshape(meta.chunks)
            out[tuple(slice(x - s0, y - s0) for x, y, (s0, _) in zip(a, b, box, strict=True))] = field[
                tuple(slice(x - o, y - o) for x, y, o in zip(a, b, lo, strict=True))
            ]
        return out

    def close(self) -> None:
        pass


class _ZarrOracle:
    """zarr-python over an imported Zarr store (``imports/zarr_store.py``): every chunk object
    of the store is a source, read through the store as a whole. ``sel`` is in the global
    array's coordinates (a store is one array each, not slabs of one)."""

    kind = "zarr"
    global_coords = True

    def __init__(self, store: str) -> None:
        import zarr

        self.opened: dict[str, Any] = {}
        if os.path.isfile(store):  # a zip of a store
            from zarr.storage import ZipStore

            node = zarr.open(ZipStore(store, mode="r"), mode="r")
        else:
            node = zarr.open(store, mode="r")
        if isinstance(node, zarr.Array):  # a store that is one array, named after its folder
            from ..imports.zarr_store import root_array_name

            self.arrays: Any = {root_array_name(store): node}
        else:
            self.arrays = node

    def read(self, name: str, sel: tuple[slice, ...]) -> np.ndarray[Any, Any] | None:
        arr = self.opened.get(name)
        if arr is None:  # each array's metadata read once (the oracle serves every chunk object)
            try:
                arr = self.opened[name] = self.arrays[name]
            except KeyError:
                return None
        return np.asarray(arr[sel] if sel else arr[...])

    def __enter__(self) -> _ZarrOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _Oracle:
    """The format's own reader for one source, raw values (no scale, offset or mask). Remote
    sources are opened through the scanners' ranged-read file (h5py and tifffile read only what
    they need; netCDF4-python cannot read a file object, so a remote netCDF3 file is fetched
    whole into memory for it)."""

    def __init__(self, location: str, *, concat_dim: str | None = None) -> None:
        from .. import _objstore
        from ..errors import RefstoreError
        from ..scan._sources import open_source
        from ..scan.auto import sniff_file

        self._opened = open_source(location)
        try:
            fh, _info = self._opened.__enter__()
        except RefstoreError as e:
            raise OSError(str(e).removeprefix(f"{location}: ")) from None
        self.concat_dim = concat_dim
        try:
            self._open(fh, location, _objstore.is_remote(location), sniff_file(fh, location))
        except BaseException:
            self._opened.__exit__(None, None, None)
            raise

    def _open(self, fh: Any, location: str, remote: bool, kind: str) -> None:
        self.kind = kind
        fh.seek(0)  # file objects are opened at their current position
        if self.kind == "netcdf3":
            from .._netcdf4 import import_netcdf4

            netCDF4 = import_netcdf4()
            if remote:
                self.f: Any = netCDF4.Dataset(location.rsplit("/", 1)[-1], "r", memory=fh.read())
            else:
                self.f = netCDF4.Dataset(location, "r")
            self.f.set_auto_maskandscale(False)
            self.f.set_always_mask(False)
        elif self.kind == "hdf5":
            import h5py

            from ..scan.hdf5 import _load_filter_plugins

            _load_filter_plugins()
            self.f = h5py.File(fh if remote else location, "r")
        elif self.kind == "tiff":
            import tifffile

            from ..scan.tiff import ifd_names

            self.f = tifffile.TiffFile(fh if remote else location, name=location.rsplit("/", 1)[-1])
            pages = list(self.f.pages)
            self.pages = dict(zip(ifd_names(pages), pages, strict=True))
        elif self.kind == "grib":
            self.f = _GribOracle(fh, location, self.concat_dim)
        else:
            raise OSError("unrecognised format")

    def read(self, name: str, sel: tuple[slice, ...]) -> np.ndarray[Any, Any] | None:
        """The oracle's raw values of ``sel``; None when the format has no such array (e.g. the
        date coordinate refstore adds to a TIFF series)."""
        if self.kind == "tiff":
            page = self.pages.get(name)
            if page is None:
                return None
            lead = len(sel) == len(page.shape) + 1  # the series' leading time axis
            out = tiff_window(page, self.f.filehandle, sel[1:] if lead else sel)
            return out[None] if lead else out
        if self.kind == "grib":
            return self.f.read(name, sel)  # type: ignore[no-any-return]
        if self.kind == "netcdf3":
            v = self.f.variables[name]
            return np.asarray(v[sel] if sel else v[...])
        d = self.f[name]
        return np.asarray(d[sel] if sel else d[()])

    def __enter__(self) -> _Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.f.close()
        finally:
            self._opened.__exit__(None, None, None)


class _Run:
    """One verify run over a snapshot: opens each source's oracle once, checks its chunks
    array by array in batches, and collects the findings."""

    def __init__(self, snap: Snapshot, options: ReadOptions | None, budget: int,
                 progress: Callable[[int, int], None] | None, total: int) -> None:  # fmt: skip
        self.snap = snap
        self.options = options or ReadOptions()
        self.budget = budget
        self.progress = progress
        self.total = total
        self.done = 0
        self.fetcher = Fetcher()
        self.readers: dict[str, Array] = {}
        self.dests: dict[tuple[str, str], tuple[int, ...]] = {}
        for r in snap.vars().to_pylist():
            if r["d0"] != NOT_PLACED:
                self.dests[(r["source"], r["array"])] = tuple(int(r[c]) for c in DEST_COLUMNS)
        from ..imports import STORE_FORMS

        self.stores = {s for s, m in zip(*snap.sources().select(["source", "meta"]).to_pydict().values(), strict=True)
                       if m and json.loads(m).get("format") in STORE_FORMS}  # fmt: skip
        imported = snap.config().get("imported") or {}
        self.zarr_store: str | None = imported.get("store") if imported.get("form") == "zarr" else None
        self.zarr_oracle: _ZarrOracle | None = None
        self.mismatches: list[dict[str, Any]] = []
        self.held_mismatches: list[dict[str, Any]] = []
        self.missing: dict[str, int] = {}
        self.checked = self.skipped = self.held_checked = self.held_checksum_only = 0
        # refstore's read of a batch runs in this thread while the oracle reads the same box:
        # both are mostly decompression, which releases the GIL
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="refstore-verify")

    def report(self) -> VerifyReport:
        return VerifyReport(
            checked=self.checked, mismatched=len(self.mismatches), mismatches=self.mismatches, skipped=self.skipped,
            held_checked=self.held_checked, held_checksum_only=self.held_checksum_only,
            held_mismatches=self.held_mismatches, missing=self.missing,
        )  # fmt: skip

    def _advance(self, n: int) -> None:
        self.done += n
        if self.progress:
            self.progress(self.done, self.total)

    def _array(self, meta: ArrayMeta) -> Array:
        arr = self.readers.get(meta.name)
        if arr is None:
            arr = self.readers[meta.name] = Array(self.snap, meta, fetcher=self.fetcher, options=self.options)
        return arr

    # ------------------------------------------------------------------ one source
    def source(self, src: str, groups: list[tuple[_Picked, pa.Table]]) -> None:
        """Check the chunk rows of ``src`` (one table per array)."""
        if src in self.stores:  # inline chunks of an imported store: no file to read them from
            n = sum(t.num_rows for _p, t in groups)
            self.skipped += n
            self._advance(n)
            return
        state, why = "ok", ""
        try:
            known = self.snap.source_identity().get(src)
            now = self.fetcher.head(src)
            change = change_since_scan(known, now) if known is not None else None
            if change is not None:
                state, why = "changed", change
        except SourceMissingError:
            state = "missing"
        except SourceReadError as e:
            state, why = "unreadable", str(e).removeprefix(f"{src}: ")
        unheld = [(p, t.filter(pa.array(~_held(t)))) for p, t in groups]
        held = [(p, t.filter(pa.array(_held(t)))) for p, t in groups]
        need_oracle = any(t.num_rows for _p, t in unheld) or (state == "ok" and any(t.num_rows for _p, t in held))
        oracle: _Oracle | _ZarrOracle | None = None
        oracle_error = why
        if need_oracle and state != "missing":
            try:
                oracle = self._oracle(src)
            except OSError as e:
                oracle_error = str(e).splitlines()[0] if str(e) else type(e).__name__
        try:
            for picked, t in held:
                if t.num_rows:
                    self._held(picked, t, src, oracle if state == "ok" else None)
            for picked, t in unheld:
                if not t.num_rows:
                    continue
                if state == "missing":
                    self.missing[src] = self.missing.get(src, 0) + t.num_rows
                    self._advance(t.num_rows)
                elif oracle is None:
                    for key in _keys(picked.meta, t).tolist():
                        self.mismatches.append({"array": picked.meta.name, "chunk": key, "source": src,
                                                "reason": f"oracle cannot open source: {oracle_error}"})  # fmt: skip
                    self._advance(t.num_rows)
                else:
                    self._compare(picked.meta, t, src, oracle, self.mismatches, "")
        finally:
            if oracle is not None:
                oracle.__exit__(None, None, None)

    def _oracle(self, src: str) -> _Oracle | _ZarrOracle:
        """zarr-python over the store for a chunk object of an imported Zarr store, else the
        format's own reader over the source."""
        store = self.zarr_store
        if store is not None and (src == store or src.startswith(store.rstrip("/") + "/")):
            if self.zarr_oracle is None:  # one for all the store's chunk objects (closing it is a no-op)
                try:
                    self.zarr_oracle = _ZarrOracle(store)
                except Exception as e:  # zarr-python refuses the store: no counterpart to compare with
                    raise OSError(f"zarr-python cannot open {store}: {_first(e)}") from None
            return self.zarr_oracle
        return _Oracle(src, concat_dim=self.snap.concat_dim)

    # ------------------------------------------------------------------ held chunks
    def _held(self, picked: _Picked, t: pa.Table, src: str, oracle: _Oracle | _ZarrOracle | None) -> None:
        """Held bytes against their checksum, then (source unchanged) decoded against the oracle."""
        name = picked.meta.name
        keys = _keys(picked.meta, t)
        lengths = t.column("length").to_numpy()
        good = np.ones(t.num_rows, bool)
        start = 0
        while start < t.num_rows:  # blob reads of at most ``budget`` bytes (one chunk at least)
            stop = start + max(1, int(np.searchsorted(np.cumsum(lengths[start:]), self.budget, side="right")))
            ids = t.column("_rowid").slice(start, stop - start)
            blobs = self.snap.ds.read_blobs("held", ids=ids, preserve_order=True)
            sums = t.column("held_digest").slice(start, stop - start).to_pylist()
            for i, (_addr, raw), want in zip(range(start, stop), blobs, sums, strict=True):
                if raw is None:
                    reason = "held chunk has no bytes"
                elif not held_digest.matches(want, raw):
                    reason = "held bytes differ from their checksum"
                else:
                    continue
                good[i] = False
                self.held_mismatches.append({"array": name, "chunk": keys[i].tolist(), "source": src, "reason": reason})
            start = stop
        self.held_checked += t.num_rows
        if oracle is None:
            self.held_checksum_only += t.num_rows
            self.checked += t.num_rows
            self._advance(t.num_rows)
            return
        self.checked += int((~good).sum())
        self._advance(int((~good).sum()))
        self._compare(picked.meta, t.filter(pa.array(good)), src, oracle, self.held_mismatches, "held bytes: ")

    # ------------------------------------------------------------------ values
    def _compare(self, meta: ArrayMeta, t: pa.Table, src: str, oracle: _Oracle | _ZarrOracle,
                 sink: list[dict[str, Any]], prefix: str) -> None:  # fmt: skip
        """Decoded chunks of ``t`` through the table against the oracle's reads, one box per batch."""
        arr = self._array(meta)
        keys = _keys(meta, t)
        eras = t.column("era").to_numpy()
        dest = np.asarray(self.dests.get((src, meta.name), (0,) * len(DEST_COLUMNS))[: meta.ndim], np.int64)
        if isinstance(oracle, _ZarrOracle):  # reads the whole store's array, not the source's slab
            dest = np.zeros_like(dest)
        for era in np.unique(eras).tolist():
            sel = np.flatnonzero(eras == era)
            sel = sel[np.lexsort(keys[sel].T[::-1])] if meta.ndim else sel
            if meta.gridless:  # boxes through the slab (``plan/slabs.py``), not a grid
                lo, size = arr.boxes(t.take(pa.array(sel)))
                hi = lo + size
            else:
                lo, hi = _boxes(meta, int(era), keys[sel])
            for part in _batches(lo, hi, arr.dtype.itemsize, self.budget):
                rows = t.take(pa.array(sel[part]))
                found = self._batch(oracle, arr, int(era), rows, lo[part], hi[part], dest)
                for i, reason in found:
                    sink.append({"array": meta.name, "chunk": keys[sel[part][i]].tolist(), "source": src,
                                 "reason": prefix + reason})  # fmt: skip
                self._advance(len(part))

    def _batch(self, oracle: _Oracle | _ZarrOracle, arr: Array, era: int, rows: pa.Table, lo: np.ndarray[Any, Any],
               hi: np.ndarray[Any, Any], dest: np.ndarray[Any, Any]) -> list[tuple[int, str]]:  # fmt: skip
        """(index in the batch, reason) of each chunk that differs; counts checked and skipped. A
        batch that fails on either side is checked again chunk by chunk, to name the culprits."""
        b_lo, b_hi = lo.min(axis=0), hi.max(axis=0)
        window = tuple(slice(a, b) for a, b in zip((b_lo - dest).tolist(), (b_hi - dest).tolist(), strict=True))
        ours = self.pool.submit(arr.read_rows, era, rows, b_lo.tolist(), b_hi.tolist())
        try:
            expected = oracle.read(arr.name, window)
        except Exception as e:
            ours.exception()  # wait for it; its outcome is not needed
            if rows.num_rows > 1:
                return self._one_by_one(oracle, arr, era, rows, lo, hi, dest)
            self.checked += 1
            return [(0, f"oracle cannot read: {_first(e)}")]
        if expected is None:
            ours.exception()
            self.skipped += rows.num_rows
            return []
        try:
            got = np.asarray(ours.result(), dtype=arr.dtype)
        except StaleSourceError as e:  # the whole source: no use trying chunk by chunk
            self.checked += rows.num_rows
            return [(i, f"refstore cannot read: {_first(e)}") for i in range(rows.num_rows)]
        except Exception as e:
            if rows.num_rows > 1:
                return self._one_by_one(oracle, arr, era, rows, lo, hi, dest)
            self.checked += 1
            return [(0, f"refstore cannot read: {_first(e)}")]
        exp = expected.astype(arr.dtype, copy=False)
        self.checked += rows.num_rows
        if got.shape != exp.shape:
            return [(i, "values differ") for i in range(rows.num_rows)]
        out = []
        for i, (a, b) in enumerate(zip((lo - b_lo).tolist(), (hi - b_lo).tolist(), strict=True)):
            box = tuple(slice(x, y) for x, y in zip(a, b, strict=True))
            if not _same_values(got[box], exp[box]):
                out.append((i, "values differ"))
        return out

    def _one_by_one(self, oracle: _Oracle | _ZarrOracle, arr: Array, era: int, rows: pa.Table, lo: np.ndarray[Any, Any],
                    hi: np.ndarray[Any, Any], dest: np.ndarray[Any, Any]) -> list[tuple[int, str]]:  # fmt: skip
        out = []
        for i in range(rows.num_rows):
            found = self._batch(oracle, arr, era, rows.slice(i, 1), lo[i : i + 1], hi[i : i + 1], dest)
            out += [(i, why) for _j, why in found]
        return out


def _same_values(got: np.ndarray[Any, Any], exp: np.ndarray[Any, Any]) -> bool:
    """Byte for byte; variable-length strings (object arrays) by their text, the oracle's bytes
    (h5py's reading) decoded as the scan decoded them (UTF-8, a byte that is not UTF-8 replaced)."""
    if got.dtype.kind != "O":
        return got.tobytes() == exp.tobytes()

    def text(v: Any) -> str:
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else "" if v is None else str(v)

    return [text(v) for v in got.ravel()] == [text(v) for v in exp.ravel()]


def _held(t: pa.Table) -> np.ndarray[Any, Any]:
    return t.column("held_at").to_numpy() >= 0  # type: ignore[no-any-return]


def _keys(meta: ArrayMeta, t: pa.Table) -> np.ndarray[Any, Any]:
    """The chunk keys (n, ndim) of the rows, on their era's grid."""
    if not meta.ndim:
        return np.zeros((t.num_rows, 0), np.int64)
    return np.column_stack([t.column(c).to_numpy().astype(np.int64) for c in GLOBAL_KEY_COLUMNS[: meta.ndim]])


def _first(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def verify(
    snap: Snapshot,
    *,
    arrays: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    options: ReadOptions | None = None,
    batch_bytes: int = BATCH_BYTES,
) -> VerifyReport:
    """Compare chunks (all, or ``sample`` of them chosen with ``seed``) with the oracle's reads;
    held chunks also with their checksum. ``batch_bytes``: the largest box read at once."""
    picked = _pick(snap, arrays, sample, seed)
    run = _Run(snap, options, batch_bytes, progress, sum(p.rows.num_rows for p in picked))
    try:
        return _run(run, picked)
    finally:
        run.pool.shutdown()


def _run(run: _Run, picked: list[_Picked]) -> VerifyReport:
    for src in sorted({s for p in picked for s in p.bounds}):
        groups = []
        for p in picked:
            if src in p.bounds:
                a, b = p.bounds[src]
                groups.append((p, p.rows.take(pa.array(p.order[a:b]))))
        run.source(src, groups)
    return run.report()
