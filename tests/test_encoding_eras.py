"""Encoding attributes that change along the concat dimension start an era (issue 12, item 2):
``_Unsigned``, ``calendar`` and ``valid_range`` (the list: ``refstore._cf``). Oracles:
``xr.concat`` of ``xr.open_dataset(engine="netcdf4")`` over the files, netCDF4-python's raw
reads and attributes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

import refstore
from refstore._netcdf4 import import_netcdf4
from refstore.emit import emit
from refstore.fixtures.holes import write_holes_series

from ._emit_cases import assert_same
from .test_series_holes import _scan, raw_oracle, same_decoded, xr_oracle

if TYPE_CHECKING:
    from pathlib import Path


def _attr(path: Path, name: str, attr: str) -> Any:
    netCDF4 = import_netcdf4()
    with netCDF4.Dataset(path) as nc:
        return nc.variables[name].getncattr(attr) if attr in nc.variables[name].ncattrs() else None


def _vrt_refuses(uri: str, out: str, name: str) -> None:
    rep = emit(refstore.Collection.open(uri), "vrt", out, skip_unexpressible=True)
    assert name in rep.skipped and "encoding attributes" in rep.skipped[name], rep.skipped


def test_unsigned_in_a_later_file(tmp_path: Path) -> None:
    """The second file marks ``v`` as ``_Unsigned``: 200 there, as netCDF4/xarray read it."""
    values = lambda i, shape: np.array([[1, 2, 3], [-56, 1, 2]][i], "i1").reshape(shape)
    specs: list[dict[str, Any] | None] = [
        {"dtype": "i1", "values": values},
        {"dtype": "i1", "values": values, "attrs": {"_Unsigned": "true"}},
    ]
    wider: list[dict[str, Any] | None] = [{"dtype": "i2", "values": values}, specs[1]]  # eras of other dtypes
    for fmt in ("NETCDF3_CLASSIC", "NETCDF4"):
        files = write_holes_series(tmp_path / fmt, [1, 1], {"v": specs, "w": wider}, fmt=fmt)
        uri = _scan(tmp_path / f"c-{fmt}", files)
        same_decoded(xr.open_dataset(uri, engine="refstore")["w"], xr_oracle(files, "w"))
        want = xr_oracle(files, "v")
        assert want.values.tolist() == [[1, 2, 3], [200, 1, 2]]
        same_decoded(xr.open_dataset(uri, engine="refstore")["v"], want)
        assert np.array_equal(xr.open_zarr(refstore.zarr_store(uri))["v"].values, want.values)
        assert_same(refstore.open(uri)["v"][...], raw_oracle(files, "v"), "raw")
        assert [e["attrs"].get("_Unsigned", {}).get("value") for e in refstore.open(uri)["v"].eras] == [
            _attr(p, "v", "_Unsigned") for p in files
        ]
        _vrt_refuses(uri, str(tmp_path / f"{fmt}.vrt"), "v")


def _stamps(values: Any) -> list[tuple[str, str]]:
    return [(type(v).__name__, str(v)) for v in np.asarray(values).ravel()]


def test_calendar_in_a_later_file(tmp_path: Path) -> None:
    """Day 60 after 2000-01-01 is 2000-03-01 in ``standard`` but 2000-03-02 in ``noleap``: each
    file's values decode with their own calendar."""
    days = lambda i, shape: np.full(shape, 60.0)
    spec = {"dtype": "f8", "values": days}
    specs: list[dict[str, Any] | None] = [
        {**spec, "attrs": {"units": "days since 2000-01-01", "calendar": "standard"}},
        {**spec, "attrs": {"units": "days since 2000-01-01", "calendar": "noleap"}},
    ]
    files = write_holes_series(tmp_path / "data", [1, 1], {"when": specs})
    uri = _scan(tmp_path, files)
    coder = xr.coders.CFDatetimeCoder(use_cftime=True)
    want = xr.concat([xr.open_dataset(p, engine="netcdf4", decode_times=coder) for p in files], dim="time")["when"]
    got = xr.open_dataset(uri, engine="refstore", decode_times=coder)["when"]
    assert _stamps(got.values) == _stamps(want.values)
    assert {s for _, s in _stamps(want.values)} == {"2000-03-01 00:00:00", "2000-03-02 00:00:00"}
    assert len(refstore.open(uri)["when"].eras) == 2
    assert "calendar" in refstore.zarr_store(uri).left_out["when"]
    _vrt_refuses(uri, str(tmp_path / "out.vrt"), "when")


def test_valid_range_in_a_later_file(tmp_path: Path) -> None:
    """netCDF4-python masks outside ``valid_range``: one range per era, each file's own."""
    specs: list[dict[str, Any] | None] = [{"attrs": {"valid_range": np.array([0, 100], "f4")}},
                                          {"attrs": {"valid_range": np.array([0, 10], "f4")}}]  # fmt: skip
    files = write_holes_series(tmp_path / "data", [1, 1], {"v": specs})
    uri = _scan(tmp_path, files)
    v = refstore.open(uri)["v"]
    assert [e["attrs"]["valid_range"]["value"] for e in v.eras] == [_attr(p, "v", "valid_range").tolist()
                                                                   for p in files]  # fmt: skip
    want = xr_oracle(files, "v")
    got = xr.open_dataset(uri, engine="refstore")["v"]
    same_decoded(got, want)
    assert np.array_equal(got.attrs["valid_range"], want.attrs["valid_range"])
    _vrt_refuses(uri, str(tmp_path / "out.vrt"), "v")
