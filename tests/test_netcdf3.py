"""netCDF3 (classic, 64-bit offset, 64-bit data): header parsed by refstore, values checked
against netCDF4-python with masking and scaling off."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import refstore
from refstore.fixtures.netcdf3 import write_obs_file, write_obs_series

from ._cli import invoke as run  # in this process: the commands are under test, not the process
from ._oracle import _netcdf4, assert_same
from ._oracle import netcdf3_read as _oracle
from .conftest import netcdf3_files_in_shared

NC3_FILES = netcdf3_files_in_shared()
netCDF4 = _netcdf4()


def _assert_file_equal(col: str, path: Path) -> refstore.Dataset:
    ds = refstore.open(col)
    with netCDF4.Dataset(path) as nc:
        assert set(ds.arrays) == set(nc.variables)
    for name in ds.arrays:
        assert_same(ds[name][...], _oracle(path, name), name)
    return ds


@pytest.mark.skipif(not NC3_FILES, reason="../shared/data is not present")
@pytest.mark.parametrize("path", NC3_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_netcdf3_file_conforms(path: Path, new_collection) -> None:
    col = new_collection()
    rep = refstore.scan(col, [str(path)])
    assert rep.failed == ()
    ds = _assert_file_equal(col, path)
    # references: every record of every record variable is its own range
    with netCDF4.Dataset(path) as nc:
        for name, v in nc.variables.items():
            n = ds.snapshot.count("chunk", f"array = '{name}'")
            is_record = bool(v.dimensions) and nc.dimensions[v.dimensions[0]].isunlimited()
            assert n == (v.shape[0] if is_record else (1 if v.size else 0)), name
    assert refstore.verify(ds.snapshot).mismatched == 0


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"])
def test_generated_formats(tmp_path: Path, new_collection, fmt: str) -> None:
    p = write_obs_file(tmp_path / "obs.nc", start_hour=0, records=4, fmt=fmt)
    col = new_collection()
    refstore.scan(col, [str(p)])
    ds = _assert_file_equal(col, p)
    assert ds["temp"].dtype == np.dtype(">f4") and ds["temp"].chunks == (1, 5)
    assert ds["temp"].attrs["scale_factor"].dtype == np.float32
    assert ds["temp"].fill_value == np.float32(-999.0)
    assert ds["station_name"].dtype == np.dtype("S1")


def test_single_record_variable_has_no_padding(tmp_path: Path, new_collection) -> None:
    p = write_obs_file(tmp_path / "one.nc", start_hour=0, records=7, only_one_record_var=True)
    col = new_collection()
    refstore.scan(col, [str(p)])
    _assert_file_equal(col, p)


def test_series_with_differing_record_counts_and_a_missing_variable(tmp_path: Path, new_collection) -> None:
    files = write_obs_series(tmp_path / "obs", [3, 5, 2, 4], without_wind=(1,))
    col = new_collection()
    rep = refstore.scan(col, [str(tmp_path / "obs")], concat_dim="time")
    assert rep.new == 4 and rep.failed == ()
    ds = refstore.open(col)
    for name in ("time", "temp", "count", "flag"):
        assert_same(ds[name][...], np.concatenate([_oracle(p, name) for p in files]), name)
    assert_same(ds["elevation"][...], _oracle(files[0], "elevation"), "elevation")  # taken once
    wind = ds["wind"][...]
    assert wind.shape == (14,)
    with netCDF4.Dataset(files[0]) as nc:  # the gap: what netCDF reads in a record never written
        v = nc.variables["wind"]
        fill = v.getncattr("_FillValue") if "_FillValue" in v.ncattrs() else netCDF4.default_fillvals[v.dtype.str[1:]]
    gap = np.full(5, fill, _oracle(files[0], "wind").dtype)
    expected = np.concatenate([_oracle(files[0], "wind"), gap, _oracle(files[2], "wind"), _oracle(files[3], "wind")])
    assert_same(wind, expected, "wind")
    info = json.loads(run("-C", col, "info", "--json").stdout)
    assert info["arrays"]["wind"]["absent_in"] == [str(files[1])]
    assert info["arrays"]["temp"]["absent_in"] == []
    assert refstore.verify(ds.snapshot).mismatched == 0


def test_truncated_netcdf3_is_a_failed_source(tmp_path: Path, new_collection) -> None:
    p = write_obs_file(tmp_path / "obs.nc", start_hour=0, records=4)
    bad = tmp_path / "bad.nc"
    bad.write_bytes(p.read_bytes()[:-50])
    col = new_collection()
    rep = refstore.scan(col, [str(tmp_path)])
    assert rep.new == 1 and dict(rep.failed)[str(bad)].startswith(("not a readable netCDF3", "variable"))


def test_damaged_header_fails_alone(tmp_path: Path, new_collection) -> None:
    good = write_obs_file(tmp_path / "good.nc", start_hour=0, records=3)
    raw = bytearray(good.read_bytes())
    bad = tmp_path / "badtype.nc"
    # temp's nc_type (5, float) followed by its vsize (20 bytes) becomes 12, no netCDF type
    patched = raw.replace(b"\x00\x00\x00\x05\x00\x00\x00\x14", b"\x00\x00\x00\x0c\x00\x00\x00\x14", 1)
    assert len(patched) == len(raw) and patched != raw  # one type field changed in place
    bad.write_bytes(bytes(patched))
    col = new_collection()
    rep = refstore.scan(col, [str(tmp_path)])
    assert rep.new == 1 and [s for s, _ in rep.failed] == [str(bad)]
    assert refstore.verify(refstore.open(col).snapshot).mismatched == 0  # incl. the big-endian scalar
