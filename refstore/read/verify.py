"""verify: chunks read through the table must equal the source read by its own library (h5py for
netCDF4/HDF5, netCDF4-python with masking and scaling off for netCDF3),
raw values (no scale/offset/mask), bit for bit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .._keys import DEST_COLUMNS, NOT_PLACED
from ..plan.eras import EraLayout
from .array import Array, ReadOptions

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["VerifyReport", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    checked: int
    mismatched: int
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0  # chunks the format's own reader has no counterpart for (a TIFF series' dates)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"checked": self.checked, "mismatched": self.mismatched, "mismatches": self.mismatches}
        if self.skipped:
            out["skipped"] = self.skipped
        return out


def _region(meta: ArrayMeta, era: int, key: Any) -> tuple[list[int], list[int]]:
    """Element box [lo, hi) in the global array of the chunk ``key`` of ``era``."""
    layout = EraLayout.of(meta)
    if layout is not None:
        return layout.chunk_box(era, key, meta.shape)
    lo = [int(k) * c for k, c in zip(key, meta.chunks, strict=True)]
    return lo, [min(a + c, n) for a, c, n in zip(lo, meta.chunks, meta.shape, strict=True)]


def _plan(
    snap: Snapshot, arrays: Sequence[str] | None, sample: int | None, seed: int
) -> list[tuple[str, int, Any, str, pa.Table]]:
    """(array, era, chunk key on the era's grid, source, the chunk's row) for every chunk to
    check (or ``sample`` of them): one table query per array, none per chunk."""
    names = list(arrays) if arrays else [n for n, m in snap.arrays().items() if m.status == "ok"]
    tables: list[tuple[str, Any, Any, Any]] = []
    for name in names:
        meta = snap.array(name)
        if meta.status != "ok":
            continue
        t = snap.chunk_rows(name, columns=("source", "offset", "length", "filter_mask", "inline", "era"))
        keys = (
            np.column_stack([t.column(f"g{i}").to_numpy() for i in range(meta.ndim)])
            if meta.ndim and t.num_rows
            else np.zeros((t.num_rows, meta.ndim), np.int64)
        )
        tables.append((name, keys, t, t.column("era").to_numpy()))
    sizes = np.array([len(k) for _, k, _, _ in tables], np.int64)
    total = int(sizes.sum())
    if sample is not None and sample < total:
        pick = np.sort(np.random.default_rng(seed).choice(total, size=sample, replace=False))
    else:
        pick = np.arange(total)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    items: list[tuple[str, int, Any, str, pa.Table]] = []
    for (name, keys, rows, eras), lo, hi in zip(tables, bounds[:-1], bounds[1:], strict=True):
        local = pick[(pick >= lo) & (pick < hi)] - lo
        if len(local):
            srcs = rows.column("source").take(pa.array(local)).to_pylist()
            items.extend(
                (name, int(eras[i]), keys[i], src, rows.slice(i, 1))
                for i, src in zip(local.tolist(), srcs, strict=True)
            )
    return items


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


class _Oracle:
    """The format's own reader for one source, raw values (no scale, offset or mask). Remote
    sources are opened through the scanners' ranged-read file (h5py and tifffile read only what
    they need; netCDF4-python cannot read a file object, so a remote netCDF3 file is fetched
    whole into memory for it)."""

    def __init__(self, location: str) -> None:
        from .. import _objstore
        from ..errors import RefstoreError
        from ..scan._sources import open_source
        from ..scan.auto import sniff_file

        self._opened = open_source(location)
        try:
            fh, _info = self._opened.__enter__()
        except RefstoreError as e:
            raise OSError(str(e).removeprefix(f"{location}: ")) from None
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


def verify(
    snap: Snapshot,
    *,
    arrays: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    options: ReadOptions | None = None,
) -> VerifyReport:
    """Compare chunks (all, or ``sample`` of them chosen with ``seed``) with the oracle's reads."""
    items = _plan(snap, arrays, sample, seed)
    dests: dict[tuple[str, str], tuple[int, ...]] = {}
    for r in snap.vars().to_pylist():
        if r["d0"] != NOT_PLACED:
            dests[(r["source"], r["array"])] = tuple(int(r[c]) for c in DEST_COLUMNS)
    readers: dict[str, Array] = {}
    mismatches: list[dict[str, Any]] = []
    by_source: dict[str, list[tuple[str, int, Any, pa.Table]]] = {}
    for name, era, key, src, row in items:
        by_source.setdefault(src, []).append((name, era, key, row))
    done = 0
    skipped = 0
    for src, group in by_source.items():
        try:
            f = _Oracle(src)
        except OSError as e:
            for name, _era, key, _row in group:
                mismatches.append({"array": name, "chunk": [int(k) for k in key], "source": src,
                                   "reason": f"oracle cannot open source: {str(e).splitlines()[0]}"})  # fmt: skip
            done += len(group)
            if progress:
                progress(done, len(items))
            continue
        with f:
            for name, era, key, row in group:
                arr = readers.get(name) or readers.setdefault(name, Array(snap, snap.array(name), options=options))
                lo, hi = _region(arr.meta, era, key)
                dest = dests.get((src, name), (0,) * 8)
                s_sel = tuple(slice(a - d, b - d) for a, b, d in zip(lo, hi, dest, strict=False))
                entry = {"array": name, "chunk": [int(k) for k in key], "source": src}
                try:
                    expected = f.read(name, s_sel)
                except Exception as e:
                    mismatches.append({**entry, "reason": f"oracle cannot read: {str(e).splitlines()[0]}"})
                else:
                    if expected is None:
                        skipped += 1
                        done += 1
                        continue
                    try:
                        got = np.asarray(arr.read_rows(era, row, lo, hi), dtype=arr.dtype)
                    except Exception as e:
                        mismatches.append({**entry, "reason": f"refstore cannot read: {str(e).splitlines()[0]}"})
                    else:
                        exp = expected.astype(arr.dtype, copy=False)
                        if got.shape != exp.shape or got.tobytes() != exp.tobytes():
                            mismatches.append({**entry, "reason": "values differ"})
                done += 1
                if progress:
                    progress(done, len(items))
    return VerifyReport(
        checked=len(items) - skipped, mismatched=len(mismatches), mismatches=mismatches, skipped=skipped
    )
