"""netCDF3 (classic, 64-bit offset, 64-bit data): header parsed by refstore, values checked
against netCDF4-python with masking and scaling off."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import refstore
from refstore._netcdf4 import import_netcdf4
from refstore.fixtures.netcdf3 import write_obs_file, write_obs_series

from ._cli import run
from .conftest import netcdf3_files_in_shared

NC3_FILES = netcdf3_files_in_shared()
netCDF4 = import_netcdf4()


def _oracle(path: Path, name: str) -> np.ndarray:
    with netCDF4.Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        nc.set_always_mask(False)
        return np.asarray(nc.variables[name][...])


def _assert_file_equal(col: str, path: Path) -> refstore.Dataset:
    ds = refstore.open(col)
    with netCDF4.Dataset(path) as nc:
        assert set(ds.arrays) == set(nc.variables)
    for name in ds.arrays:
        got, exp = ds[name][...], _oracle(path, name)
        assert got.shape == exp.shape, name
        assert got.tobytes() == exp.astype(got.dtype).tobytes(), name
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
        exp = np.concatenate([_oracle(p, name) for p in files])
        assert ds[name][...].tobytes() == exp.astype(ds[name].dtype).tobytes(), name
    assert ds["elevation"][...].tolist() == [10, 250, 1200, 3, 77]  # taken once
    wind = ds["wind"][...]
    assert wind.shape == (14,)
    parts = [_oracle(p, "wind") if i != 1 else None for i, p in enumerate(files)]
    assert wind[:3].tobytes() == parts[0].astype(wind.dtype).tobytes()
    fill = ds["wind"].fill_value
    assert np.array_equal(wind[3:8], np.full(5, fill)) and wind[8:10].tobytes() == parts[2].astype(wind.dtype).tobytes()
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
    at = raw.index(b"temp") + 4  # the name is followed by its dimension ids, attributes, then nc_type
    bad = tmp_path / "badtype.nc"
    patched = raw.replace(b"\x00\x00\x00\x05\x00\x00\x00\x14", b"\x00\x00\x00\x0c\x00\x00\x00\x14", 1)
    assert at and patched != raw
    bad.write_bytes(bytes(patched))
    col = new_collection()
    rep = refstore.scan(col, [str(tmp_path)])
    assert rep.new == 1 and [s for s, _ in rep.failed] == [str(bad)]
    assert refstore.verify(refstore.open(col).snapshot).mismatched == 0  # incl. the big-endian scalar
