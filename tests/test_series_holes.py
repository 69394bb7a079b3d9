"""Series whose variables are missing from some files (issue 12, items 0, 1 and 8): every path
places a variable where its files put it, and reads missing where xarray over the files does.

Oracles: netCDF4-python over each file (raw values, masking off; a file lacking the variable
contributes the variable's fill value: its ``_FillValue``, else netCDF's default for the type),
and ``xr.concat`` of ``xr.open_dataset(engine="netcdf4")`` over the files for the decoded paths.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import xarray as xr

import refstore
from refstore._netcdf4 import import_netcdf4
from refstore.emit import FORMATS, emit
from refstore.fixtures.holes import write_holes_series
from refstore.table.hold import HoldSelection, hold

from ._emit_cases import Case, assert_same

if TYPE_CHECKING:
    from pathlib import Path

READERS: dict[str, Any] = {}
for _fmt in FORMATS:
    with contextlib.suppress(ModuleNotFoundError):
        READERS[_fmt] = importlib.import_module(f"tests.readers.{_fmt.replace('-', '_')}")

# (name, present in which of 4 files of 2 records each)
WHERE = {"start": (2, 3), "middle": (0, 3), "end": (0, 1), "only-third": (2,)}


def raw_oracle(files: list[Path], name: str) -> np.ndarray[Any, Any]:
    """netCDF4-python's raw values of ``name`` in each file, concatenated along time; a file
    lacking it gives the variable's fill value over its records."""
    netCDF4 = import_netcdf4()
    parts: list[np.ndarray[Any, Any] | int] = []
    dtype, fill, other = None, None, None
    for p in files:
        with netCDF4.Dataset(p) as nc:
            n = len(nc.dimensions["time"])
            if name not in nc.variables:
                parts.append(n)
                continue
            v = nc.variables[name]
            v.set_auto_maskandscale(False)
            parts.append(np.asarray(v[...]))
            if dtype is None:
                dtype, other = np.dtype(v.dtype), v.shape[1:]
                key = "S1" if dtype.kind == "S" else f"{dtype.kind}{dtype.itemsize}"
                fill = v.getncattr("_FillValue") if "_FillValue" in v.ncattrs() else netCDF4.default_fillvals[key]
    assert dtype is not None and other is not None
    return np.concatenate([np.full((p, *other), fill, dtype) if isinstance(p, int) else p for p in parts])


def xr_oracle(files: list[Path], name: str) -> xr.DataArray:
    return xr.concat([xr.open_dataset(p, engine="netcdf4") for p in files], dim="time")[name]


def same_decoded(got: xr.DataArray | np.ndarray[Any, Any], want: xr.DataArray) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    assert g.shape == w.shape
    if w.dtype.kind in "fc":
        assert np.array_equal(g, w, equal_nan=True), (g, w)
    elif w.dtype == object:
        assert all((a is b) or (a == b) or (a != a and b != b) for a, b in zip(g.ravel(), w.ravel(), strict=True))
    else:
        assert np.array_equal(g, w)


def _scan(tmp_path: Path, files: list[Path]) -> str:
    uri = str(tmp_path / "col")
    refstore.init(uri)
    rep = refstore.scan(uri, [str(p) for p in files], concat_dim="time")
    assert not rep.failed
    return uri


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
@pytest.mark.parametrize("where", sorted(WHERE))
def test_missing_variable_is_placed_where_its_files_are(tmp_path: Path, fmt: str, where: str) -> None:
    present = WHERE[where]
    spec: dict[str, Any] = {"fill_value": np.float32(-999.0)}
    files = write_holes_series(tmp_path / "data", [2, 2, 2, 2], {"v": [spec if i in present else None
                                                                          for i in range(4)]}, fmt=fmt)  # fmt: skip
    uri = _scan(tmp_path, files)
    want = raw_oracle(files, "v")
    assert_same(refstore.open(uri)["v"][...], want, "direct")
    assert_same(refstore.open(uri)["v"][1:7:2, 1:], want[1:7:2, 1:], "direct, strided")
    same_decoded(xr.open_dataset(uri, engine="refstore")["v"], xr_oracle(files, "v"))
    same_decoded(xr.open_zarr(refstore.zarr_store(uri))["v"], xr_oracle(files, "v"))
    assert refstore.verify(refstore.open(uri).snapshot).mismatched == 0


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_every_form_places_a_missing_variable(tmp_path: Path, fmt: str) -> None:
    """Every emitted form, reopened by its own reader, equals the raw oracle (fill where a file
    lacks the variable), for a variable missing at the start, in the middle and at the end."""
    vs = {f"v_{w.replace('-', '_')}": [{"fill_value": np.float32(-9.0)} if i in p else None for i in range(4)]
          for w, p in WHERE.items()}  # fmt: skip
    files = write_holes_series(tmp_path / "data", [2, 2, 2, 2], vs, fmt=fmt)
    uri = _scan(tmp_path, files)
    case = Case(f"holes-{fmt}", uri)
    col = refstore.Collection.open(uri)
    for form, reader in sorted(READERS.items()):
        out = str(tmp_path / f"out.{form}")
        rep = emit(col, form, out)
        assert not rep.skipped, (form, rep.skipped)
        arrays = reader.open_form(out, case)
        for name in vs:
            assert_same(np.asarray(arrays[name][...]), raw_oracle(files, name), f"{form}:{name}")


def test_first_holder_off_the_chunk_grid(tmp_path: Path) -> None:
    """The first file holding ``v`` starts at record 3 with chunks of 2 records: an era from 3
    is recorded, everything before it reads as fill; zarr forms refuse it by name, the others
    place it."""
    spec: dict[str, Any] = {"fill_value": np.float32(-1.0), "chunk": 2}
    files = write_holes_series(tmp_path / "data", [3, 2, 2], {"v": [None, spec, spec]})
    uri = _scan(tmp_path, files)
    want = raw_oracle(files, "v")
    v = refstore.open(uri)["v"]
    assert [(e["start"], e["stop"]) for e in v.eras] == [(3, 7)]
    assert_same(v[...], want, "direct")
    assert_same(v[2:5], want[2:5], "across the start of the era")
    same_decoded(xr.open_dataset(uri, engine="refstore")["v"], xr_oracle(files, "v"))
    same_decoded(xr.open_zarr(refstore.zarr_store(uri))["v"], xr_oracle(files, "v"))
    assert refstore.verify(refstore.open(uri).snapshot).mismatched == 0
    col = refstore.Collection.open(uri)
    case = Case("off-grid", uri)
    for form, reader in sorted(READERS.items()):
        out = str(tmp_path / f"out.{form}")
        rep = emit(col, form, out, skip_unexpressible=True)
        if "v" in rep.skipped:
            assert form in ("kerchunk-json", "kerchunk-parquet", "sqlite", "icechunk"), form
            assert "era" in rep.skipped["v"]
            continue
        assert_same(np.asarray(reader.open_form(out, case)["v"][...]), want, form)


def test_hold_takes_the_chunks_of_the_files_holding_the_window(tmp_path: Path) -> None:
    spec: dict[str, Any] = {"fill_value": np.float32(-999.0)}
    files = write_holes_series(tmp_path / "data", [2, 2, 2, 2], {"v": [None, None, spec, spec]})
    uri = _scan(tmp_path, files)
    want = raw_oracle(files, "v")[4:6]
    col = refstore.Collection.open(uri)
    rep = hold(col, HoldSelection(arrays=("v",), window=(slice(4, 6),)))
    assert rep.chunks == 2  # records 4 and 5: file 2 (one chunk per record)
    snap = refstore.open(uri).snapshot
    held = snap.ds.to_table(columns=["source"], filter="kind = 'chunk' AND held_at >= 0").column("source")
    assert set(held.to_pylist()) == {str(files[2])}
    files[2].write_bytes(b"")  # the held bytes are read, not the (now empty) source
    assert_same(refstore.open(uri)["v"][4:6], want, "held")


def test_old_keys_are_repaired_by_a_rescan(tmp_path: Path) -> None:
    """Collections written before the fix keyed a variable absent from the first files from its
    first holder (g = k): a rescan finds such rows and re-keys them in one version."""
    spec: dict[str, Any] = {"fill_value": np.float32(-999.0)}
    files = write_holes_series(tmp_path / "data", [2, 2, 2, 2], {"v": [None, None, spec, spec]})
    uri = _scan(tmp_path, files)
    import lance

    ds = lance.dataset(uri)
    ds.update({"g0": "g0 - 4"}, where="kind = 'chunk' AND array = 'v'")  # what the old code wrote
    assert not np.array_equal(refstore.open(uri)["v"][...], raw_oracle(files, "v"))
    rep = refstore.scan(uri, [str(p) for p in files])
    assert rep.committed
    assert_same(refstore.open(uri)["v"][...], raw_oracle(files, "v"), "after the rescan")
    assert not refstore.scan(uri, [str(p) for p in files]).committed


def test_packing_eras_after_files_lacking_the_array(tmp_path: Path) -> None:
    """Eras of other scale factors, the array absent from the first file: the leading records
    are missing (NaN) through xarray and the zarr store, as xarray over the files gives them."""
    def packed(scale: float) -> dict[str, Any]:
        return {"dtype": "i2", "fill_value": np.int16(-1), "attrs": {"scale_factor": np.float32(scale)}}

    files = write_holes_series(tmp_path / "data", [2, 2, 2], {"v": [None, packed(0.1), packed(0.01)]})
    uri = _scan(tmp_path, files)
    assert len(refstore.open(uri)["v"].eras) == 2
    want = xr_oracle(files, "v")
    same_decoded(xr.open_dataset(uri, engine="refstore")["v"], want)
    same_decoded(xr.open_dataset(uri, engine="refstore")["v"][1:5:3], want[1:5:3])
    same_decoded(xr.open_zarr(refstore.zarr_store(uri))["v"], want)


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_gaps_without_fill_value_read_missing(tmp_path: Path, fmt: str) -> None:
    """Variables without ``_FillValue`` (float, int16, char) missing from the middle file: NaN
    (in the dtype ``xr.concat`` promotes to) through xarray, the zarr store for numbers; the
    raw forms read netCDF's default fill there (the VRT through its NoDataValue, not 0)."""
    vs: dict[str, list[dict[str, Any] | None]] = {
        "f": [{}, None, {}],
        "i": [{"dtype": "i2"}, None, {"dtype": "i2"}],
        "c": [{"dtype": "S1"}, None, {"dtype": "S1"}],
    }
    files = write_holes_series(tmp_path / "data", [2, 2, 2], vs, fmt=fmt)
    uri = _scan(tmp_path, files)
    got = xr.open_dataset(uri, engine="refstore")
    for name in vs:
        same_decoded(got[name], xr_oracle(files, name))
        assert_same(refstore.open(uri)[name][...], raw_oracle(files, name), name)
    same_decoded(got["c"][1:4], xr_oracle(files, "c")[1:4])
    zs = refstore.zarr_store(uri)
    assert {"f", "i"} <= set(zs.blocks)  # unpacked (holes) and in blocks of small chunks
    store = xr.open_zarr(zs)
    for name in ("f", "i"):
        same_decoded(store[name], xr_oracle(files, name))
        same_decoded(store[name][1:5], xr_oracle(files, name)[1:5])
    col = refstore.Collection.open(uri)
    case = Case(f"gaps-{fmt}", uri)
    for form, reader in sorted(READERS.items()):
        out = str(tmp_path / f"out.{form}")
        rep = emit(col, form, out, skip_unexpressible=True)
        arrays = reader.open_form(out, case)
        for name in vs:
            if name in rep.skipped:
                assert form == "vrt" and name == "c", (form, name, rep.skipped[name])  # no GDAL string type
                continue
            assert_same(np.asarray(arrays[name][...]), raw_oracle(files, name), f"{form}:{name}")


def test_xarray_over_zarr_forms_reads_gaps_missing(tmp_path: Path) -> None:
    """xarray over the kerchunk and Icechunk forms gives the sources lacking a number array
    (without ``_FillValue``) as missing, as xarray over the files: the forms declare the fill."""
    import warnings

    from .readers.icechunk import open_repo

    vs: dict[str, list[dict[str, Any] | None]] = {"f": [{}, None, {}], "i": [{"dtype": "i2"}, None, {"dtype": "i2"}]}
    files = write_holes_series(tmp_path / "data", [2, 2, 2], vs)
    uri = _scan(tmp_path, files)
    col = refstore.Collection.open(uri)
    emit(col, "kerchunk-json", str(tmp_path / "k.json"))
    emit(col, "icechunk", str(tmp_path / "k.icechunk"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        via = {
            "kerchunk": xr.open_dataset("reference://", engine="zarr", storage_options={
                "fo": str(tmp_path / "k.json"), "remote_protocol": "file"}, consolidated=False, zarr_format=2),
            "icechunk": xr.open_zarr(open_repo(str(tmp_path / "k.icechunk")).readonly_session(branch="main").store,
                                     consolidated=False, zarr_format=3),
        }  # fmt: skip
        for name in vs:
            want = xr_oracle(files, name)
            for form, ds in via.items():
                got = ds[name].values
                assert np.array_equal(got, want.values, equal_nan=True), (form, name, got)


def test_scattered_holders_of_different_record_counts(tmp_path: Path) -> None:
    """The issue's shape: a variable in files 3, 6 and 9 of 10 netCDF3 files of different record
    counts lands where those files are, not the length of files 1-2 early."""
    records = [3, 2, 4, 1, 2, 5, 1, 3, 2, 2]
    spec: dict[str, Any] = {"fill_value": np.float32(-5.0)}
    files = write_holes_series(tmp_path / "data", records, {"v": [spec if i in (2, 5, 8) else None for i in range(10)]},
                               fmt="NETCDF3_64BIT_OFFSET")  # fmt: skip
    uri = _scan(tmp_path, files)
    want = raw_oracle(files, "v")
    assert_same(refstore.open(uri)["v"][...], want, "direct")
    assert_same(refstore.open(uri)["v"][5:12], want[5:12], "a window")
    same_decoded(xr.open_dataset(uri, engine="refstore")["v"], xr_oracle(files, "v"))
    assert refstore.verify(refstore.open(uri).snapshot).mismatched == 0


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_char_fill_value_fills_a_file_lacking_the_variable(tmp_path: Path, fmt: str) -> None:
    """A char variable with ``_FillValue`` 'x' missing from the middle file: the raw read gives
    'x' there (netCDF4-python's ``_FillValue``; netCDF3 char attributes are text in the header),
    and xarray, which masks it, gives what ``xr.open_mfdataset`` over the files gives."""
    spec: dict[str, Any] = {"dtype": "S1", "fill_value": b"x"}
    files = write_holes_series(tmp_path / "data", [2, 2, 2], {"c": [spec, None, spec]}, fmt=fmt)
    uri = _scan(tmp_path, files)
    want = raw_oracle(files, "c")
    assert want[2:4].tobytes() == b"x" * 8  # the oracle's own fill, not NUL
    assert_same(refstore.open(uri)["c"][...], want, "direct")
    with xr.open_mfdataset(files, combine="nested", concat_dim="time") as mf:
        same_decoded(xr.open_dataset(uri, engine="refstore")["c"], mf["c"].load())
