"""Expected values for the tests, read by the formats' own libraries and never by refstore.

- HDF5/netCDF4: h5py (hdf5plugin's filters loaded), raw stored values.
- netCDF3: netCDF4-python with masking and scaling off.
- TIFF: tifffile, ``page.asarray()``; pages above ``TIFF_WHOLE_MAX`` elements through tifffile's
  own zarr store (``TiffFile.aszarr(key=i)``), which decodes only the tiles a window touches.
  IFDs are named as the README documents (``image``, ``overview_1``..., ``mask``,
  ``mask_overview_1``...; ``image_1``... when a file has several full-resolution images).
- Series: numpy concatenation of those reads along the concat dimension (arrays without it are
  taken once, from the first file that has them); a TIFF series stacks the pages along a new
  first axis, and its ``time`` is the date in each file name, as seconds since 1970 (int64).

Nothing here imports refstore. ``assert_same`` compares shape, dtype (byte order aside) and
bytes exactly. ``cached`` keeps an oracle's answer about a file (keyed by the file's bytes) for
the rest of the test session, and across sessions in ``REFSTORE_ORACLE_CACHE`` when that names a
folder (the mutation run sets it: every mutant is a new pytest session, and re-running gdalinfo
or cfgrib per mutant cost seconds).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "TIFF_WHOLE_MAX",
    "assert_same",
    "assert_same_dataset",
    "cached",
    "hdf5_read",
    "netcdf3_read",
    "read",
    "series_read",
    "sniff",
    "tiff_names",
    "tiff_read",
    "tiff_series_read",
    "unix_seconds",
    "xr_series",
]

TIFF_WHOLE_MAX = 20_000_000
"""TIFF pages with more elements than this are read by window through tifffile's zarr store."""

Sel = tuple[slice, ...] | None


_MEMO: dict[tuple[str, str], Any] = {}


def cached[T](kind: str, path: str | os.PathLike[str], compute: Callable[[], T]) -> T:
    """``compute()`` (an oracle's answer about the file at ``path``: gdalinfo's JSON, tifffile's
    tags, cfgrib's dataset as plain values), computed once per file content and ``kind``: kept in
    memory for the session, and in the folder ``REFSTORE_ORACLE_CACHE`` names (pickles written
    by this function only; bench/mutate.py empties it before each run) for later sessions."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    key = (kind, digest)
    if key in _MEMO:
        return _MEMO[key]  # type: ignore[no-any-return]
    folder = os.environ.get("REFSTORE_ORACLE_CACHE")
    stored = Path(folder) / f"{kind}-{digest}.pickle" if folder else None
    if stored is not None and stored.is_file():
        value: T = pickle.loads(stored.read_bytes())  # written by this function only
    else:
        value = compute()
        if stored is not None:
            stored.parent.mkdir(parents=True, exist_ok=True)
            tmp = stored.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps(value))
            tmp.replace(stored)
    _MEMO[key] = value
    return value


def sniff(path: str | os.PathLike[str]) -> str:
    """``hdf5``, ``netcdf3`` or ``tiff``, from the first bytes."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head == b"\x89HDF\r\n\x1a\n":
        return "hdf5"
    if head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05"):
        return "netcdf3"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    raise ValueError(f"{path}: not a format the oracle reads")


def _netcdf4() -> Any:
    """netCDF4-python, imported without leaving its HDF5_PLUGIN_PATH behind for h5py."""
    before = os.environ.get("HDF5_PLUGIN_PATH")
    import netCDF4

    if before is None:
        os.environ.pop("HDF5_PLUGIN_PATH", None)
    else:
        os.environ["HDF5_PLUGIN_PATH"] = before
    return netCDF4


def hdf5_read(path: str | os.PathLike[str], name: str, sel: Sel = None) -> np.ndarray[Any, Any]:
    import h5py

    with contextlib.suppress(ImportError):
        import hdf5plugin  # noqa: F401  (zstd, lz4, blosc... for h5py)
    with h5py.File(path, "r") as f:
        d = f[name]
        return np.asarray(d[sel] if sel and d.ndim else d[()])


def netcdf3_read(path: str | os.PathLike[str], name: str, sel: Sel = None) -> np.ndarray[Any, Any]:
    with _netcdf4().Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        nc.set_always_mask(False)
        v = nc.variables[name]
        return np.asarray(v[sel] if sel else v[...])


def tiff_names(pages: list[Any]) -> list[str]:
    """The array name of each IFD, in file order, as the README documents."""
    n_full = sum(1 for p in pages if not int(p.subfiletype) & 5)
    names: list[str] = []
    full = over = mask = mask_over = 0
    for p in pages:
        kind = int(p.subfiletype)
        if kind & 4 and kind & 1:
            mask_over += 1
            names.append(f"mask_overview_{mask_over}")
        elif kind & 4:
            names.append("mask" if mask == 0 else f"mask_{mask}")
            mask += 1
        elif kind & 1:
            over += 1
            names.append(f"overview_{over}")
        else:
            full += 1
            names.append("image" if n_full == 1 else f"image_{full}")
    return names


def tiff_read(path: str | os.PathLike[str], name: str, sel: Sel = None) -> np.ndarray[Any, Any] | None:
    """tifffile's values of IFD ``name`` (None when the file has no such IFD)."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        pages = list(tif.pages)
        names = tiff_names(pages)
        if name not in names:
            return None
        i = names.index(name)
        page = pages[i]
        if int(np.prod(page.shape, dtype=np.int64)) <= TIFF_WHOLE_MAX:
            whole = page.asarray()
            return np.asarray(whole[sel] if sel else whole)
        import zarr

        store = tif.aszarr(key=i)
        try:
            z = zarr.open_array(store, mode="r")
            return np.asarray(z[sel] if sel else z[...])
        finally:
            store.close()


def unix_seconds(date: datetime) -> int:
    return int(date.replace(tzinfo=UTC).timestamp())


def tiff_series_read(paths: list[str], times: list[int], name: str, sel: Sel = None) -> np.ndarray[Any, Any]:
    """IFD ``name`` of every file stacked along a new first axis; ``time`` is ``times`` (int64)."""
    if name == "time":
        t = np.array(times, dtype="<i8")
        return t[sel] if sel else t
    lead, rest = (sel[0], sel[1:]) if sel else (slice(None), None)
    parts = []
    for p in paths[lead]:
        got = tiff_read(p, name, rest)
        if got is None:
            raise KeyError(f"{p} has no IFD {name}")
        parts.append(got)
    return np.stack(parts)


def read(path: str | os.PathLike[str], name: str, sel: Sel = None) -> np.ndarray[Any, Any] | None:
    """The format library's raw values of ``name`` in one file (None: no such array)."""
    kind = sniff(path)
    if kind == "tiff":
        return tiff_read(path, name, sel)
    if kind == "netcdf3":
        return netcdf3_read(path, name, sel)
    return hdf5_read(path, name, sel)


def _dims(path: str, name: str) -> tuple[str, ...] | None:
    """Dimension names of ``name`` in one file (None: the file has no such array)."""
    if sniff(path) == "netcdf3":
        with _netcdf4().Dataset(path) as nc:
            v = nc.variables.get(name)
            return None if v is None else tuple(v.dimensions)
    import h5py

    with h5py.File(path, "r") as f:
        if name not in f:
            return None
        d = f[name]
        if d.ndim == 1 and h5py.h5ds.is_scale(d.id):
            return (name.rsplit("/", 1)[-1],)
        out = []
        for i in range(d.ndim):
            scales = d.dims[i]
            out.append(scales[0].name.rsplit("/", 1)[-1] if len(scales) else scales.label)
        return tuple(out)


def series_read(paths: list[str], name: str, concat_dim: str, sel: Sel = None) -> np.ndarray[Any, Any]:
    """numpy concatenation of each file's ``name`` along ``concat_dim`` (taken once from the
    first file that has it when it lacks that dimension), then ``sel``."""
    parts = []
    for p in paths:
        dims = _dims(p, name)
        if dims is None:
            raise KeyError(f"{p} has no {name}: the oracle has no fill rule for gaps")
        if concat_dim not in dims:
            whole = read(p, name)
            assert whole is not None
            return whole[sel] if sel else whole
        assert dims.index(concat_dim) == 0, f"{name}: {concat_dim} is not its first dimension"
        got = read(p, name)
        assert got is not None
        parts.append(got)
    whole = np.concatenate(parts)
    return whole[sel] if sel else whole


def assert_same(got: Any, expected: np.ndarray[Any, Any], what: str = "") -> None:
    """Equal shape, dtype (byte order aside) and values bit for bit (NaNs in the same places)."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind not in "biufc" or got.dtype.kind not in "biufc":  # strings, compounds: exact dtype
        assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
        same = got.tobytes() == expected.tobytes() if got.dtype.kind == "V" else np.array_equal(got, expected)
        assert same, f"{what}: values differ"
        return
    native = expected.dtype.newbyteorder("=")
    assert got.dtype.newbyteorder("=") == native, f"{what}: dtype {got.dtype} != {expected.dtype}"
    a = got.astype(native, copy=False)
    b = expected.astype(native, copy=False)
    assert a.tobytes() == b.tobytes(), f"{what}: values differ"


def xr_series(paths: list[Any], concat_dim: str = "time", **kw: Any) -> Any:
    """xarray over the netCDF files (engine netcdf4), concatenated along ``concat_dim`` as the
    published forms present them (variables without it taken once)."""
    import xarray as xr

    parts = [xr.open_dataset(p, engine="netcdf4", **kw) for p in paths]
    return xr.concat(parts, dim=concat_dim, data_vars="minimal", coords="minimal", compat="override", join="exact")


def assert_same_dataset(got: Any, want: Any, what: str = "") -> int:
    """Every variable of ``want`` (xarray over the files) in ``got`` with its dims, dtype (byte
    order aside) and values (NaN where masked); the number of variables compared. Packed
    variables (scale_factor/add_offset) are the one exception to exact dtypes: zarr attributes
    are JSON, so a float32 scale_factor comes back a Python float and xarray unpacks to float64
    through every zarr form; their values are compared at float32 precision."""
    assert sorted(got.data_vars) == sorted(want.data_vars), what
    for name, var in want.variables.items():
        g = got[name]
        assert g.dims == var.dims, f"{what}: {name}"
        if {"scale_factor", "add_offset"} & set(var.encoding) and g.dtype != var.dtype:
            assert (g.dtype, var.dtype) == (np.dtype("f8"), np.dtype("f4")), f"{what}: {name}"
            np.testing.assert_allclose(g.values, var.values, rtol=1e-6, err_msg=f"{what}: {name}")
            assert np.array_equal(np.isnan(g.values), np.isnan(var.values)), f"{what}: {name}"
        else:
            assert g.dtype == var.dtype.newbyteorder("="), f"{what}: {name} {g.dtype} != {var.dtype}"
            np.testing.assert_array_equal(g.values, var.values, err_msg=f"{what}: {name}", strict=True)
    return len(want.variables)
