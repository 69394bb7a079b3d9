"""Series rules real archives need: ordering by a CF time when the concat dimension's own
coordinate does not tell files apart (NEMO), ``--order-by``/``--order``, comparing arrays taken
once, and merging files that hold different variables on one grid. Oracle: xarray over the
files through netCDF4 (``open_mfdataset`` with explicit combine arguments)."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

import netCDF4
import numpy as np
import pytest
import xarray as xr

import refstore
from refstore.errors import PlanError

from ._cli import invoke

if TYPE_CHECKING:
    from pathlib import Path

_MONTH = 30 * 86400  # a 360_day month in seconds


def _nemo(path: Path, month: int, *, ny: int = 4, nx: int = 5, lat0: float = -60.0, var: str = "sst") -> Path:
    """A NEMO-like monthly file: ``time_counter`` holds 0 (no units) in every file, the instant
    is in ``time_centered(time_counter)`` (standard_name time, 360_day calendar)."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time_counter", None)
        nc.createDimension("y", ny)
        nc.createDimension("x", nx)
        tc = nc.createVariable("time_counter", "f8", ("time_counter",))
        tc[:] = [0.0]
        t = nc.createVariable("time_centered", "f8", ("time_counter",))
        t.standard_name = "time"
        t.units = "seconds since 1900-01-01 00:00:00"
        t.calendar = "360_day"
        t[:] = [(month - 1) * _MONTH + _MONTH / 2]
        lat = nc.createVariable("nav_lat", "f4", ("y", "x"))
        lat[:] = lat0 + np.arange(ny * nx, dtype="f4").reshape(ny, nx)
        sst = nc.createVariable(var, "f4", ("time_counter", "y", "x"), zlib=True, fill_value=np.float32(1e20))
        sst.coordinates = "time_centered nav_lat"
        sst[:] = (100 * month + len(var) + np.arange(ny * nx, dtype="f4")).reshape(1, ny, nx)
    return path


def _files(tmp_path: Path, names_months: list[tuple[str, int]]) -> dict[int, Path]:
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    return {m: _nemo(d / name, m) for name, m in names_months}


def _oracle(files: list[Path], dim: str) -> xr.Dataset:
    cf = xr.coders.CFDatetimeCoder(use_cftime=True)
    return xr.open_mfdataset(files, combine="nested", concat_dim=dim, engine="netcdf4", decode_times=cf,
                             data_vars="all", coords="different", compat="no_conflicts", join="outer")  # fmt: skip


def _view(col: str) -> xr.Dataset:
    return xr.open_dataset(col, engine="refstore", decode_times=xr.coders.CFDatetimeCoder(use_cftime=True))


def _same(got: xr.Dataset, want: xr.Dataset, names: list[str]) -> None:
    for n in names:
        g, w = got[n], want[n]
        assert g.dims == w.dims, n
        assert g.dtype == w.dtype, n
        np.testing.assert_array_equal(g.values, w.values, err_msg=n)


def test_nemo_series_is_ordered_by_its_cf_time(tmp_path: Path, new_collection) -> None:
    # names sort in another order than the months: only time_centered tells the right one
    files = _files(tmp_path, [("c_first.nc", 1), ("a_second.nc", 2), ("b_third.nc", 3)])
    col = new_collection()
    rep = refstore.scan(col, [str(files[2]), str(files[3]), str(files[1])], concat_dim="time_counter")
    assert rep.committed and rep.ordered_by == "time_centered"
    got, want = _view(col), _oracle([files[1], files[2], files[3]], "time_counter")
    _same(got, want, ["sst", "time_centered", "time_counter"])
    assert [t.month for t in got["time_centered"].values] == [1, 2, 3]
    assert got["time_centered"].values[0].calendar == "360_day"


def test_nemo_series_on_the_command_line(tmp_path: Path, new_collection) -> None:
    files = _files(tmp_path, [("m2.nc", 2), ("m1.nc", 1), ("m3.nc", 3)])
    col = new_collection()
    r = invoke("-C", col, "scan", str(files[1].parent), "--concat-dim", "time_counter")
    assert r.returncode == 0, r.stderr
    assert "ordered by the CF time 'time_centered'" in r.stderr
    _same(_view(col), _oracle([files[1], files[2], files[3]], "time_counter"), ["sst", "time_centered"])


def test_nemo_grid_files_of_each_month_merge_and_concatenate(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    grid = {(m, v): _nemo(d / f"m{m}_{v}.nc", m, var=v) for m in (2, 1) for v in ("sst", "uo")}
    col = new_collection()
    rep = refstore.scan(col, [str(d)], concat_dim="time_counter")
    assert rep.ordered_by == "time_centered"
    cf = xr.coders.CFDatetimeCoder(use_cftime=True)
    nested = [[xr.open_dataset(grid[(m, v)], engine="netcdf4", decode_times=cf) for v in ("sst", "uo")] for m in (1, 2)]
    want = xr.combine_nested(nested, concat_dim=["time_counter", None], data_vars="all", coords="different",
                             compat="no_conflicts", join="outer")  # fmt: skip
    _same(_view(col), want, ["sst", "uo", "time_centered", "time_counter"])


def test_files_holding_the_same_instant_are_still_refused_without_a_lossy_hint(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    _nemo(d / "a.nc", 1)
    _nemo(d / "a_copy.nc", 1)
    col = new_collection()
    v0 = refstore.Collection.open(col).latest_version
    r = invoke("-C", col, "scan", str(d), "--concat-dim", "time_counter")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "a.nc" in line and "a_copy.nc" in line and "\n" not in line
    # the first fix offered keeps every file (an order); --prefer only "if one replaces the other"
    assert line.index("--order-by") < line.index("--prefer")
    assert "if one replaces the other" in line
    assert refstore.Collection.open(col).latest_version == v0


def test_order_by_names_a_variable_and_is_recorded(tmp_path: Path, new_collection) -> None:
    files = _files(tmp_path, [("z1.nc", 1), ("y2.nc", 2)])
    col = new_collection()
    rep = refstore.scan(col, [str(files[2]), str(files[1])], concat_dim="time_counter", order_by="time_centered")
    assert rep.ordered_by == "time_centered"
    assert refstore.Collection.open(col).snapshot().config()["order"] == "by:time_centered"
    # a rescan adding a month applies the recorded rule
    files[3] = _nemo(tmp_path / "data" / "x3.nc", 3)
    rep = refstore.scan(col, [str(files[3])])
    assert rep.committed and rep.ordered_by == "time_centered"
    _same(_view(col), _oracle([files[1], files[2], files[3]], "time_counter"), ["sst", "time_centered"])
    with pytest.raises(PlanError, match=r"--order-by nothere: no numeric 1-D variable 'nothere'"):
        refstore.scan(col, [str(files[1])], order_by="nothere")


def test_order_name_and_given(tmp_path: Path, new_collection) -> None:
    files = _files(tmp_path, [("b.nc", 1), ("a.nc", 2), ("c.nc", 3)])
    by_name = new_collection("by_name")
    rep = refstore.scan(by_name, [str(files[3]), str(files[1]), str(files[2])], concat_dim="time_counter", order="name")
    assert rep.ordered_by == "name"
    _same(_view(by_name), _oracle([files[2], files[1], files[3]], "time_counter"), ["sst", "time_centered"])
    given = new_collection("given")
    r = invoke("-C", given, "scan", str(files[3]), str(files[1]), str(files[2]), "--concat-dim", "time_counter",
               "--order", "given", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ordered_by"] == "given"
    _same(_view(given), _oracle([files[3], files[1], files[2]], "time_counter"), ["sst", "time_centered"])
    bad = invoke("-C", given, "scan", str(files[1]), "--order", "sideways")
    assert bad.returncode == 2 and "--order 'sideways'" in bad.stderr


# ------------------------------------------------------------------ arrays taken once


def _daily(path: Path, day: int, lat: list[float], *, mask: np.ndarray | None = None) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", len(lat))
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = [day]
        la = nc.createVariable("lat", "f8", ("lat",))
        la.units = "degrees_north"
        la[:] = lat
        v = nc.createVariable("t2m", "f4", ("time", "lat"))
        v[:] = np.arange(len(lat), dtype="f4")[None, :] + day
        if mask is not None:
            nc.createDimension("y", mask.shape[0])
            nc.createDimension("x", mask.shape[1])
            m = nc.createVariable("mask", mask.dtype, ("y", "x"))
            m[:] = mask
    return path


def test_coordinates_taken_once_are_compared(tmp_path: Path, new_collection) -> None:
    a = _daily(tmp_path / "d0.nc", 0, [0, 1, 2, 3])
    b = _daily(tmp_path / "d1.nc", 1, [1, 2, 3, 4])
    col = new_collection()
    v0 = refstore.Collection.open(col).latest_version
    r = invoke("-C", col, "scan", str(a), str(b), "--concat-dim", "time")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "'lat'" in line and "d0.nc" in line and "d1.nc" in line and "values differ" in line
    assert refstore.Collection.open(col).latest_version == v0
    # the same coordinates in both: one series, equal to xarray over the files
    c = _daily(tmp_path / "d2.nc", 2, [0, 1, 2, 3])
    rep = refstore.scan(col, [str(a), str(c)], concat_dim="time")
    assert rep.committed
    _same(xr.open_dataset(col, engine="refstore"), xr.open_mfdataset([a, c], combine="nested", concat_dim="time",
                                                                      engine="netcdf4"), ["t2m", "lat", "time"])
    # a day appended later (the append path) with other latitudes is refused too
    with pytest.raises(PlanError, match=r"array 'lat' is taken once .* values differ between .*d0\.nc and .*d1\.nc"):
        refstore.scan(col, [str(b)])


def test_large_arrays_taken_once_are_compared_by_their_chunks(tmp_path: Path, new_collection) -> None:
    big = np.zeros((1100, 1100), "f4")  # 4.8 MB: past the values digest, compared by stored chunks
    other = big.copy()
    other[-1, -1] = 1.0
    a = _daily(tmp_path / "d0.nc", 0, [0, 1], mask=big)
    b = _daily(tmp_path / "d1.nc", 1, [0, 1], mask=other)
    c = _daily(tmp_path / "d2.nc", 2, [0, 1], mask=big)
    col = new_collection()
    with pytest.raises(PlanError, match=r"array 'mask' is taken once .* stored chunks differ"):
        refstore.scan(col, [str(a), str(b)], concat_dim="time")
    assert refstore.scan(col, [str(a), str(c)], concat_dim="time").committed


# ------------------------------------------------------------------ one variable per file


def _one_variable(path: Path, name: str, lat: list[float], days: list[int]) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", len(lat))
        nc.createDimension("bnds", 2)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.bounds = "time_bnds"
        t[:] = days
        tb = nc.createVariable("time_bnds", "f8", ("time", "bnds"))
        tb[:] = np.array([[d, d + 1] for d in days], "f8")
        la = nc.createVariable("lat", "f8", ("lat",))
        la[:] = lat
        v = nc.createVariable(name, "f4", ("time", "lat"), zlib=True)
        v.units = "K" if name == "tas" else "kg m-2 s-1"
        v[:] = np.arange(len(days) * len(lat), dtype="f4").reshape(len(days), len(lat)) * (2 if name == "pr" else 1)
    return path


def test_files_holding_different_variables_on_one_grid_merge(tmp_path: Path, new_collection) -> None:
    tas = _one_variable(tmp_path / "tas.nc", "tas", [10, 20, 30], [0, 1])
    pr = _one_variable(tmp_path / "pr.nc", "pr", [10, 20, 30], [0, 1])
    col = new_collection()
    r = invoke("-C", col, "scan", str(tas), str(pr))
    assert r.returncode == 0, r.stderr
    got, want = xr.open_dataset(col, engine="refstore"), xr.open_mfdataset(
        [tas, pr], engine="netcdf4", combine="by_coords", compat="no_conflicts", join="outer", data_vars="all",
        coords="different",
    )
    assert set(got.data_vars) == set(want.data_vars) == {"tas", "pr", "time_bnds"}
    _same(got, want, ["tas", "pr", "lat", "time", "time_bnds"])
    assert got["pr"].attrs["units"] == want["pr"].attrs["units"]
    # another grid: refused naming both files and the array
    other = _one_variable(tmp_path / "ua.nc", "ua", [11, 21, 31], [0, 1])
    r = invoke("-C", new_collection("other"), "scan", str(tas), str(other))
    assert r.returncode == 2
    assert "'lat'" in r.stderr and "tas.nc" in r.stderr and "ua.nc" in r.stderr


def test_cmip6_series_of_two_models_is_refused_one_model_reads_as_xarray(shared_data: Path, new_collection) -> None:
    zoo = shared_data / "zoo" / "pypi-esmvaltool-sample-data"
    fgoals = sorted(zoo.glob("ta_Amon_FGOALS-g3_historical_r1i1p1f1_gn_19[5-7]*.nc"))
    e3sm = zoo / "ta_Amon_E3SM-1-1-ECA_historical_r1i1p1f1_gr_195001-195912.nc"
    if len(fgoals) != 3 or not e3sm.is_file():
        pytest.skip("the zoo's CMIP6 sample series are not present")
    # the same shapes, calendar and time units, other latitudes: E3SM's 1950s then FGOALS-g3's
    # 1960s is not one series (main served FGOALS-g3's decade on E3SM's latitudes)
    with pytest.raises(PlanError, match=r"array 'lat' is taken once .* values differ between .*E3SM.*FGOALS-g3"):
        refstore.scan(new_collection("mixed"), [str(fgoals[1]), str(e3sm)], concat_dim="time")
    col = new_collection()
    assert refstore.scan(col, [str(p) for p in reversed(fgoals)], concat_dim="time").committed
    cf = xr.coders.CFDatetimeCoder(use_cftime=True)
    got = xr.open_dataset(col, engine="refstore", decode_times=cf)
    want = xr.open_mfdataset(fgoals, combine="nested", concat_dim="time", engine="netcdf4", data_vars="minimal",
                             coords="minimal", compat="override", join="exact", decode_times=cf)  # fmt: skip
    _same(got, want, ["ta", "time", "time_bnds", "lat", "lon", "plev"])


def test_a_series_of_one_variable_per_file_merges_and_concatenates(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "cmor"
    d.mkdir()
    files = []
    for year, days in ((2001, [365, 366]), (2000, [0, 1])):  # given out of order
        for name in ("tas", "pr"):
            files.append(_one_variable(d / f"{name}_{year}.nc", name, [10, 20, 30], days))
    col = new_collection()
    r = invoke("-C", col, "scan", str(d), "--concat-dim", "time", "--json")
    assert r.returncode == 0, r.stderr
    got = xr.open_dataset(col, engine="refstore")
    want = xr.open_mfdataset(sorted(files), engine="netcdf4", combine="by_coords", compat="no_conflicts",
                             join="outer", data_vars="all", coords="different")  # fmt: skip
    assert set(got.data_vars) == set(want.data_vars) == {"tas", "pr", "time_bnds"}
    _same(got, want, ["tas", "pr", "time", "time_bnds", "lat"])
    # one step's files that disagree on their time bounds are not one step: refused, not merged
    bad = tmp_path / "bad_step"
    bad.mkdir()
    _one_variable(bad / "tas.nc", "tas", [10, 20, 30], [0, 1])
    odd = _one_variable(bad / "pr.nc", "pr", [10, 20, 30], [0, 1])
    with netCDF4.Dataset(odd, "a") as nc:
        nc["time_bnds"][0, 1] = 0.5
    r = invoke("-C", new_collection("bad"), "scan", str(bad), "--concat-dim", "time")
    assert r.returncode == 2 and "same 'time' coordinate" in r.stderr


def test_grib_level_sets_that_differ_are_refused(tmp_path: Path, new_collection) -> None:
    pytest.importorskip("eccodes")
    pytest.importorskip("cfgrib")
    from refstore.fixtures.grib import write_grib

    day1 = write_grib(tmp_path / "fc_20240101.grib2", date=dt.date(2024, 1, 1), levels=(850, 500))
    day2 = write_grib(tmp_path / "fc_20240102.grib2", date=dt.date(2024, 1, 2), levels=(700, 500), seed=1)
    col = new_collection()
    # main served day 2's 700 hPa field as 850 hPa: the level set is taken once, from day 1
    with pytest.raises(PlanError, match=r"array 'isobaricInhPa' is taken once .* values differ between .*fc_20240101"):
        refstore.scan(col, [str(day1), str(day2)], concat_dim="time")
    same = write_grib(tmp_path / "fc_20240103.grib2", date=dt.date(2024, 1, 3), levels=(850, 500), seed=2)
    assert refstore.scan(col, [str(day1), str(same)], concat_dim="time").committed
    got = xr.open_dataset(col, engine="refstore")
    want = xr.open_dataset(same, engine="cfgrib", backend_kwargs={"indexpath": ""})
    np.testing.assert_array_equal(got["isobaricInhPa"].values, want["isobaricInhPa"].values)
    np.testing.assert_array_equal(got["t"].values[1], want["t"].values)
