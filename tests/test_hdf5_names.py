"""Names and dimensions of HDF5 datasets as netCDF-C gives them, and datasets reached through
links (issue 28, items 5 and 9).

Oracles: netCDF4-python (netCDF-C) for variable and dimension names, ``xr.open_dataset(f,
engine="netcdf4")`` for the whole xarray view (names, dims, dtypes, values, attributes), and h5py
for the links a file holds and the values behind them.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest
import xarray as xr

import refstore
from refstore._netcdf4 import import_netcdf4
from refstore.scan.hdf5 import HDF5Scanner

from ._netcdf_names import netcdf_dims
from .conftest import SHARED_DATA

if TYPE_CHECKING:
    from pathlib import Path

netCDF4 = import_netcdf4()

ZOO_DIRS = ("pypi-netcdf4", "pypi-h5py", "debian-xarray", "pypi-cf-python", "pypi-esmvaltool-sample-data")
# (PyTables' files crash netCDF-C's libhdf5 next to h5py's in one process: not oracles here)


def _hdf5_files() -> list[Path]:
    out = []
    for d in ZOO_DIRS:
        folder = SHARED_DATA / "zoo" / d
        if folder.is_dir():
            out += [p for p in sorted(folder.rglob("*")) if p.is_file() and p.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"]
    return out


ZOO = _hdf5_files()


def _collection(tmp_path: Path, path: Path) -> str:
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(path)])
    return uri


def assert_same_view(got: xr.Dataset, want: xr.Dataset, what: str) -> None:
    """The same variables under the same names and dims, dtypes, values and attributes."""
    assert sorted(map(str, got.variables)) == sorted(map(str, want.variables)), what
    assert dict(got.sizes) == dict(want.sizes), what
    for name in want.variables:
        a, b = got[name].variable, want[name].variable
        assert a.dims == b.dims, (what, name, a.dims, b.dims)
        assert a.dtype == b.dtype, (what, name, a.dtype, b.dtype)
        va, vb = a.values, b.values
        if vb.dtype.kind in "fcmM":
            assert np.array_equal(va, vb, equal_nan=True), (what, name)
        else:
            assert np.array_equal(va, vb), (what, name)
        assert set(a.attrs) == set(b.attrs), (what, name, a.attrs, b.attrs)
        for k, v in b.attrs.items():
            x, y = np.asarray(a.attrs[k]), np.asarray(v)
            assert np.array_equal(x, y, equal_nan=y.dtype.kind in "fc"), (what, name, k)


def _xr_netcdf4(path: Path, group: str | None = None) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_dataset(path, engine="netcdf4", group=group).load()


def test_non_coordinate_variable_named_like_a_dimension(tmp_path: Path) -> None:
    """netCDF-4 stores a variable named like a dimension it does not use as ``_nc4_non_coord_<name>``:
    netCDF-C (and refstore) name it without the prefix."""
    path = tmp_path / "nc.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        nc.createDimension("y", 4)
        v = nc.createVariable("x", "f4", ("y",))  # named x, along y
        v.units, v[:] = "m", np.arange(4.0)
        w = nc.createVariable("w", "i2", ("y", "x"))
        w[:] = np.arange(12).reshape(4, 3)
    with h5py.File(path) as f:
        assert "_nc4_non_coord_x" in f  # the case really is in the file
    got = xr.open_dataset(_collection(tmp_path, path), engine="refstore")
    assert_same_view(got, _xr_netcdf4(path), path.name)
    assert got["x"].dims == ("y",)


def test_an_axis_with_two_scales_takes_netcdf_cs_pick(tmp_path: Path) -> None:
    """Two dimension scales attached to one axis: netCDF-C keeps the last one attached."""
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as f:
        a = f.create_dataset("a", data=np.arange(4.0))
        b = f.create_dataset("b", data=np.arange(4.0) * 10)
        a.make_scale("a")
        b.make_scale("b")
        v = f.create_dataset("v", data=np.arange(12, dtype="<i4").reshape(4, 3))
        v.dims[0].attach_scale(a)
        v.dims[0].attach_scale(b)
        c = f.create_dataset("c", data=np.arange(3, dtype="<i8"))
        c.make_scale("c")
        v.dims[1].attach_scale(c)
    with h5py.File(path) as f:
        assert [s.name for s in f["v"].dims[0].values()] == ["/a", "/b"]  # h5py's first is a
    assert netcdf_dims(path) == {"a": ("a",), "b": ("b",), "v": ("b", "c"), "c": ("c",)}
    got = xr.open_dataset(_collection(tmp_path, path), engine="refstore")
    assert_same_view(got, _xr_netcdf4(path), path.name)


def test_datasets_without_scales_get_netcdf_cs_phony_dimensions(tmp_path: Path) -> None:
    """No scales: per group (children first), a dimension of the group of that length and
    unlimitedness reused unless the array already uses it, else ``phony_dim_<next>``."""
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("square", data=np.arange(9, dtype="<f4").reshape(3, 3))
        f.create_dataset("row", data=np.arange(3, dtype="<i2"))
        f.create_dataset("grown", data=np.arange(6, dtype="<i2").reshape(3, 2), maxshape=(None, 2), chunks=(2, 2))
        g = f.create_group("g")
        g.create_dataset("inner", data=np.arange(6, dtype="<u1").reshape(2, 3))
        g.create_group("deeper").create_dataset("d", data=np.arange(3, dtype="<f8"))
    want = netcdf_dims(path)
    assert want is not None
    metas = {m.name: m.dims for m in HDF5Scanner()(str(path)).arrays}
    assert metas == want
    uri = _collection(tmp_path, path)
    assert_same_view(xr.open_dataset(uri, engine="refstore"), _xr_netcdf4(path), "/")
    for group in ("g", "g/deeper"):
        assert_same_view(xr.open_dataset(uri, engine="refstore", group=group), _xr_netcdf4(path, group), group)


def _linked_file(path: Path, target: Path) -> None:
    with h5py.File(target, "w") as o:
        o.create_dataset("far", data=np.arange(2.0))
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(3, dtype="<i4")).attrs["units"] = "m"
        g = f.create_group("HDFEOS/SWATHS/s/Data Fields")
        g.create_dataset("Temperature", data=np.arange(12, dtype="<f4").reshape(3, 4))
        geo = f.create_group("HDFEOS/SWATHS/s/Geolocation Fields")
        geo.create_dataset("Latitude", data=np.linspace(0, 1, 12, dtype="<f4").reshape(3, 4))
        f["HDFEOS/SWATHS/s/Data Fields/Latitude"] = h5py.SoftLink("/HDFEOS/SWATHS/s/Geolocation Fields/Latitude")
        f["soft_a"] = h5py.SoftLink("/a")
        f["hard_a"] = f["a"]
        f["fields"] = h5py.SoftLink("/HDFEOS/SWATHS/s/Data Fields")  # a soft link to a group


def test_soft_and_hard_links_read_as_h5py_and_netcdf_c_show_them(tmp_path: Path) -> None:
    """A soft link to a dataset (an HDF-EOS5 swath's data field pointing at its geolocation
    field), a further hard link, a soft link to a group: each is the dataset (or group) under the
    link's name, with its values, attributes and netCDF-C's dimensions."""
    path = tmp_path / "linked.h5"
    _linked_file(path, tmp_path / "other.h5")
    with h5py.File(path) as f:
        links: list[str] = []
        f.visit_links(links.append)
        shown = [n for n in links if isinstance(f.get(n), h5py.Dataset)]
        shown += [f"fields/{k}" for k in f["fields"]]
        want = {n: (f[n][()], dict(f[n].attrs)) for n in shown}
    res = HDF5Scanner()(str(path))
    metas = {m.name: m for m in res.arrays}
    assert set(metas) == set(want)
    assert all(m.status == "ok" for m in metas.values())
    assert {m.name: m.dims for m in res.arrays} == netcdf_dims(path)
    uri = _collection(tmp_path, path)
    ds = refstore.open(uri)
    for name, (values, attrs) in want.items():
        got = ds[name][...]
        assert got.dtype == values.dtype and np.array_equal(got, values), name
        assert set(ds[name].attrs) == set(attrs), name
    for group in (None, "HDFEOS/SWATHS/s/Data Fields", "fields"):
        view = xr.open_dataset(uri, engine="refstore", group=group)
        assert_same_view(view, _xr_netcdf4(path, group), str(group))


def test_links_reaching_no_dataset_are_refused_by_name(tmp_path: Path) -> None:
    """Every name h5py lists is an array or a refusal with its reason: a dangling soft link, an
    external link (never followed), a soft link back to an ancestor group (a cycle)."""
    path = tmp_path / "odd.h5"
    _linked_file(path, tmp_path / "other.h5")
    with h5py.File(path, "a") as f:
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["ext"] = h5py.ExternalLink("other.h5", "/far")
        f["HDFEOS/up"] = h5py.SoftLink("/HDFEOS")
    res = HDF5Scanner()(str(path))
    metas = {m.name: m for m in res.arrays}
    reasons = {n: m.reason for n, m in metas.items() if m.status != "ok"}
    assert reasons == {
        "dangling": "soft link to /nowhere, which does not exist",
        "ext": "external link to other.h5:/far (links to other files are not followed)",
        "HDFEOS/up": "soft link to group /HDFEOS, one of its own ancestors (a cycle)",
    }
    with h5py.File(path) as f:
        links: list[str] = []
        f.visit_links(links.append)
    assert set(links) - set(metas) <= set(res.groups)  # no name h5py lists is missing
    uri = str(tmp_path / "col")
    refstore.init(uri)
    report = refstore.scan(uri, [str(path)])
    assert {a for _, a, _ in report.unsupported} == set(reasons)


@pytest.mark.skipif(not ZOO, reason="the zoo is not present")
@pytest.mark.parametrize("path", ZOO, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_zoo_names_equal_netcdf_cs(path: Path) -> None:
    """Every variable netCDF-C reads in the zoo's netCDF-4/HDF5 files has its name and
    dimensions in refstore's scan; nothing else is an array there (arrays netCDF-C skips, of
    types it has no netCDF type for, are refused by refstore too)."""
    want = netcdf_dims(path)
    if want is None:
        pytest.skip("netCDF-C cannot open this file")
    metas = {m.name: m for m in HDF5Scanner()(str(path)).arrays}
    for name, dims in want.items():
        assert name in metas, name
        assert metas[name].dims == dims, name
    assert all(m.status != "ok" for n, m in metas.items() if n not in want)


SMALL_ZOO = [p for p in ZOO if p.stat().st_size < 400_000 and p.parent.name in ZOO_DIRS[:4]]


@pytest.mark.skipif(not SMALL_ZOO, reason="the zoo is not present")
@pytest.mark.parametrize("path", SMALL_ZOO, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_zoo_xarray_view_equals_netcdf4_engine(tmp_path: Path, path: Path) -> None:
    """``engine="refstore"`` over a collection of one small zoo file equals
    ``xr.open_dataset(f, engine="netcdf4")``: names, dims, dtypes, values, attributes."""
    try:
        want = _xr_netcdf4(path)
    except Exception as e:  # (the oracle cannot read it: nothing to compare)
        pytest.skip(f"xarray/netCDF4 cannot open it: {type(e).__name__}")
    uri = _collection(tmp_path, path)
    arrays = refstore.open(uri).snapshot.arrays()
    refused = {n for n, m in arrays.items() if m.status != "ok" and "/" not in n}
    # {r, i} compounds: h5py (and refstore) read complex numbers, netCDF-C a compound
    pairs = {str(v) for v in want.variables if want[v].dtype.names in (("r", "i"), ("real", "imag"))}
    got = xr.open_dataset(uri, engine="refstore").drop_vars(pairs)
    assert_same_view(got, want.drop_vars([v for v in refused | pairs if v in want.variables]), path.name)


def test_a_group_linked_twice_shows_its_datasets_under_both_names(tmp_path: Path) -> None:
    """A group with two hard links (a PyTables waveform file's axes): netCDF-C and h5py's
    listing (``keys()``) show its datasets under both paths; a hard link back to an ancestor
    group (a cycle, which netCDF-C never finishes) is refused by name."""
    path = tmp_path / "twice.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("axes/axis1")
        g.create_dataset("data", data=np.arange(6, dtype="<u2").reshape(2, 3)).attrs["u"] = "m"
        f["trace/y-axis"] = g
    want = netcdf_dims(path)
    assert want is not None and "trace/y-axis/data" in want
    res = HDF5Scanner()(str(path))
    assert {m.name: m.dims for m in res.arrays} == want
    uri = _collection(tmp_path, path)
    ds = refstore.open(uri)
    with h5py.File(path) as f:
        for name in want:
            assert np.array_equal(ds[name][...], f[name][()]) and ds[name].dtype == f[name].dtype, name
    for group in ("axes/axis1", "trace/y-axis"):
        assert_same_view(xr.open_dataset(uri, engine="refstore", group=group), _xr_netcdf4(path, group), group)
    with h5py.File(path, "a") as f:
        f["axes/axis1/loop"] = f["axes"]
    metas = {m.name: m for m in HDF5Scanner()(str(path)).arrays}
    assert metas["axes/axis1/loop"].status == "unsupported" and "(a cycle)" in str(metas["axes/axis1/loop"].reason)
    assert {"axes/axis1/data", "trace/y-axis/data"} <= {n for n, m in metas.items() if m.status == "ok"}
