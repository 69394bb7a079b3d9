"""A netCDF3 series of station reports whose files hold different variables (issue 28, item 4):
``engine="refstore"`` equals ``xr.open_mfdataset`` over the files (explicit combine arguments)
variable by variable — names, dims, dtype, values, attrs and the CF encoding xarray moves.

The reports have a one-character flag per record (``S1`` along the record dimension, which
xarray leaves unjoined since other arrays use that dimension), station names (``S1`` joined
along their string length), and variables some files lack (read missing, as ``xr.concat``
fills them); their non-CF attributes (``units`` of a temperature) stay attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import xarray as xr

import refstore
from refstore._netcdf4 import import_netcdf4

if TYPE_CHECKING:
    from pathlib import Path

netCDF4 = import_netcdf4()

COMBINE: dict[str, Any] = {"combine": "nested", "concat_dim": "recNum", "data_vars": "all", "coords": "different",
                           "compat": "equals", "join": "outer", "combine_attrs": "override"}  # fmt: skip


def _chars(values: list[str], n: int) -> np.ndarray[Any, Any]:
    return netCDF4.stringtochar(np.array(values, f"S{n}"))  # type: ignore[no-any-return]


def write_reports(folder: Path, lacking: dict[str, set[int]], n_files: int = 3) -> list[Path]:
    """``n_files`` netCDF3 files of 4 reports each; ``lacking[name]``: the files without ``name``."""
    files = []
    for i in range(n_files):
        p = folder / f"reports_{i}.nc"
        with netCDF4.Dataset(p, "w", format="NETCDF3_CLASSIC") as nc:
            nc.createDimension("recNum", None)
            nc.createDimension("name_strlen", 6)
            nc.createDimension("level", 2)
            t = nc.createVariable("time", "f8", ("recNum",))
            t.units, t[:] = "seconds since 1970-01-01", np.arange(4) + 10.0 * i
            s = nc.createVariable("station", "S1", ("recNum", "name_strlen"))
            s.long_name, s[:] = "station id", _chars(["ABC", "DEFG", "H", f"S{i}"], 6)

            def has(name: str, i: int = i) -> bool:
                return i not in lacking.get(name, set())

            if has("temp"):
                v = nc.createVariable("temp", "f4", ("recNum",), fill_value=np.float32(-999))
                v.units, v[:] = "K", np.array([1, -999, 3, 4]) + i
            if has("wind"):
                v = nc.createVariable("wind", "i2", ("recNum", "level"))
                v.units, v.scale_factor, v[:] = "m/s", np.float32(0.5), np.arange(8).reshape(4, 2) * 0.5 + i
            if has("qc"):
                v = nc.createVariable("qc", "S1", ("recNum",))
                v.units, v.flag_meanings, v[:] = "1", "good bad", np.array([b"g", b"b", b"g", b"x"])
            if has("remark"):
                v = nc.createVariable("remark", "S1", ("recNum", "name_strlen"))
                v.long_name, v[:] = "free text", _chars(["x", "yy", "zzz", f"r{i}"], 6)
            if has("obs_time"):
                v = nc.createVariable("obs_time", "i4", ("recNum",))
                v.units, v.long_name, v[:] = "minutes since 2000-01-01", "observed", np.arange(4) + 60 * i
        files.append(p)
    return files


def _collection(tmp_path: Path, files: list[Path]) -> str:
    uri = str(tmp_path / "col")
    refstore.init(uri)
    rep = refstore.scan(uri, [str(p) for p in files], concat_dim="recNum")
    assert not rep.failed
    return uri


def assert_same_variable(got: xr.Variable, want: xr.Variable, name: str) -> None:
    assert got.dims == want.dims, (name, got.dims, want.dims)
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    g, w = got.values, want.values
    assert g.shape == w.shape, name
    if w.dtype.kind in "fcmM":
        assert np.array_equal(g, w, equal_nan=True), (name, g, w)
    elif w.dtype == object:
        same = [(a == b) or (a != a and b != b) for a, b in zip(g.ravel(), w.ravel(), strict=True)]
        assert all(same), (name, g, w)
    else:
        assert np.array_equal(g, w), (name, g, w)
    assert set(got.attrs) == set(want.attrs), (name, got.attrs, want.attrs)
    for k, v in want.attrs.items():
        assert np.array_equal(np.asarray(got.attrs[k]), np.asarray(v)), (name, k, got.attrs[k], v)
    for k in ("units", "calendar", "scale_factor", "add_offset", "_FillValue", "char_dim_name"):
        assert (k in got.encoding) == (k in want.encoding), (name, k, got.encoding, want.encoding)
        if k in want.encoding:
            a, b = np.asarray(got.encoding[k]), np.asarray(want.encoding[k])
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), (name, k, a, b)


LACKING = [
    {"qc": {1}},
    {"remark": {0}, "temp": {2}},
    {"wind": {1, 2}, "obs_time": {0, 1}, "qc": {0}},
    {"temp": {1}, "wind": {1}, "qc": {1}, "remark": {1}, "obs_time": {1}},
]


@pytest.mark.parametrize("decode_times", [True, False])
@pytest.mark.parametrize("lacking", LACKING, ids=lambda d: "-".join(f"{k}{sorted(v)}" for k, v in d.items()))
def test_station_reports_lacking_variables(tmp_path: Path, lacking: dict[str, set[int]], decode_times: bool) -> None:
    files = write_reports(tmp_path, lacking)
    uri = _collection(tmp_path, files)
    got = xr.open_dataset(uri, engine="refstore", decode_times=decode_times)
    with xr.open_mfdataset(files, engine="netcdf4", decode_times=decode_times, **COMBINE) as mf:
        want = mf.load()
    assert set(got.variables) == set(want.variables)
    for name in want.variables:
        assert_same_variable(got[name].variable, want[name].variable, str(name))
    # the per-file oracle agrees with the multi-file one (the oracle itself is what xarray gives)
    per_file = xr.concat([xr.open_dataset(p, engine="netcdf4", decode_times=decode_times) for p in files],
                         dim="recNum", data_vars="all", join="outer")  # fmt: skip
    for name in want.variables:
        assert_same_variable(got[name].variable, per_file[name].variable, str(name))


def test_unjoined_flag_reads_by_selection(tmp_path: Path) -> None:
    """A one-character array along the record dimension, some files lacking it, read by slices
    and by single reports (an integer index drops the dimension)."""
    files = write_reports(tmp_path, {"qc": {1}})
    uri = _collection(tmp_path, files)
    got = xr.open_dataset(uri, engine="refstore")["qc"]
    with xr.open_mfdataset(files, engine="netcdf4", **COMBINE) as mf:
        want = mf["qc"].load()
    for key in (slice(None), slice(2, 9, 3), 5, 8, -1):
        assert_same_variable(got[key].variable, want[key].variable, f"qc[{key}]")
