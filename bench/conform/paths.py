"""Every way refstore serves a unit's arrays, each compared with the oracle: one column each.

``open`` (``refstore.open``), ``xarray`` (``engine="refstore"``, CF-decoded, coordinates
included, against xarray over the files), ``zarr`` (``refstore.zarr_store`` through
zarr-python), one column per emitted form reopened by its own reader (``tests/readers/``:
fsspec+zarr for kerchunk JSON/Parquet, icechunk+zarr, pyarrow/DuckDB for flat Parquet, sqlite3,
GDAL's tools for the VRT), ``verify`` and ``hold`` (every chunk held, then the sources moved
away and the arrays read again)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import shutil
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from .cells import EQUAL, Cell, compare_raw, compare_values, first_line, windows
from .oracle import OracleUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from .oracle import Oracle

__all__ = ["FORMS", "PATHS", "Results", "refused_or_crash"]

FORMS = ("kerchunk-json", "kerchunk-parquet", "icechunk", "parquet", "sqlite", "vrt")
PATHS = ("open", "xarray", "zarr", *FORMS, "verify", "hold")

Results = dict[str, dict[str, Cell]]  # path -> array -> cell


def refused_or_crash(e: BaseException) -> Cell:
    """Bad input as refstore words it (``BadInputError``: unsupported, unexpressible, a scan or
    plan refusal) is a refusal, its message the reason; anything else (a source that does not
    read back, any other exception) a crash."""
    from refstore.errors import BadInputError

    return Cell("refused" if isinstance(e, BadInputError) else "crash", first_line(e))


def _each(names: list[str], check: Callable[[str], Cell]) -> dict[str, Cell]:
    out: dict[str, Cell] = {}
    for n in names:
        try:
            out[n] = check(n)
        except Exception as e:
            out[n] = refused_or_crash(e)
    return out


class Run:
    """The paths over one scanned collection ``col`` of the unit whose oracle is ``oracle``."""

    def __init__(self, col: str, oracle: Oracle, work: str) -> None:
        import refstore

        self.col = col
        self.oracle = oracle
        self.work = work
        self.ds = refstore.open(col)
        self.metas = self.ds.snapshot.arrays()
        self.refused = {n: m.reason or m.status for n, m in self.metas.items() if m.status != "ok"}

    # ------------------------------------------------------------------ helpers
    def _raw(self, name: str, served: dict[str, Any], why_absent: dict[str, str]) -> Cell:
        """The cell of oracle array ``name`` in a path serving ``served`` (array-likes)."""
        if name in self.oracle.unreadable:
            return Cell("refused", self.refused[name]) if name in self.refused else Cell(
                "wrong", f"served, but the oracle cannot read it: {self.oracle.unreadable[name]}")
        if name not in served:
            if name in why_absent:
                return Cell("refused", why_absent[name])
            return Cell("missing")
        info = self.oracle.arrays[name]
        if name in self.oracle.alternatives:  # equal to any of the versions the reader holds
            versions = self.oracle.alternatives[name](())
            cells = [compare_raw(served[name], v.shape, v.dtype, lambda sel, v=v: v[sel]) for v in versions]
            return next((c for c in cells if c.kind == "equal"), cells[0])
        return compare_raw(served[name], info.shape, info.dtype, lambda sel: self.oracle.raw(name, sel))

    def _extra(self, served: dict[str, Any]) -> dict[str, Cell]:
        return {n: Cell("wrong", "served, but the oracle has no such array") for n in served
                if n not in self.oracle.arrays and n not in self.oracle.unreadable}

    def raw_path(self, served: dict[str, Any], why_absent: dict[str, str]) -> dict[str, Cell]:
        names = sorted(set(self.oracle.arrays) | set(self.oracle.unreadable))
        cells = {**_each(names, lambda n: self._raw(n, served, why_absent)), **self._extra(served)}
        cells.update({n: Cell("refused", r) for n, r in self.refused.items() if n not in cells})
        return cells

    # ------------------------------------------------------------------ paths
    def open_(self) -> dict[str, Cell]:
        served = {n: self.ds[n] for n in self.metas if n not in self.refused}
        return self.raw_path(served, self.refused)

    def zarr(self) -> dict[str, Cell]:
        import zarr

        import refstore

        store = refstore.zarr_store(self.col)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            group = zarr.open_group(store, mode="r")
            served = dict(_walk(group))
        return self.raw_path({n: _Quiet(a) for n, a in served.items()}, {**self.refused, **store.left_out})

    def form(self, fmt: str) -> dict[str, Cell]:
        from refstore.emit import _form, emit
        from refstore.emit._input import EmitSource
        from refstore.errors import UnexpressibleError
        from refstore.table import Collection

        if fmt == "vrt" and importlib.util.find_spec("osgeo") is None:  # tests/readers/vrt.py: GDAL 3.13
            raise OracleUnavailable("gdal-wheel (GDAL >= 3.7, for Int8) is not installed")
        col = Collection.open(self.col)
        src = EmitSource(col.snapshot(), on_stale="error")
        skipped: dict[str, str] = {}
        for name, meta in src.arrays().items():
            try:
                _form(fmt).check(src, meta)
            except UnexpressibleError as e:
                skipped[name] = str(e)
        served: dict[str, Any] = {}
        if len(skipped) < len(self.metas):
            out = f"{self.work}/out.{fmt}"
            rep = emit(col, fmt, out, skip_unexpressible=True)
            skipped.update(rep.skipped)
            reader = importlib.import_module(f"tests.readers.{fmt.replace('-', '_')}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                served = reader.open_form(out, self)
        return self.raw_path({n: _Quiet(a) for n, a in served.items()}, {**self.refused, **skipped})

    def dataset(self) -> Any:  # what tests/readers/vrt.py asks of its case
        return self.ds

    def verify(self) -> dict[str, Cell]:
        from refstore.read.verify import verify

        rep = verify(self.ds.snapshot)
        bad: dict[str, str] = {}
        for m in rep.mismatches:
            bad.setdefault(m["array"], f"chunk {m.get('chunk')}: {m.get('reason', 'differs')}")
        cells = {n: Cell("refused", r) for n, r in self.refused.items()}
        for n in self.metas:
            if n not in self.refused:
                cells[n] = Cell("wrong", bad[n]) if n in bad else EQUAL
        return self._name_cells(cells)

    def hold(self, sources_dir: str) -> dict[str, Cell]:
        import refstore
        from refstore.table import Collection
        from refstore.table.hold import HoldSelection, hold

        hold(Collection.open(self.col), HoldSelection())
        gone = sources_dir.rstrip("/") + "-gone"
        shutil.move(sources_dir, gone)
        try:
            ds = refstore.open(self.col)
            served = {n: ds[n] for n in ds.snapshot.arrays() if n not in self.refused}
            return self.raw_path(served, self.refused)
        finally:
            shutil.move(gone, sources_dir)

    def _name_cells(self, cells: dict[str, Cell]) -> dict[str, Cell]:
        """Cells keyed by refstore's names, put on the oracle's rows (missing where absent)."""
        out = {n: cells.get(n, Cell("missing")) for n in sorted(set(self.oracle.arrays) | set(self.oracle.unreadable))}
        out.update({n: Cell("wrong", "served, but the oracle has no such array") for n in cells
                    if n not in out and n not in self.refused})
        out.update({n: c for n, c in cells.items() if n not in out})
        return out

    # ------------------------------------------------------------------ xarray
    def xarray(self) -> dict[str, Cell]:
        import xarray as xr

        if self.oracle.xr_values_only:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = xr.open_dataset(self.col, engine="refstore", decode_timedelta=True)
            return self._decoded_path({str(n): got[n] for n in got.variables})
        want = self.oracle.xarray()
        if want is None:
            raise OracleUnavailable("no xarray reader for this format here")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = xr.open_dataset(self.col, engine="refstore", decode_timedelta=True)
        names = sorted(str(n) for n in want.variables)
        cells = _each(names, lambda n: self._xr_cell(n, got, want))
        cells.update({str(n): Cell("wrong", "in engine='refstore', not in the oracle's dataset")
                      for n in got.variables if str(n) not in want.variables})
        return cells

    def _decoded_path(self, served: dict[str, Any]) -> dict[str, Cell]:
        """engine="refstore" over TIFFs against tifffile's values, CF-decoded by xarray with the
        GDAL nodata as ``_FillValue`` (a TIFF series' ``time``: its dates as datetime64)."""
        from .oracle import cf_decoded

        o = self.oracle

        def check(name: str) -> Cell:
            if name not in served:
                return Cell("refused", self.refused[name]) if name in self.refused else Cell("missing")
            if name == "time" and o.times:
                want = np.array(o.times, "datetime64[s]").astype("datetime64[ns]")
                return Cell("wrong", why) if (why := compare_values(served[name].values, want)) else EQUAL
            fill = o.nodata.get(name)
            probe = cf_decoded(np.zeros((1,), o.arrays[name].dtype), fill)
            return compare_raw(served[name], o.arrays[name].shape, probe.dtype,
                               lambda sel: cf_decoded(o.raw(name, sel), fill))

        cells = _each(sorted(o.arrays), check)
        cells.update(self._extra(served))
        cells.update({n: Cell("refused", r) for n, r in self.refused.items() if n not in cells})
        return cells

    def _xr_cell(self, name: str, got: Any, want: Any) -> Cell:
        if name not in got.variables:
            return Cell("refused", self.refused[name]) if name in self.refused else Cell("missing")
        g, w = got[name], want[name]
        if name in self.oracle.alternatives:  # a coordinate several hypercubes hold: any of its versions
            base = re.sub(r"_\d+$", "", name)
            for other in [n for n in want.variables if re.sub(r"_\d+$", "", str(n)) == base]:
                if g.dims == want[other].dims and compare_values(g.values, want[other].values) is None:
                    w = want[other]
                    break
        if g.dims != w.dims:
            return Cell("wrong", f"dims {g.dims} != {w.dims}")
        if g.dtype.newbyteorder("=") != w.dtype.newbyteorder("=") and not g.dtype.kind == w.dtype.kind == "O":
            return Cell("wrong", f"dtype {g.dtype} != {w.dtype}")
        for sel in windows(tuple(w.shape), w.dtype.itemsize):  # large variables by window
            why = compare_values(g[sel].values if sel else g.values, w[sel].values if sel else w.values)
            if why:
                return Cell("wrong", why)
        diff = _attrs_differ(dict(g.attrs), dict(w.attrs))
        return Cell("wrong", f"attrs differ: {diff}") if diff else EQUAL


def _attrs_differ(got: dict[str, Any], want: dict[str, Any]) -> str:
    keys = sorted(set(got) | set(want))
    bad = []
    for k in keys:
        if k not in got or k not in want:
            bad.append(f"{k} {'absent' if k not in got else 'extra'}")
            continue
        a, b = got[k], want[k]
        same = False
        with contextlib.suppress(Exception):
            aa, bb = np.asarray(a), np.asarray(b)
            nan = aa.dtype.kind == "f"
            same = aa.dtype == bb.dtype and aa.shape == bb.shape and bool(np.array_equal(aa, bb, equal_nan=nan))
            if not same and aa.dtype.kind in "US" and bb.dtype.kind in "US":
                same = np.array_equal(aa.astype(str), bb.astype(str))
        if not same:
            bad.append(f"{k} {a!r} != {b!r}"[:120])
    return "; ".join(bad[:3]) + (f" (+{len(bad) - 3})" if len(bad) > 3 else "")


class _Quiet:
    """An array-like whose reads do not warn (numcodecs names outside the zarr v3 spec)."""

    def __init__(self, arr: Any) -> None:
        self.arr = arr
        first = arr if hasattr(arr, "shape") else next(iter(arr.arrays.values()))  # tests/readers' BothEngines
        self.shape = first.shape
        self.dtype = getattr(first, "dtype", None)

    def __getitem__(self, sel: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.arr[sel]


def _walk(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = [(f"{prefix}{n}", a) for n, a in group.arrays()]
    for g, sub in group.groups():
        out += _walk(sub, f"{prefix}{g}/")
    return out
