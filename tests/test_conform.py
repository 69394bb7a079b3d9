"""The conformance harness itself (bench/conform, ``./dev conform``): its cells on tiny generated
files, each kind provoked where it can be honestly, and its rules for series and refusals."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import h5py
import numpy as np

from bench.conform.cells import Cell, compare_raw, windows
from bench.conform.oracle import oracle_for
from bench.conform.paths import Run
from bench.conform.pool import run_all
from bench.conform.reasons import REASONS, classify
from bench.conform.report import exit_status, summarize
from bench.conform.units import Unit, _dates, discover
from bench.conform.worker import run_unit

REPO = Path(__file__).resolve().parent.parent


def _h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        a = f.create_dataset("a", data=np.arange(60, dtype="<i4").reshape(6, 10), chunks=(3, 5), compression="gzip")
        for i, (dim, n) in enumerate((("y", 6), ("x", 10))):
            f.create_dataset(dim, data=np.arange(n, dtype="f8")).make_scale(dim)
            a.dims[i].attach_scale(f[dim])
        s = f.create_dataset("s", data=np.arange(10, dtype="<i4"), chunks=(5,), scaleoffset=0)  # no decoder here
        s.dims[0].attach_scale(f["x"])
    return path


def test_file_unit_every_path(tmp_path: Path) -> None:
    path = _h5(tmp_path / "f.h5")
    [unit] = discover([str(tmp_path)])
    assert unit == Unit(f"{tmp_path.name}/f.h5", "file", "hdf5", (str(path),))
    r = run_unit(unit)
    assert r["scan"] is None
    paths = {"open", "xarray", "zarr", "kerchunk-json", "icechunk", "parquet", "sqlite", "verify", "hold"}
    assert paths <= set(r["cells"])
    for path_name, cells in r["cells"].items():
        assert cells["a"] == {"kind": "equal"}, path_name
        if path_name == "vrt":  # GDAL's libhdf5 decodes scaleoffset itself
            assert cells["s"] == {"kind": "equal"}
            continue
        assert cells["s"]["kind"] == "refused", path_name
        assert classify(cells["s"]["detail"]) == "filter without a decoder", cells["s"]
    s = summarize([r])
    assert s["counts"]["wrong"] == s["counts"]["missing"] == s["counts"]["crash"] == 0
    assert exit_status(s) == 0
    assert path.exists()  # hold moved the copy away, never the file


def test_missing_and_wrong(tmp_path: Path) -> None:
    """An array the oracle lists that refstore neither serves nor refuses is missing; values
    that differ from the oracle's are wrong."""
    import refstore

    path = _h5(tmp_path / "f.h5")
    with h5py.File(path, "a") as f:  # a soft link h5py lists
        f["b"] = h5py.SoftLink("/a")
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(path)], timeout=None)
    oracle = oracle_for(Unit("f", "file", "hdf5", (str(path),)))
    assert "b" in oracle.arrays
    refstore_lists_b = "b" in refstore.open(col).arrays
    real = oracle.reader
    oracle.reader = lambda name, sel: real(name, sel) + (name == "a")  # the oracle now disagrees on `a`
    cells = Run(col, oracle, str(tmp_path)).open_()
    assert cells["a"].kind == "wrong" and "values differ at 60 of 60 points" in cells["a"].detail
    if not refstore_lists_b:
        assert cells["b"] == Cell("missing")
    oracle.arrays.pop("s")
    assert Run(col, oracle, str(tmp_path)).open_()["s"].kind == "refused"  # refused by name stays refused
    assert exit_status(summarize([{"unit": "f", "scan": None, "na": {}, "cells": {"open": {
        n: c.to_json() for n, c in cells.items()}}}])) == 1


def test_compare_windows() -> None:
    assert windows((10, 10), 8) == [(slice(0, None), slice(0, None))]
    first, last = windows((100_000, 1_000), 8)
    assert first[1] == slice(0, 1000) and last[0].stop is None and first[0].stop * 1000 * 8 <= 4 << 20
    arr = np.arange(12, dtype=">i2").reshape(3, 4)
    assert compare_raw(arr, (3, 4), arr.dtype, lambda sel: arr.astype("<i2")[sel]) == Cell("equal")
    assert compare_raw(arr, (3, 5), arr.dtype, lambda sel: arr[sel]).kind == "wrong"
    assert compare_raw(arr.astype("f4"), (3, 4), arr.dtype, lambda sel: arr[sel]).detail.startswith("dtype")
    nan = np.array([np.nan, 1.0])
    assert compare_raw(nan, (2,), nan.dtype, lambda sel: nan[sel]).kind == "equal"


def _sleepy(unit: Unit) -> dict[str, object]:
    if unit.id == "hang":
        time.sleep(120)
    if unit.id == "die":
        os._exit(3)
    return {"unit": unit.id, "scan": None, "cells": {"open": {"x": {"kind": "equal"}}}, "na": {}, "notes": []}


def test_pool_timeout_and_dead_worker() -> None:
    units = [Unit(i, "file", "hdf5", ()) for i in ("ok1", "hang", "die", "ok2")]
    got = {r["unit"]: r for r in run_all(units, _sleepy, workers=2, timeout=15)}
    assert set(got) == {"ok1", "hang", "die", "ok2"}
    assert got["hang"]["scan"] == {"kind": "crash", "detail": "timeout (15 s)"}
    assert got["die"]["scan"] == {"kind": "crash", "detail": "worker process died"}
    assert got["ok1"]["cells"] == got["ok2"]["cells"] == {"open": {"x": {"kind": "equal"}}}


def test_series_by_rule(tmp_path: Path) -> None:
    """Files whose names differ in a date form a series along their CF time dimension, checked
    against xr.open_mfdataset."""
    import netCDF4

    for year in (2001, 2000):
        with netCDF4.Dataset(tmp_path / f"tas_day_M_{year}0101-{year}1231.nc", "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("lat", 2)
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t[:] = np.arange(3.0) + 365 * (year - 2000)
            nc.createVariable("tas", "f4", ("time", "lat"))[:] = np.full((3, 2), year, "f4")
    (tmp_path / "other_1.nc").write_bytes((tmp_path / "tas_day_M_20000101-20001231.nc").read_bytes())
    series = [u for u in discover([str(tmp_path)]) if u.kind == "series"]
    assert [(u.concat_dim, [Path(s).name[10:14] for s in u.sources]) for u in series] == [("time", ["2000", "2001"])]
    r = run_unit(series[0])
    assert r["cells"]["open"]["tas"] == {"kind": "equal"}
    assert r["cells"]["xarray"]["tas"] == {"kind": "equal"}, r["cells"]["xarray"]


def test_dates_from_names() -> None:
    assert _dates(["cog_2020.tif", "cog_2019.tif"]) == ("cog_%Y", [1577836800, 1546300800])
    assert _dates(["a_01.tif", "a_02.tif"]) is None  # not a date
    assert _dates(["x_20200101_1.tif", "x_20200101_2.tif"]) is None  # the same date twice


def test_every_reason_documented() -> None:
    """The refusal list in the code and the table in design/conformance.md are the same list."""
    doc = (REPO / "design" / "conformance.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", doc, flags=re.M)
    assert sorted(rows) == sorted(REASONS)
    assert classify("array 'x': totally new reason") is None
