"""engine="refstore" equals xarray over the original files (engine="netcdf4", default decoding):
the OISST-like series against the concatenation of its daily files, every netCDF file of
../shared/data alone, groups, eras of different packing, ``as_of``, dask ``chunks=``."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import refstore
from refstore._netcdf4 import import_netcdf4

import_netcdf4()  # before xarray's netcdf4 engine imports it: keep HDF5_PLUGIN_PATH for h5py

KEY_ATTRS = ("units", "long_name", "standard_name", "calendar", "axis", "valid_min", "valid_max", "valid_range",
             "flag_values", "flag_meanings", "coordinates", "grid_mapping", "positive", "comment")  # fmt: skip


def _same_values(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def _dims(v: Any) -> tuple[Any, ...]:
    """Dimension names, with netCDF-C's ``phony_dim_<counter>`` and refstore's
    ``phony_dim_<size>`` (HDF5 datasets without dimension scales) both read as (phony, size):
    netCDF-C numbers them in file order, refstore by size so they never clash across files."""
    return tuple(("phony", n) if d.startswith("phony_dim_") else d for d, n in zip(v.dims, v.shape, strict=True))


def assert_same_dataset(got: xr.Dataset, ref: xr.Dataset, what: str, *, allow_missing: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """Every variable of ``ref`` (except ``allow_missing``) is in ``got`` with the same dims,
    dtype, values and key attributes; the coordinates agree. Returns variables compared."""
    n = 0
    for name in ref.variables:
        if name in allow_missing:
            assert name not in got.variables, f"{what}: {name} expected absent"
            continue
        assert name in got.variables, f"{what}: {name} missing"
        a, b = got[name].variable, ref[name].variable
        assert _dims(a) == _dims(b), f"{what}:{name} dims {a.dims} != {b.dims}"
        assert a.dtype == b.dtype or a.dtype == b.dtype.newbyteorder("="), f"{what}:{name} dtype {a.dtype} != {b.dtype}"
        assert _same_values(a.values, b.values), f"{what}:{name} values differ"
        for k in KEY_ATTRS:
            if k in b.attrs:
                assert k in a.attrs, f"{what}:{name} attribute {k} missing"
                assert _same_values(a.attrs[k], b.attrs[k]), f"{what}:{name}.{k}: {a.attrs[k]!r} != {b.attrs[k]!r}"
        for k in ("scale_factor", "add_offset", "_FillValue", "units", "calendar"):
            if k in b.encoding:
                assert _same_values(a.encoding.get(k), b.encoding[k]), f"{what}:{name} encoding {k}"
        n += 1
    assert set(got.coords) == set(ref.coords) - allow_missing, f"{what}: coordinates differ"
    assert set(got.data_vars) == set(ref.data_vars) - allow_missing, f"{what}: data variables differ"
    return n


def _netcdf4_concat(files: list[Path], **kw: Any) -> xr.Dataset:
    parts = [xr.open_dataset(f, engine="netcdf4", **kw) for f in files]
    return xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override", join="exact")


@pytest.fixture(scope="module")
def oisst(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path]]:
    from refstore.fixtures.oisst import write_series

    root = tmp_path_factory.mktemp("xr")
    days = write_series(root / "data", 4)
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in days[:2]], concat_dim="time")
    from refstore.table.versions import create_tag

    create_tag(refstore.Collection.open(uri), "release-2026-10")  # the two-day version; then the rest
    refstore.scan(uri, [str(p) for p in days], concat_dim="time")
    return uri, days


def test_series_equals_netcdf4_concat(oisst: tuple[str, list[Path]]) -> None:
    uri, days = oisst
    got = xr.open_dataset(uri, engine="refstore")
    ref = _netcdf4_concat(days)
    assert assert_same_dataset(got, ref, "oisst") == len(ref.variables)
    assert got.sst.dtype == np.float32  # int16 * float32 scale_factor, as over netCDF
    assert got.time.dtype.kind == "M"
    assert got.attrs["title"] == ref.attrs["title"]
    g = xr.open_dataset(uri, engine="refstore", group="meta")
    r = xr.open_dataset(days[0], engine="netcdf4", group="meta")  # no time dimension: taken once
    assert assert_same_dataset(g, r, "oisst/meta") == len(r.variables)


def test_series_raw_and_selected(oisst: tuple[str, list[Path]]) -> None:
    uri, days = oisst
    got = xr.open_dataset(uri, engine="refstore", mask_and_scale=False, decode_times=False)
    ref = _netcdf4_concat(days, mask_and_scale=False, decode_times=False)
    assert assert_same_dataset(got, ref, "oisst raw")
    lazy = xr.open_dataset(uri, engine="refstore")
    assert not lazy.sst.variable._in_memory
    window = lazy.sst.isel(time=slice(1, 3), lat=slice(40, 3, -7), lon=[1, 5, 80])
    refw = _netcdf4_concat(days).sst.isel(time=slice(1, 3), lat=slice(40, 3, -7), lon=[1, 5, 80])
    assert _same_values(window.values, refw.values)


def test_as_of_tag(oisst: tuple[str, list[Path]]) -> None:
    uri, days = oisst
    old = xr.open_dataset(uri, engine="refstore", as_of="release-2026-10")
    assert old.sizes["time"] == 2
    assert assert_same_dataset(old, _netcdf4_concat(days[:2]), "as_of")


def test_dask_chunks(oisst: tuple[str, list[Path]]) -> None:
    uri, days = oisst
    ds = xr.open_dataset(uri, engine="refstore", chunks={})
    assert ds.sst.chunks is not None
    assert ds.sst.data.chunksize == refstore.open(uri)["sst"].chunks
    arr = pickle.loads(pickle.dumps(ds.sst.data))  # dask graphs travel to workers
    ref = _netcdf4_concat(days)
    assert _same_values(arr.compute(), ref.sst.values)
    assert _same_values(ds.sst.mean("time").compute().values, ref.sst.mean("time").values)


def test_guess_engine(oisst: tuple[str, list[Path]]) -> None:
    uri, _ = oisst
    assert "refstore" in xr.backends.list_engines()
    assert xr.open_dataset(uri).sizes["time"] == 4  # found by guess_can_open


def test_eras_of_different_packing(packing_era_series: tuple[str, list[Path]]) -> None:
    """Files whose scale_factor changes: each part decoded with its own, as concat of the files."""
    uri, days = packing_era_series
    assert len(refstore.open(uri)["sst"].eras) == 2
    got = xr.open_dataset(uri, engine="refstore")
    ref = _netcdf4_concat(days)
    assert got.sst.dtype == np.float32
    assert _same_values(got.sst.values, ref.sst.values)
    pick = {"time": slice(0, 3, 2), "lat": 3}
    assert _same_values(got.sst.isel(pick).values, ref.sst.isel(pick).values)
    assert "scale_factor" not in got.sst.attrs
    assert [e["scale_factor"] for e in got.sst.encoding["eras"]] == [np.float32(0.01), np.float32(0.02)]


def _groups(path: str) -> list[str]:
    """Every group of a netCDF file, ``""`` for the root, as netCDF4-python lists them."""
    netCDF4 = import_netcdf4()
    out: list[str] = []
    with netCDF4.Dataset(path) as nc:
        todo = [("", nc)]
        while todo:
            name, g = todo.pop(0)
            out.append(name)
            todo += [(f"{name}/{k}" if name else k, sub) for k, sub in g.groups.items()]
    return out


def test_every_netcdf_case_equals_netcdf4(emit_cases: list[Any], tmp_path: Path) -> None:
    """Every netCDF file of ../shared/data (netCDF4/HDF5 and netCDF3) and generated netCDF4 and
    netCDF3 files (so the test means something without ../shared), every group:
    engine="refstore" over its collection equals engine="netcdf4" over the file, variable by
    variable (values, dtypes, key attributes and packing encoding). Justified exceptions:
    arrays refstore records as unsupported (compound dtypes, filters without a decoder) are
    absent; phony dimension names are compared by size (see ``_dims``)."""
    from datetime import date

    from refstore.fixtures.netcdf3 import write_obs_file
    from refstore.fixtures.oisst import write_day

    from .conftest import hdf5_files_in_shared, netcdf3_files_in_shared

    netcdf = {str(p.resolve()) for p in [*hdf5_files_in_shared(), *netcdf3_files_in_shared()]}
    pairs = [(c.id, c.source, c.uri) for c in emit_cases if c.source and str(Path(c.source).resolve()) in netcdf]
    generated = [write_day(tmp_path / "day.nc", date(2024, 1, 1))]
    generated += [write_obs_file(tmp_path / f"obs-{fmt}.nc", start_hour=0, records=3, fmt=fmt)
                  for fmt in ("NETCDF3_CLASSIC", "NETCDF3_64BIT_DATA")]  # fmt: skip
    for path in generated:
        uri = str(tmp_path / f"col-{path.stem}")
        refstore.init(uri)
        refstore.scan(uri, [str(path)])
        pairs.append((path.name, str(path), uri))
    checked = 0
    failures: list[str] = []
    for cid, source, uri in pairs:
        missing = {n for n, m in refstore.open(uri).snapshot.arrays().items() if m.status != "ok"}
        for group in _groups(source):
            prefix = f"{group}/" if group else ""
            absent = {n[len(prefix) :] for n in missing if n.startswith(prefix) and "/" not in n[len(prefix) :]}
            what = f"{cid}:{group or '/'}"
            with warnings.catch_warnings():  # the netCDF3 fixture's grid(station, station), on both sides
                warnings.filterwarnings("ignore", "Duplicate dimension names", UserWarning)
                try:
                    ref = xr.open_dataset(source, engine="netcdf4", group=group or None)
                except (TypeError, ValueError):  # netCDF4/xarray cannot present this group: nothing to compare
                    continue
                try:
                    got = xr.open_dataset(uri, engine="refstore", group=group or None)
                    checked += assert_same_dataset(got, ref, what, allow_missing=absent)
                    assert dict(got.attrs).keys() == dict(ref.attrs).keys(), f"{what}: global attributes"
                except AssertionError as e:
                    failures.append(str(e).splitlines()[0])
    assert not failures, "\n".join(failures)
    assert checked >= 2 * 10  # the generated files alone hold more than 10 variables each


def test_open_zarr_over_the_store(oisst: tuple[str, list[Path]]) -> None:
    """xarray's own zarr engine over ``refstore.zarr_store`` (consolidated: no warning) gives
    the same values; only a float32 ``scale_factor`` decodes to float64 there (zarr attributes
    are JSON, which has no float32), where engine="refstore" keeps float32 as netCDF does."""
    uri, days = oisst
    via_zarr = xr.open_zarr(refstore.zarr_store(uri), chunks=None)
    ref = _netcdf4_concat(days)
    assert set(via_zarr.variables) == set(ref.variables)
    for name in ref.variables:
        a, b = via_zarr[name], ref[name]
        if name == "sst":
            assert (a.dtype, b.dtype) == (np.float64, np.float32)
            np.testing.assert_allclose(a.values, b.values, rtol=1e-6)  # NaNs in the same places
            continue
        assert a.dtype == b.dtype or a.dtype == b.dtype.newbyteorder("="), name
        assert _same_values(a.values, b.values), name


def test_eras_of_other_chunks_dtype_codecs(tmp_path: Path) -> None:
    """Eras changing codecs, chunks, dtype and scale_factor decode like xr.concat of the files."""
    from .test_series import _era_file

    d = tmp_path / "data"
    d.mkdir()
    files = [_era_file(d / f"f{i}.h5", i, comp=comp, chunks=chunks, dtype=dt, scale=0.1 if i < 2 else 0.01)
             for i, (comp, chunks, dt) in enumerate([("gzip", (1, 12), "<i2"), ("gzip", (1, 12), "<i2"),
                                                     (None, (2, 5), "<i4"), (None, (2, 5), "<i4")])]  # fmt: skip
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(d)], concat_dim="time")
    import h5py

    got = xr.open_dataset(uri, engine="refstore")
    # netCDF4-python does not open these plain HDF5 files: CF scaling by hand, as xarray does it
    # (float32 scale_factor: values cast to float32, then multiplied in float32)
    parts = []
    for f in files:
        with h5py.File(f) as h:
            parts.append(h["x"][()].astype("f4") * h["x"].attrs["scale_factor"])
    expected = np.concatenate(parts)
    assert got.x.dtype == np.float32
    assert _same_values(got.x.values, expected)
    assert _same_values(got.x[3:6, 4:11].values, expected[3:6, 4:11])
    assert got.time.dtype.kind == "M"


def test_open_cache_is_bounded_and_keyed_by_storage_options(oisst: tuple[str, list[Path]]) -> None:
    """The per-process cache of open versions never serves one opened with other storage
    options, and keeps at most ``OPEN_CACHE_SIZE`` (least recently used out)."""
    from refstore.read import xarray_backend as xb

    uri, days = oisst
    v = refstore.Collection.open(uri).resolve(None)
    plain = xb._dataset(uri, v, "error", None)
    assert xb._dataset(uri, v, "error", {}) is plain
    other = xb._dataset(uri, v, "error", {"region": "x"})
    assert other is not plain and other.snapshot.collection.storage_options == {"region": "x"}
    for i in range(xb.OPEN_CACHE_SIZE + 2):
        xb._dataset(uri, v, "error", {"region": str(i)})
        assert len(xb._OPEN) <= xb.OPEN_CACHE_SIZE
    assert xb._dataset(uri, v, "error", None) is not plain  # evicted, reopened
    got = xr.open_dataset(uri, engine="refstore", storage_options={"region": "y"})
    assert_same_dataset(got, _netcdf4_concat(days), "after eviction")
