"""Variable-length strings held inline (issue 28, item 7): read as netCDF4-python and h5py read
them (object arrays of ``str``) through ``refstore.open``, ``engine="refstore"`` (as xarray's
netcdf4 engine gives them), ``zarr_store`` and every emitted form that carries them (zarr v2's
object dtype with ``vlen-utf8``, zarr v3's ``string``; flat Parquet and SQLite with the
``vlen-utf8`` codec); GDAL's VRT refuses them by name; above the size cap the scan refuses
them by name."""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest
import xarray as xr

import refstore
from refstore._netcdf4 import import_netcdf4
from refstore.emit import FORMATS, emit
from refstore.errors import UnexpressibleError
from refstore.table.collection import Collection

from ._emit_cases import Case
from .test_hdf5_names import assert_same_view

if TYPE_CHECKING:
    from pathlib import Path

netCDF4 = import_netcdf4()

NAMES = np.array(["alpha", "\u03b2eta", "", "a much longer string, with , and \u00e9"], dtype=object)


def _nc_file(path: Path) -> Path:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", 4)
        nc.createDimension("m", 3)
        v = nc.createVariable("names", str, ("n",))
        v.long_name, v[:] = "station names", NAMES
        w = nc.createVariable("grid", str, ("n", "m"))
        w[:] = np.array([[f"{i}-{j}" * (i + 1) for j in range(3)] for i in range(4)], dtype=object)
        x = nc.createVariable("x", "f4", ("n",))
        x[:] = np.arange(4.0)
        g = nc.createGroup("meta")
        g.createDimension("k", 2)
        g.createVariable("notes", str, ("k",))[:] = np.array(["one", "two"], dtype=object)
    return path


def _h5_file(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("utf8", data=np.array(["x", "\u00fcber", ""], dtype=h5py.string_dtype("utf-8")))
        f.create_dataset("ascii", data=np.array([b"ab", b"", b"cde"], dtype=h5py.string_dtype("ascii")))
        f.create_dataset("scalar", data="one value", dtype=h5py.string_dtype())
        f.create_dataset("chunked", data=np.array([str(i) * i for i in range(50)], dtype=object),
                         dtype=h5py.string_dtype(), chunks=(7,), compression="gzip")  # fmt: skip
    return path


def _scan(tmp_path: Path, path: Path) -> str:
    uri = str(tmp_path / "col")
    refstore.init(uri)
    report = refstore.scan(uri, [str(path)])
    assert not report.unsupported, report.unsupported
    return uri


def _nc_values(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    out = {}
    with netCDF4.Dataset(path) as nc:
        for g, prefix in ((nc, ""), (nc.groups.get("meta"), "meta/")):
            if g is None:
                continue
            for name, v in g.variables.items():
                if v.dtype is str:
                    out[prefix + name] = np.asarray(v[...], dtype=object)
    return out


def _same_strings(got: Any, want: np.ndarray[Any, Any], what: str) -> None:
    g = np.asarray(got)
    assert g.shape == want.shape, (what, g.shape, want.shape)
    assert [str(x) for x in g.ravel()] == [str(x) for x in want.ravel()], what


def test_open_reads_vlen_strings_as_netcdf4_python(tmp_path: Path) -> None:
    path = _nc_file(tmp_path / "v.nc")
    ds = refstore.open(_scan(tmp_path, path))
    want = _nc_values(path)
    assert set(want) == {"names", "grid", "meta/notes"}
    for name, values in want.items():
        got = ds[name][...]
        assert got.dtype == np.dtype(object) and all(type(x) is str for x in got.ravel()), name
        assert np.array_equal(got, values), name
    assert np.array_equal(ds["grid"][1:3, 2], want["grid"][1:3, 2])
    assert ds["grid"][2, 1] == want["grid"][2, 1]
    assert ds["names"].attrs["long_name"] == "station names"
    report = refstore.verify(ds.snapshot)  # the held values against h5py's reading of the file
    assert report.checked == 4 and report.mismatched == 0  # (every chunk: x's too)


def test_open_reads_h5py_strings_as_h5py_decodes_them(tmp_path: Path) -> None:
    """h5py gives vlen strings as bytes (``.asstr()``: text); refstore gives the text, as
    netCDF4-python does, for UTF-8 and ASCII ones, scalar, chunked and compressed."""
    path = _h5_file(tmp_path / "v.h5")
    ds = refstore.open(_scan(tmp_path, path))
    with h5py.File(path) as f:
        for name in ("utf8", "ascii", "scalar", "chunked"):
            want = np.asarray(f[name].asstr()[()], dtype=object)
            got = ds[name][...]
            assert got.dtype == np.dtype(object) and got.shape == want.shape, name
            assert np.array_equal(got, want), name


def test_xarray_view_equals_netcdf4_engine(tmp_path: Path) -> None:
    path = _nc_file(tmp_path / "v.nc")
    uri = _scan(tmp_path, path)
    for group in (None, "meta"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = xr.open_dataset(path, engine="netcdf4", group=group).load()
        got = xr.open_dataset(uri, engine="refstore", group=group)
        assert_same_view(got, want, str(group))
        assert all(got[v].dtype.kind == "U" for v in got.data_vars if v != "x")  # (as the netcdf4 engine)


def test_zarr_store_serves_vlen_strings(tmp_path: Path) -> None:
    import zarr

    from refstore.read.zarr_store import zarr_store

    path = _nc_file(tmp_path / "v.nc")
    uri = _scan(tmp_path, path)
    want = _nc_values(path)
    group = zarr.open_group(zarr_store(uri), mode="r")
    for name, values in want.items():
        arr = group[name]
        assert isinstance(arr, zarr.Array)
        _same_strings(arr[...], values, name)
    got = xr.open_zarr(zarr_store(uri), consolidated=False)
    _same_strings(got["names"].values, want["names"], "xarray over zarr_store")


def _read_form(fmt: str, out: str, case: Case, name: str) -> Any:
    if fmt == "kerchunk-parquet":  # (its reader compares two engines' bytes: object arrays hold pointers)
        from .readers.kerchunk_parquet import _arrays, open_group

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (pandas' deprecation of fastparquet)
            return _arrays(open_group(out, "fastparquet"))[name][...]
    reader = importlib.import_module(f"tests.readers.{fmt.replace('-', '_')}")
    return reader.open_form(out, case)[name][...]


@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet", "icechunk", "parquet", "sqlite"])
def test_forms_carry_vlen_strings(tmp_path: Path, fmt: str) -> None:
    path = _nc_file(tmp_path / "v.nc")
    uri = _scan(tmp_path, path)
    out = str(tmp_path / f"out{FORMATS[fmt]}")
    emit(Collection.open(uri), fmt, out)
    case = Case("vlen", uri, source=str(path))
    for name, values in _nc_values(path).items():
        _same_strings(_read_form(fmt, out, case, name), values, f"{fmt}:{name}")


def test_vrt_refuses_vlen_strings_by_name(tmp_path: Path) -> None:
    path = _nc_file(tmp_path / "v.nc")
    col = Collection.open(_scan(tmp_path, path))
    with pytest.raises(UnexpressibleError, match=r"'grid'|'names'|'meta/notes'"):
        emit(col, "vrt", str(tmp_path / "out.vrt"))


def test_vlen_strings_above_the_cap_are_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from refstore.scan import hdf5

    monkeypatch.setattr(hdf5, "VLEN_INLINE_MAX", 100)
    path = _nc_file(tmp_path / "v.nc")
    uri = str(tmp_path / "col")
    refstore.init(uri)
    report = refstore.scan(uri, [str(path)])
    refused = {a: r for _, a, r in report.unsupported}
    assert set(refused) == {"grid"}  # 4 x 3 strings: more than 100 bytes encoded; the others fit
    assert "variable-length strings of" in refused["grid"] and "held inline up to 100" in refused["grid"]
    assert np.array_equal(refstore.open(uri)["names"][...], _nc_values(path)["names"])
