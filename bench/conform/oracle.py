"""The oracle of one unit: the file's own reader, never refstore.

- netCDF4/HDF5: h5py with hdf5plugin's filters (every dataset reached by a link, soft links
  included; netCDF-4 dimensions without a variable left out, as netCDF-C lists them), raw
  stored values; xarray: ``xr.open_dataset(engine="netcdf4")`` (netCDF-C's view, CF-decoded)
  for netCDF-4 files (``_NCProperties`` or dimension scales), ``engine="h5netcdf"``
  (``phony_dims="sort"``) for other HDF5 files.
- netCDF3: netCDF4-python without masking, scaling or char-to-string; xarray: ``engine="netcdf4"``.
- TIFF: tifffile (every IFD named as the README says; large pages through tifffile's own zarr
  store, a window at a time). xarray: no TIFF engine is a dependency here, so
  ``engine="refstore"`` is held to the same raw values and dtypes (names, not dimensions).
- GRIB: cfgrib (``open_datasets``: every hypercube), raw (``decode_times=False``) and decoded;
  where cfgrib misplaces values (grids scanned column-major, east to west, or with alternating
  rows on 1-D grids: design/formats.md, "Scanning modes"), its arrays are put where ecCodes'
  per-point coordinates and WMO code table 3.4 say (``_wmo_placed``).
- Series: numpy concatenation of those raw reads along the concat dimension (arrays without it
  taken once); xarray: ``xr.open_mfdataset(combine="nested", concat_dim=DIM, data_vars="minimal",
  coords="minimal", compat="override", join="exact")``. TIFF series: pages stacked along time.
- Mosaic: each tile's ``image`` placed by its GeoTIFF transform on the common grid; gaps the
  tiles' nodata, else 0.
Nothing here imports refstore."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from refstore._netcdf4 import import_netcdf4  # the import's HDF5_PLUGIN_PATH hygiene, not a reader

if TYPE_CHECKING:
    from .units import Unit

__all__ = ["ArrayInfo", "Oracle", "oracle_for"]

Sel = tuple[slice, ...]


@dataclass(frozen=True)
class ArrayInfo:
    shape: tuple[int, ...]
    dtype: np.dtype[Any]


@dataclass
class Oracle:
    """What the format's reader lists (``arrays``), reads (``raw``) and decodes (``xarray``)."""

    arrays: dict[str, ArrayInfo]
    reader: Any  # (name, sel) -> values
    xr_reader: Any = None  # () -> xr.Dataset | None
    xr_name: str = ""
    notes: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)  # name -> why the oracle cannot read it
    xr_values_only: bool = False  # no xarray reader of the format: engine="refstore" against decoded raw values
    nodata: dict[str, Any] = field(default_factory=dict)  # TIFF: the _FillValue xarray decodes (GDAL_NODATA)
    times: tuple[int, ...] = ()  # TIFF series: the dates, seconds since 1970
    alternatives: dict[str, Any] = field(default_factory=dict)  # name -> sel -> [values it may equal]
    _xr: Any = None

    def raw(self, name: str, sel: Sel) -> np.ndarray[Any, Any]:
        return np.asarray(self.reader(name, sel))

    def xarray(self) -> Any:
        if self._xr is None and self.xr_reader is not None:
            self._xr = self.xr_reader()
        return self._xr


def _sel(sel: Sel, ndim: int) -> Any:
    return sel if ndim else ()


# ----------------------------------------------------------------------------- HDF5
def hdf5_names(path: str) -> tuple[dict[str, ArrayInfo], dict[str, str]]:
    import h5py

    with contextlib.suppress(ImportError):
        import hdf5plugin  # noqa: F401
    out: dict[str, ArrayInfo] = {}
    bad: dict[str, str] = {}
    with h5py.File(path, "r") as f:
        names: list[str] = []
        f.visit_links(names.append)
        for n in names:
            link = f.get(n, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                continue  # another file's dataset: not this source's
            try:
                obj = f[n]
            except (KeyError, OSError) as e:  # a dangling soft link
                bad[n] = f"h5py cannot resolve it ({e})"
                continue
            if isinstance(obj, h5py.Dataset) and not _dimension_only(obj):
                out[n] = ArrayInfo(tuple(obj.shape) if obj.shape is not None else (), obj.dtype)
    return out, bad


NETCDF_DIM_ONLY = b"This is a netCDF dimension but not a netCDF variable"


def _dimension_only(d: Any) -> bool:
    """A netCDF-4 dimension without a variable (a dimension scale netCDF-C never lists)."""
    name = d.attrs.get("NAME") if "NAME" in d.attrs else None
    return isinstance(name, bytes | np.bytes_) and bytes(name).startswith(NETCDF_DIM_ONLY)


def hdf5_reader(path: str) -> Any:
    import h5py

    def read(name: str, sel: Sel) -> Any:
        with h5py.File(path, "r") as f:
            d = f[name]
            if d.shape is None:
                return np.zeros((), d.dtype)
            return d[sel] if d.ndim else d[()]

    return read


# ----------------------------------------------------------------------------- netCDF3
def netcdf3_names(path: str) -> dict[str, ArrayInfo]:
    with import_netcdf4().Dataset(path) as nc:
        return {n: ArrayInfo(tuple(v.shape), np.dtype(v.dtype)) for n, v in nc.variables.items()}


def netcdf3_reader(path: str) -> Any:
    def read(name: str, sel: Sel) -> Any:
        with import_netcdf4().Dataset(path) as nc:
            nc.set_auto_maskandscale(False)
            nc.set_always_mask(False)
            nc.set_auto_chartostring(False)
            v = nc.variables[name]
            return np.asarray(v[_sel(sel, v.ndim)] if v.ndim else v.getValue())

    return read


def is_netcdf4(path: str) -> bool:
    """An HDF5 file netCDF-C wrote or can name: ``_NCProperties`` or dimension scales."""
    import h5py

    with h5py.File(path, "r") as f:
        if "_NCProperties" in f.attrs:
            return True
        found: list[bool] = []

        def visit(_: str, obj: Any) -> Any:
            if isinstance(obj, h5py.Dataset) and ("DIMENSION_LIST" in obj.attrs or h5py.h5ds.is_scale(obj.id)):
                found.append(True)
                return True
            return None

        f.visititems(visit)
        return bool(found)


def xr_netcdf(path: str, *, netcdf_c: bool = True) -> Any:
    """xarray over the file: netCDF-C (``engine="netcdf4"``) for netCDF files, h5netcdf for
    other HDF5 files (netCDF-C crashes on some PyTables files, taking the process with it)."""
    import xarray as xr

    errors = []
    engines: list[tuple[str, dict[str, Any]]] = [("netcdf4", {})] if netcdf_c else []
    for engine, kw in [*engines, ("h5netcdf", {"phony_dims": "sort"})]:
        try:
            return xr.open_dataset(path, engine=engine, decode_timedelta=True, **kw)  # lazy: read by window
        except Exception as e:
            errors.append(f"{engine}: {type(e).__name__}")
    raise OracleUnavailable("xarray cannot open it (" + "; ".join(errors) + ")")


class OracleUnavailable(Exception):
    """The format's reader cannot give this view of the unit (the column is not applicable)."""


# ----------------------------------------------------------------------------- TIFF
def tiff_names(path: str) -> dict[str, ArrayInfo]:
    import tifffile

    from tests._oracle import tiff_names as names_of

    with tifffile.TiffFile(path) as tif:
        pages = list(tif.pages)
        return {n: ArrayInfo(tuple(p.shape), np.dtype(p.dtype)) for n, p in zip(names_of(pages), pages, strict=True)
                if p.dtype is not None}


def tiff_nodata(path: str) -> dict[str, Any]:
    """Each IFD's GDAL_NODATA as the page's dtype would hold it (none when it cannot: an
    integer image's nodata out of range matches no pixel)."""
    import tifffile

    from tests._oracle import tiff_names as names_of

    out: dict[str, Any] = {}
    with tifffile.TiffFile(path) as tif:
        pages = list(tif.pages)
        for name, p in zip(names_of(pages), pages, strict=True):
            tag = p.tags.get(42113)
            if tag is None or p.dtype is None:
                continue
            try:
                v = float(str(tag.value).strip("\x00 "))
            except ValueError:
                continue
            dt = np.dtype(p.dtype)
            if dt.kind in "iu":
                if v == int(v) and np.iinfo(dt).min <= v <= np.iinfo(dt).max:
                    out[name] = dt.type(int(v))
            elif dt.kind == "f":
                out[name] = np.asarray(v).astype(dt)[()]
    return out


def cf_decoded(values: Any, fill: Any, dims: tuple[str, ...] | None = None) -> Any:
    """``values`` masked where they equal ``fill``, as xarray's CF decoding gives them."""
    import xarray as xr

    data = np.asarray(values)
    dims = dims or tuple(f"d{i}" for i in range(data.ndim))
    var = xr.Variable(dims, data, attrs={} if fill is None else {"_FillValue": fill})
    return np.asarray(xr.conventions.decode_cf_variable("v", var).values)


def tiff_reader(path: str) -> Any:
    from tests._oracle import tiff_read

    def read(name: str, sel: Sel) -> Any:
        return tiff_read(path, name, sel)

    return read


# ----------------------------------------------------------------------------- GRIB
_CFGRIB: dict[tuple[str, bool], list[Any]] = {}


def _cfgrib(path: str, decoded: bool) -> list[Any]:
    """cfgrib's hypercubes of the file, loaded once per process and view."""
    if (path, decoded) not in _CFGRIB:
        for key in [k for k in _CFGRIB if k[0] != path]:  # one unit at a time
            del _CFGRIB[key]
        _CFGRIB[(path, decoded)] = [ds.load() for ds in _open_cfgrib(path, decoded)]
    return _CFGRIB[(path, decoded)]


def _open_cfgrib(path: str, decoded: bool) -> list[Any]:
    import cfgrib

    kw = {"indexpath": ""}
    if decoded:
        return list(cfgrib.open_datasets(path, backend_kwargs=kw, decode_timedelta=True))
    return list(cfgrib.open_datasets(path, backend_kwargs=kw, decode_times=False, decode_timedelta=False))


def _grib_vars(path: str, decoded: bool) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Every variable of every hypercube cfgrib opens, by name, and the alternatives of names
    that several hypercubes hold with other values. A data variable's repeat gets its level
    type as suffix, a coordinate's ``_1``, ``_2``... (design/formats.md names them so); which
    of a coordinate's versions refstore numbers first is its choice, so a coordinate equal to
    any of them is equal."""
    out: dict[str, Any] = {}
    versions: dict[str, list[Any]] = {}
    for ds in _cfgrib(path, decoded):
        for name, var in ds.variables.items():
            key = str(name)
            seen = versions.setdefault(key, [])
            if any(v.equals(var) and v.dims == var.dims for v in seen):
                continue
            seen.append(var.load())
            if len(seen) == 1:
                out[key] = seen[0]
            elif key in ds.data_vars and var.attrs.get("GRIB_typeOfLevel"):
                out[f"{key}_{var.attrs['GRIB_typeOfLevel']}"] = seen[-1]
            else:
                out[f"{key}_{len(seen) - 1}"] = seen[-1]
    _wmo_placed(path, out)
    alts = {}
    for key, seen in versions.items():
        if len(seen) > 1 and key not in _data_names(path, decoded):
            for i in range(len(seen)):
                alts[key if i == 0 else f"{key}_{i}"] = seen
    return out, alts


def _scanning(path: str) -> tuple[int, int, int, int, int, bool] | None:
    """(ny, nx, column_major, alternating, east_to_west, grid of rows and columns) of the file's
    first message where cfgrib misplaces it; None where it does not (or the file's messages
    scan in several ways: left as cfgrib gives them)."""
    import eccodes

    flags = set()
    with open(path, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f)) is not None:
            try:
                get = [eccodes.codes_get(h, k) if eccodes.codes_is_defined(h, k) else 0
                       for k in ("Ny", "Nx", "jPointsAreConsecutive", "alternativeRowScanning", "iScansNegatively",
                                 "numberOfPoints")]  # fmt: skip
                grid2d = eccodes.codes_get(h, "gridType") in _GRID_2D
            finally:
                eccodes.codes_release(h)
            flags.add((*(int(v) for v in get), grid2d))
    if len(flags) != 1:
        return None
    ny, nx, jcons, alt, ineg, points, grid2d = next(iter(flags))
    if ny * nx != points or not ((jcons and grid2d) or (ineg and grid2d) or (alt and not grid2d)):
        return None
    return ny, nx, jcons, alt, ineg, grid2d


_GRID_2D = {"regular_ll", "regular_gg", "rotated_ll", "rotated_gg", "lambert", "lambert_azimuthal_equal_area",
            "albers", "polar_stereographic"}  # fmt: skip


def _wmo_placed(path: str, out: dict[str, Any]) -> None:
    """cfgrib's variables of ``path`` with values and longitudes where WMO's scanning flags and
    ecCodes' per-point coordinates put them (cfgrib reshapes stored values to (Ny, Nx) and
    turns every second row; its longitudes are ``distinctLongitudes``, ascending)."""
    found = _scanning(path)
    if found is None:
        return
    ny, nx, jcons, alt, ineg, grid2d = found
    for name, var in list(out.items()):
        shape = var.shape[-2:] if grid2d else var.shape[-1:]
        if var.dims[-1:] not in (("longitude",), ("x",), ("values",)) or int(np.prod(shape)) != ny * nx:
            continue
        if name in ("latitude", "longitude", "values", "x", "y"):
            continue
        data = np.asarray(var.values).reshape(*var.shape[: var.ndim - len(shape)], ny * nx).copy()
        if grid2d:  # undo cfgrib's turn of every second (ny, nx) row: the stored order
            rows = data.reshape(*data.shape[:-1], ny, nx)
            if alt:
                rows[..., 1::2, :] = rows[..., 1::2, ::-1]
            data = rows.reshape(data.shape)
        lines = data.reshape(*data.shape[:-1], *((nx, ny) if jcons else (ny, nx))).copy()
        if alt:
            lines[..., 1::2, :] = lines[..., 1::2, ::-1]
        if jcons and grid2d:
            lines = np.swapaxes(lines, -1, -2)
        out[name] = var.copy(data=lines.reshape(var.shape))
    if ineg and grid2d and "longitude" in out and out["longitude"].dims == ("longitude",):
        lon = out["longitude"]
        out["longitude"] = lon.copy(data=np.asarray(lon.values)[::-1].copy())


def _data_names(path: str, decoded: bool) -> set[str]:
    return {str(n) for ds in _cfgrib(path, decoded) for n in ds.data_vars}


def grib_oracle(path: str) -> Oracle:
    raw, alts = _grib_vars(path, decoded=False)

    def xr_reader() -> Any:
        import xarray as xr

        return xr.Dataset(_grib_vars(path, decoded=True)[0])

    def read(name: str, sel: Sel) -> Any:
        return raw[name].values[_sel(sel, raw[name].ndim)] if raw[name].ndim else raw[name].values

    def alternatives(name: str, sel: Sel) -> list[Any]:
        return [v.values[_sel(sel, v.ndim)] if v.ndim else v.values for v in alts[name]]

    return Oracle({k: ArrayInfo(tuple(v.shape), np.dtype(v.dtype)) for k, v in raw.items()}, read, xr_reader,
                  "cfgrib", alternatives={k: (lambda sel, k=k: alternatives(k, sel)) for k in alts})


# ----------------------------------------------------------------------------- series, mosaics
def series_oracle(unit: Unit) -> Oracle:
    from tests import _oracle

    paths = list(unit.sources)
    if unit.fmt == "tiff":
        names = tiff_names(paths[0])
        arrays = {n: ArrayInfo((len(paths), *a.shape), a.dtype) for n, a in names.items()}
        arrays["time"] = ArrayInfo((len(paths),), np.dtype("<i8"))
        times = list(unit.times)
        return Oracle(arrays, lambda name, sel: _oracle.tiff_series_read(paths, times, name, sel), xr_values_only=True,
                      nodata=tiff_nodata(paths[0]), times=tuple(times))
    dim = unit.concat_dim
    assert dim is not None
    arrays = {}
    for p in paths:
        for n, a in (netcdf3_names(p) if unit.fmt == "netcdf3" else hdf5_names(p)[0]).items():
            dims = _oracle._dims(p, n)
            if n in arrays and dims and dim in dims:
                arrays[n] = ArrayInfo((arrays[n].shape[0] + a.shape[0], *a.shape[1:]), a.dtype)
            else:
                arrays.setdefault(n, a)

    def xr_reader() -> Any:
        import xarray as xr

        try:
            return xr.open_mfdataset(paths, combine="nested", concat_dim=dim, data_vars="minimal", coords="minimal",
                                     compat="override", join="exact", combine_attrs="override",
                                     decode_timedelta=True)  # fmt: skip
        except Exception as e:
            raise OracleUnavailable(f"xr.open_mfdataset cannot combine them ({type(e).__name__}: {e})") from None

    return Oracle(arrays, lambda name, sel: _oracle.series_read(paths, name, dim, sel), xr_reader,
                  "xr.open_mfdataset")


def mosaic_oracle(unit: Unit) -> Oracle:
    from .units import tiff_geo

    geos = [tiff_geo(p) for p in unit.sources]
    sx, sy = geos[0].scale
    x0 = min(g.origin[0] for g in geos)
    y0 = max(g.origin[1] for g in geos)
    width = max(round((g.origin[0] - x0) / sx) + g.shape[1] for g in geos)
    height = max(round((y0 - g.origin[1]) / sy) + g.shape[0] for g in geos)
    first = tiff_names(unit.sources[0])["image"]
    shape = (height, width, *first.shape[2:])
    cache: dict[str, np.ndarray[Any, Any]] = {}

    def whole() -> np.ndarray[Any, Any]:
        if "image" not in cache:
            nodata = geos[0].nodata
            out = np.full(shape, 0 if nodata is None else nodata, first.dtype)
            for p, g in zip(unit.sources, geos, strict=True):
                col, row = round((g.origin[0] - x0) / sx), round((y0 - g.origin[1]) / sy)
                out[row:row + g.shape[0], col:col + g.shape[1]] = tiff_reader(p)("image", ())
            cache["image"] = out
        return cache["image"]

    return Oracle({"image": ArrayInfo(shape, first.dtype)}, lambda name, sel: whole()[sel], xr_values_only=True,
                  notes=["mosaic: `image` placed by the tiles' transforms; overviews and masks not compared"])


# ----------------------------------------------------------------------------- dispatch
def oracle_for(unit: Unit) -> Oracle:
    if unit.kind == "series":
        return series_oracle(unit)
    if unit.kind == "mosaic":
        return mosaic_oracle(unit)
    path = unit.sources[0]
    if unit.fmt == "hdf5":
        arrays, bad = hdf5_names(path)
        nc4 = is_netcdf4(path)
        return Oracle(arrays, hdf5_reader(path), lambda: xr_netcdf(path, netcdf_c=nc4),
                      "xarray (netcdf4)" if nc4 else "xarray (h5netcdf)", unreadable=bad)
    if unit.fmt == "netcdf3":
        return Oracle(netcdf3_names(path), netcdf3_reader(path), lambda: xr_netcdf(path), "xarray (netcdf4)")
    if unit.fmt == "tiff":
        return Oracle(tiff_names(path), tiff_reader(path), xr_values_only=True, nodata=tiff_nodata(path))
    if unit.fmt == "grib":
        return grib_oracle(path)
    return Oracle({}, None, notes=[f"no reader for {unit.fmt} here: nothing to compare"])
