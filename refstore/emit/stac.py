"""A STAC Collection for one collection version: extents, datacube, version, one asset per form.

``catalog(col, "oisst.stac.json", as_of="release-2026-10", assets={"kerchunk-json": URL})``
writes one STAC 1.1 Collection (collection-level assets, as catalogs of Zarr, kerchunk and
Icechunk datacubes do) built with pystac (the optional extra ``catalog``):

- ``extent``: the WGS84 bounding box of the cells' EDGES. From CF latitude/longitude dimension
  coordinates: their CF ``bounds`` variable when they have one, else half a step beyond the first
  and last centre; latitudes clamped to +-90; longitudes whose edges span 360 degrees or more are
  -180..180, others folded to -180..180 with W > E only when the grid really crosses the
  antimeridian. Auxiliary coordinates (stations, 2-D curvilinear grids) give the min and max of
  their points. Else from a GeoTIFF transform: the raster's edges, reprojected from a projected
  CRS with pyproj (part of the ``catalog`` extra; 21 points per side, as GDAL's
  ``transform_bounds``). The temporal interval comes from a CF time coordinate (cftime in its
  calendar); an end no Gregorian timestamp can hold (a climatology's year 0, a 360-day
  calendar's 30 February) is left open (``null``) with a ``CatalogWarning`` and a report note;
  the interval is open when the version has no time.
- the datacube extension: ``cube:dimensions`` (spatial with axis and extent, temporal with ISO
  extent, other dimensions with their coordinate's extent and unit) and ``cube:variables``
  (dimensions, ``unit``, stored ``data_type``, ``nodata``, description).
- the version extension: ``version`` is the tag the caller named, else the version number;
  ``refstore:version`` / ``refstore:tag`` spell both.
- one asset per ``FORM=URL`` given (the URL where that form of this version is published), with
  its media type, roles and, for the zarr-shaped forms, the xarray-assets fields readers use
  (see ``ASSETS``); kerchunk's ``remote_protocol`` comes from the remapped source locations.
  An asset ``sources`` points at the sources' common published prefix, when they have one.

Everything comes from one Lance version (``EmitSource``) and the JSON is written with sorted
keys: the same REF and assets give the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .._ref import tag_name
from ..errors import BadInputError, CatalogWarning
from ..table.hold import _attr, _coord_kind, _unpacked
from . import FORMATS
from ._input import EmitSource

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..scan._types import ArrayMeta
    from ..table.collection import Collection

__all__ = ["ASSETS", "CatalogReport", "CatalogWarning", "catalog", "parse_assets"]

STAC_VERSION = "1.1.0"


@dataclass(frozen=True, slots=True)
class AssetKind:
    """How a published form is described as a STAC asset."""

    media_type: str
    roles: tuple[str, ...]
    title: str
    open_kwargs: dict[str, Any] | None = None
    """``xarray:open_kwargs`` (None: not an xarray asset)."""


ASSETS: dict[str, AssetKind] = {
    "kerchunk-json": AssetKind(
        "application/json", ("data", "references"), "kerchunk references (JSON)",
        {"engine": "zarr", "consolidated": True, "zarr_format": 2},
    ),
    "kerchunk-parquet": AssetKind(
        "application/vnd.apache.parquet", ("data", "references"), "kerchunk references (Parquet)",
        {"engine": "zarr", "consolidated": True, "zarr_format": 2},
    ),
    "icechunk": AssetKind(
        "application/vnd.zarr+icechunk", ("data", "references", "virtual"), "Icechunk repository (virtual)",
        {"engine": "zarr", "consolidated": False, "zarr_format": 3},
    ),
    "parquet": AssetKind("application/vnd.apache.parquet", ("references", "index"), "chunk references (Parquet)"),
    "sqlite": AssetKind("application/vnd.sqlite3", ("references", "index"), "chunk references (mdim-refs SQLite)"),
    "vrt": AssetKind("application/xml", ("data", "virtual"), "GDAL multidimensional VRT"),
}  # fmt: skip
"""Form name -> asset description. Every emit form has one."""

_SOURCE_TYPES = {
    ".nc": "application/netcdf", ".nc4": "application/netcdf", ".cdf": "application/netcdf",
    ".h5": "application/x-hdf5", ".hdf5": "application/x-hdf5", ".he5": "application/x-hdf5",
    ".hdf": "application/x-hdf", ".tif": "image/tiff; application=geotiff", ".tiff": "image/tiff; application=geotiff",
    ".grib": "application/wmo-GRIB2", ".grib2": "application/wmo-GRIB2", ".grb2": "application/wmo-GRIB2",
    ".grib1": "application/wmo-GRIB1", ".grb1": "application/wmo-GRIB1", ".grb": "application/wmo-GRIB",
}  # fmt: skip

_DATA_TYPES = {"i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64", "u1": "uint8", "u2": "uint16",
               "u4": "uint32", "u8": "uint64", "f2": "float16", "f4": "float32", "f8": "float64",
               "c8": "cfloat32", "c16": "cfloat64"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CatalogReport:
    out: str
    version: int
    tag: str | None
    bbox: tuple[float, float, float, float]
    interval: tuple[str | None, str | None]
    assets: tuple[str, ...]
    notes: tuple[str, ...] = ()
    """What was left open and why (e.g. a climatology's year-0 times), also warned."""

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "version": self.version, "tag": self.tag, "bbox": list(self.bbox),
                "interval": list(self.interval), "assets": list(self.assets), "notes": list(self.notes)}  # fmt: skip


def parse_assets(specs: list[str]) -> dict[str, str]:
    """``FORM=URL`` items -> {form: url}; unknown forms, empty URLs and repeats are bad input."""
    out: dict[str, str] = {}
    for spec in specs:
        form, sep, url = spec.partition("=")
        if not sep or not url.strip():
            raise BadInputError(f"--asset {spec!r}: give FORM=URL, e.g. kerchunk-json=https://host/oisst.json")
        if form not in FORMATS:
            raise BadInputError(f"--asset {spec!r}: unknown form {form!r} (one of: {', '.join(FORMATS)})")
        if form in out:
            raise BadInputError(f"--asset {spec!r}: {form} given twice")
        out[form] = url.strip()
    return out


# --------------------------------------------------------------------------- coordinates
class _Coords:
    """The version's coordinate arrays, read once through the table (as ``hold`` reads them)."""

    def __init__(self, src: EmitSource, progress: Callable[[int, int], None] | None = None) -> None:
        self.src = src
        self.arrays = {n: m for n, m in src.arrays().items() if m.status == "ok"}
        self._cache: dict[str, np.ndarray[Any, Any]] = {}
        self._progress = progress
        self.notes: list[str] = []
        """What the catalog leaves open and why (one line each)."""
        dims = {d for m in self.arrays.values() for d in m.dims}
        # what ``build`` reads: numeric 1-D dimension coordinates, and lat/lon for the bbox
        self._expected = {
            n for n, m in self.arrays.items() if len(m.shape) == 1 and n in dims and np.dtype(m.dtype).kind in "iuf"
        } | set(self.geographic("lat")) | set(self.geographic("lon"))
        self.tick()

    def tick(self) -> None:
        """Report coordinate arrays read so far out of those expected (``progress(done, total)``)."""
        if self._progress is not None:
            done = len(self._cache)
            self._progress(done, max(done, len(self._expected)))

    def values(self, name: str) -> np.ndarray[Any, Any]:
        """Real-unit values (CF scale_factor/add_offset applied; fill values dropped)."""
        if name not in self._cache:
            from ..read.array import Array

            meta = self.arrays[name]
            raw = np.asarray(Array(self.src.snapshot, meta)[...]).ravel()
            fill = _attr(meta, "_FillValue")
            if fill is not None and raw.dtype.kind in "iuf":
                raw = raw[raw != np.asarray(fill, raw.dtype)]
            v = _unpacked(meta, raw)
            self._cache[name] = v[np.isfinite(v)]
            self.tick()
        return self._cache[name]

    def of_kind(self, kind: str) -> list[str]:
        """1-D coordinate arrays (named as a dimension of some array) of a kind, sorted by name."""
        dims = {d for m in self.arrays.values() for d in m.dims}
        return [n for n, m in self.arrays.items() if len(m.shape) == 1 and n in dims and _coord_kind(m) == kind]

    def geographic(self, kind: str) -> list[str]:
        """``lat``/``lon`` arrays for the bbox: the dimension coordinates, else any array of that
        kind (auxiliary coordinates: station positions, 2-D curvilinear grids), sorted by name."""
        return self.of_kind(kind) or [
            n for n, m in self.arrays.items() if m.shape and np.dtype(m.dtype).kind in "iuf" and _coord_kind(m) == kind
        ]

    def transformed(self) -> list[ArrayMeta]:
        """Arrays with a GeoTIFF transform and ``y*``/``x*`` dimensions, sorted by name."""
        return [m for m in self.arrays.values() if _attr(m, "transform") is not None and _yx(m) is not None]


def _yx(meta: ArrayMeta) -> tuple[int, int] | None:
    ys = [i for i, d in enumerate(meta.dims) if d.startswith("y")]
    xs = [i for i, d in enumerate(meta.dims) if d.startswith("x")]
    return (ys[0], xs[0]) if ys and xs else None


def _affine(meta: ArrayMeta) -> tuple[float, float, float, float, int, int]:
    """x0, dx, y0, dy, height, width of a north-up transform."""
    x0, dx, rx, y0, ry, dy = (float(t) for t in _attr(meta, "transform"))
    if rx != 0 or ry != 0:
        raise BadInputError(f"array {meta.name!r}: a rotated or sheared raster grid has no extent here")
    iy, ix = _yx(meta) or (0, 0)
    return x0, dx, y0, dy, meta.shape[iy], meta.shape[ix]


def _fold(x: float) -> float:
    """A longitude in -180..180 (unchanged when it already is: no rounding)."""
    return float(x) if -180.0 <= x <= 180.0 else float(np.mod(x + 180.0, 360.0) - 180.0)


def _lon_union(spans: list[tuple[float, float]]) -> tuple[float, float]:
    """West and east (-180..180) of longitude intervals ``(lo, hi)`` (``hi - lo`` their width):
    the circle less its largest uncovered gap, so a grid across the antimeridian gives W > E and
    intervals covering 360 degrees give -180..180."""
    if any(hi - lo >= 360.0 for lo, hi in spans):
        return -180.0, 180.0
    ivs = sorted((lo, hi) if _fold(lo) == lo else (_fold(lo), _fold(lo) + hi - lo) for lo, hi in spans)
    if ivs[0][0] == 180.0:  # a lone 180 folds first
        ivs = sorted((a - 360.0, b - 360.0) if a == 180.0 else (a, b) for a, b in ivs)
    merged = [list(ivs[0])]
    for a, b in ivs[1:]:
        if a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    gaps = [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]
    gaps.append(merged[0][0] + 360.0 - merged[-1][1])
    i = int(np.argmax(gaps))
    if gaps[i] <= 0:
        return -180.0, 180.0
    west, east = merged[(i + 1) % len(merged)][0], merged[i][1]
    return _fold(west), _fold(east)


def _lon_span(values: np.ndarray[Any, Any]) -> tuple[float, float]:
    """West and east of longitude points in degrees, folded to -180..180: across the largest gap
    between neighbours (around the circle), so points across the antimeridian give W > E."""
    v = np.unique(np.mod(values + 180.0, 360.0) - 180.0)
    if v.size == 1:
        return float(v[0]), float(v[0])
    gaps = np.diff(v)
    wrap = v[0] + 360.0 - v[-1]
    i = int(np.argmax(gaps))
    if wrap >= gaps[i]:
        return float(v[0]), float(v[-1])
    return float(v[i + 1]), float(v[i])


def _edges(c: _Coords, name: str) -> tuple[float, float]:
    """The cell edges of a 1-D dimension coordinate, as (lowest, highest): its CF ``bounds``
    variable when it has one, else half a step beyond the first and last centre."""
    meta = c.arrays[name]
    bounds = _attr(meta, "bounds")
    if bounds is not None:
        bname = str(bounds)
        group = name.rpartition("/")[0]
        for cand in (bname, f"{group}/{bname}" if group else bname):
            if cand in c.arrays:
                b = c.values(cand)
                if b.size:
                    return float(b.min()), float(b.max())
    v = c.values(name)
    if v.size < 2:
        return float(v.min()), float(v.max())
    first, last = v[0] - (v[1] - v[0]) / 2, v[-1] + (v[-1] - v[-2]) / 2
    return float(min(first, last)), float(max(first, last))


def _coordinate_bbox(c: _Coords) -> tuple[float, float, float, float] | None:
    """The bbox of CF latitude/longitude: cell edges of dimension coordinates (latitudes clamped
    to +-90), min/max of auxiliary ones (points: stations, curvilinear grids)."""
    lat_dims, lon_dims = c.of_kind("lat"), c.of_kind("lon")
    if lat_dims and lon_dims:
        lat_spans = [_edges(c, n) for n in lat_dims if c.values(n).size]
        lon_spans = [_edges(c, n) for n in lon_dims if c.values(n).size]
        if lat_spans and lon_spans:
            w, e = _lon_union(lon_spans)
            s, n = min(a for a, _ in lat_spans), max(b for _, b in lat_spans)
            return w, max(s, -90.0), e, min(n, 90.0)
    lats, lons = c.geographic("lat"), c.geographic("lon")
    if lats and lons:
        lat = np.concatenate([c.values(n) for n in lats])
        lon = np.concatenate([c.values(n) for n in lons])
        if lat.size and lon.size:
            w, e = _lon_span(lon)
            return w, float(lat.min()), e, float(lat.max())
    return None


def _raster_bbox(meta: ArrayMeta) -> tuple[float, float, float, float]:
    """The WGS84 bbox of a GeoTIFF raster's edges: as they are in a geographic CRS, else the
    edges reprojected with pyproj (21 points per side, as GDAL's ``OCTTransformBounds``)."""
    x0, dx, y0, dy, h, wd = _affine(meta)
    (xa, xb), (ya, yb) = sorted((x0, x0 + wd * dx)), sorted((y0, y0 + h * dy))
    crs = str(_attr(meta, "crs") or "")
    if crs == "EPSG:4326":
        return xa, ya, xb, yb
    if not crs:
        raise BadInputError(f"array {meta.name!r}: its raster has no CRS, so no WGS84 extent")
    try:
        import pyproj
    except ImportError:
        raise BadInputError(
            f"array {meta.name!r}: CRS {crs} needs pyproj to reproject to WGS84: pip install 'refstore[catalog]'"
        ) from None
    try:
        src = pyproj.CRS.from_user_input(crs)
        if src.is_geographic and src.to_epsg() == 4326:
            return xa, ya, xb, yb
        tr = pyproj.Transformer.from_crs(src, "EPSG:4326", always_xy=True)
        w, s, e, n = tr.transform_bounds(xa, ya, xb, yb, densify_pts=21)
    except (pyproj.exceptions.CRSError, pyproj.exceptions.ProjError) as err:
        raise BadInputError(f"array {meta.name!r}: cannot reproject CRS {crs} to WGS84: {err}") from None
    if not all(math.isfinite(x) for x in (w, s, e, n)):
        raise BadInputError(f"array {meta.name!r}: its raster's edges in {crs} have no WGS84 extent")
    return float(w), float(s), float(e), float(n)


def _bbox(c: _Coords) -> tuple[float, float, float, float]:
    box = _coordinate_bbox(c)
    if box is not None:
        return box
    boxes = [_raster_bbox(meta) for meta in c.transformed()]
    if boxes:
        spans = [(w, e if e >= w else e + 360.0) for w, _, e, _ in boxes]
        w, e = _lon_union(spans)
        s, n = min(b[1] for b in boxes), max(b[3] for b in boxes)
        return w, max(s, -90.0), e, min(n, 90.0)
    raise BadInputError(
        f"version {c.src.version}: no coordinates for a spatial extent (CF latitude/longitude or a GeoTIFF "
        "transform with a CRS)"
    )


def _iso(c: _Coords, meta: ArrayMeta, value: float) -> str | None:
    """A CF time value as RFC 3339 UTC (``Z``) via cftime, in the coordinate's calendar; None (an
    open end, noted in ``c.notes``) when the calendar gives no date a Gregorian timestamp can hold
    (a climatology's year 0, a 360-day calendar's 30 February)."""
    import cftime

    units = str(_attr(meta, "units"))
    cal = str(_attr(meta, "calendar") or "standard")
    try:
        d = cftime.num2date(value, units, calendar=cal, only_use_cftime_datetimes=True)
        real = datetime(d.year, d.month, d.day, d.hour, d.minute, d.second, d.microsecond)
    except (ValueError, TypeError, OverflowError) as e:
        note = f"array {meta.name!r}: time {value:g} in '{units}' ({cal}) is no Gregorian date ({e}): left open"
        if note not in c.notes:
            c.notes.append(note)
        return None
    return real.isoformat(timespec="seconds" if not real.microsecond else "microseconds") + "Z"


def _time_extent(c: _Coords, name: str) -> tuple[str | None, str | None] | None:
    v = c.values(name)
    if not v.size:
        return None
    meta = c.arrays[name]
    return _iso(c, meta, float(v.min())), _iso(c, meta, float(v.max()))


def _interval(c: _Coords) -> tuple[str | None, str | None]:
    """The temporal interval over every time coordinate; an end any of them leaves open is open."""
    spans = [s for s in (_time_extent(c, n) for n in c.of_kind("time")) if s is not None]
    if not spans:
        return None, None
    starts, ends = [s[0] for s in spans], [s[1] for s in spans]
    start = None if None in starts else min(x for x in starts if x is not None)
    end = None if None in ends else max(x for x in ends if x is not None)
    return start, end


# --------------------------------------------------------------------------- datacube
def _num(x: Any) -> float:
    """A JSON float (no ``-0.0``)."""
    return float(x) + 0.0


def _dimensions(c: _Coords) -> dict[str, dict[str, Any]]:
    sizes: dict[str, int] = {}
    for m in c.arrays.values():
        for d, n in zip(m.dims, m.shape, strict=True):
            sizes.setdefault(d, n)
    affine: dict[str, tuple[ArrayMeta, str]] = {}
    for tm in c.transformed():
        iy, ix = _yx(tm) or (0, 0)
        affine.setdefault(tm.dims[iy], (tm, "y"))
        affine.setdefault(tm.dims[ix], (tm, "x"))
    out: dict[str, dict[str, Any]] = {}
    for d in sorted(sizes):
        meta = c.arrays.get(d)
        if meta is not None and len(meta.shape) == 1 and np.dtype(meta.dtype).kind in "iuf":
            kind = _coord_kind(meta)
            v = c.values(d)
            unit = _attr(meta, "units")
            desc = _attr(meta, "long_name") or _attr(meta, "standard_name")
            if kind == "time":
                span = _time_extent(c, d)
                dim: dict[str, Any] = {"type": "temporal", "extent": list(span) if span else [None, None]}
            elif kind in ("lat", "lon", "x", "y"):
                axis = "y" if kind in ("lat", "y") else "x"
                dim = {"type": "spatial", "axis": axis,
                       "extent": [_num(v.min()), _num(v.max())] if v.size else [None, None]}  # fmt: skip
                if kind in ("lat", "lon"):
                    dim["reference_system"] = 4326
                if unit is not None:
                    dim["unit"] = str(unit)
            else:
                vertical = str(_attr(meta, "axis") or "").upper() == "Z" or _attr(meta, "positive") is not None
                dim = {"type": "spatial" if vertical else "other",
                       "extent": [_num(v.min()), _num(v.max())] if v.size else [None, None]}  # fmt: skip
                if vertical:
                    dim["axis"] = "z"
                if unit is not None:
                    dim["unit"] = str(unit)
            if desc is not None:
                dim["description"] = str(desc)
        elif d in affine:
            am, axis = affine[d]
            x0, dx, y0, dy, h, w = _affine(am)
            a0, step, n = (x0, dx, w) if axis == "x" else (y0, dy, h)
            centres = sorted((a0 + step / 2, a0 + step * (n - 0.5)))
            crs = str(_attr(am, "crs") or "")
            dim = {"type": "spatial", "axis": axis, "extent": [_num(centres[0]), _num(centres[1])],
                   "step": _num(step)}  # fmt: skip
            if crs.startswith("EPSG:") and crs[5:].isdigit():
                dim["reference_system"] = int(crs[5:])
        else:  # no coordinate: an index
            dim = {"type": "other", "extent": [0, sizes[d] - 1], "step": 1, "description": "index"}
        out[d] = dim
    return out


def _nodata(f: float, *, integer: bool) -> float | int | str:
    """The datacube ``nodata`` value: a number, or ``"nan"``, ``"inf"``, ``"-inf"``."""
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return int(f) if integer else f


def _variables(c: _Coords, dims: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, meta in c.arrays.items():
        if name in dims and len(meta.shape) == 1:
            continue  # a dimension coordinate: described in cube:dimensions
        dt = np.dtype(meta.dtype)
        var: dict[str, Any] = {
            "type": "data",
            "dimensions": list(meta.dims),
            "data_type": _DATA_TYPES.get(f"{dt.kind}{dt.itemsize}", "other"),
        }
        unit = _attr(meta, "units")
        if unit is not None:
            var["unit"] = str(unit)
        desc = _attr(meta, "long_name") or _attr(meta, "standard_name")
        if desc is not None:
            var["description"] = str(desc)
        nodata = _attr(meta, "_FillValue")
        if nodata is None:
            nodata = _attr(meta, "missing_value")
        if nodata is not None and dt.kind in "iuf":
            var["nodata"] = _nodata(float(np.asarray(nodata).ravel()[0]), integer=dt.kind in "iu")
        out[name] = var
    return out


# --------------------------------------------------------------------------- assets
def _remote_protocol(src: EmitSource) -> str | None:
    """The fsspec protocol of the published source locations (one for all, else None)."""
    protos = {p.split("://", 1)[0] if "://" in p else "file" for p in src.sources().column("published").to_pylist()}
    return protos.pop() if len(protos) == 1 else None


def _sources_asset(src: EmitSource) -> dict[str, Any] | None:
    pub = [p for p in src.sources().column("published").to_pylist() if p]
    if not pub:
        return None
    parts = [p.split("/")[:-1] for p in pub]  # folders, compared whole
    common: list[str] = []
    for names in zip(*parts, strict=False):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    prefix = "/".join(common) + "/" if common else ""
    if prefix in ("", "/", "file:///") or prefix.endswith("://"):
        return None
    exts = {os.path.splitext(p)[1].lower() for p in pub}
    asset: dict[str, Any] = {"href": prefix, "roles": ["data", "source"], "title": f"{len(pub)} source files"}
    kinds = {_SOURCE_TYPES.get(e) for e in exts}
    if len(kinds) == 1 and None not in kinds:
        asset["type"] = kinds.pop()
    return asset


def _asset(src: EmitSource, form: str, href: str) -> dict[str, Any]:
    kind = ASSETS[form]
    asset: dict[str, Any] = {"href": href, "type": kind.media_type, "roles": list(kind.roles), "title": kind.title}
    if kind.open_kwargs is not None:
        asset["xarray:open_kwargs"] = dict(kind.open_kwargs)
    if form.startswith("kerchunk"):
        proto = _remote_protocol(src)
        if proto is not None:
            opts: dict[str, Any] = {"remote_protocol": proto}
            if proto != "file":  # zarr 3 opens reference:// asynchronously: the remote filesystem must be too
                opts["remote_options"] = {"asynchronous": True}
            asset["xarray:storage_options"] = opts
    if form == "icechunk":
        asset["version"] = f"refstore-v{src.version}"  # the Icechunk tag every emit of this version writes
    return asset


# --------------------------------------------------------------------------- the collection
def build(src: EmitSource, assets: dict[str, str], *, progress: Callable[[int, int], None] | None = None
          ) -> tuple[dict[str, Any], CatalogReport]:  # fmt: skip
    """The STAC Collection of ``src`` as a JSON-ready dict, and the report. ``progress(done,
    total)``: coordinate arrays read through the table."""
    import pystac
    from pystac.extensions.datacube import DatacubeExtension
    from pystac.extensions.version import VersionExtension
    from pystac.extensions.xarray_assets import XarrayAssetsExtension

    c = _Coords(src, progress)
    if not c.arrays:
        raise BadInputError(f"{src.uri}: nothing to catalog at version {src.version}")
    bbox = _bbox(c)
    start, end = _interval(c)
    root = src.group_attrs().get("", {})
    ident = os.path.basename(src.uri.rstrip("/")) or "refstore"
    title = root.get("title", {}).get("value")
    desc = root.get("summary", {}).get("value") or title or f"refstore collection {ident}"

    def when(s: str | None) -> datetime | None:
        return None if s is None else datetime.fromisoformat(s.replace("Z", "+00:00"))

    coll = pystac.Collection(
        id=ident,
        description=str(desc),
        title=None if title is None else str(title),
        extent=pystac.Extent(pystac.SpatialExtent([list(bbox)]), pystac.TemporalExtent([[when(start), when(end)]])),
        license="other",
    )
    dims = _dimensions(c)
    DatacubeExtension.add_to(coll)
    coll.extra_fields["cube:dimensions"] = dims
    coll.extra_fields["cube:variables"] = _variables(c, dims)
    VersionExtension.ext(coll, add_if_missing=True).apply(version=src.tag or str(src.version))
    coll.extra_fields["refstore:version"] = src.version
    coll.extra_fields["refstore:tag"] = src.tag
    source_asset = _sources_asset(src)
    if source_asset is not None:
        coll.add_asset("sources", pystac.Asset.from_dict(source_asset))
    for form in sorted(assets):
        coll.add_asset(form, pystac.Asset.from_dict(_asset(src, form, assets[form])))
    if any(ASSETS[f].open_kwargs is not None for f in assets):
        XarrayAssetsExtension.add_to(coll)
    d = coll.to_dict(include_self_link=False, transform_hrefs=False)
    d["stac_extensions"] = sorted(d["stac_extensions"])
    rep = CatalogReport("", src.version, src.tag, bbox, (start, end), tuple(sorted(assets)), tuple(c.notes))
    return d, rep


def catalog(
    col: Collection,
    out: str,
    *,
    as_of: int | str | None = None,
    assets: dict[str, str] | None = None,
    remap: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> CatalogReport:
    """Write the STAC Collection of the collection at ``as_of`` (latest when None) to ``out``.

    ``assets``: form name -> URL where that form of this version is published (unknown forms
    are bad input). The same version and assets give byte-identical output. ``progress(done,
    total)`` is called as coordinate arrays are read."""
    from ._common import atomic_output, check_out, is_stac_catalog

    for form in assets or {}:
        if form not in ASSETS:
            raise BadInputError(f"unknown form {form!r} (one of: {', '.join(ASSETS)})")
    try:
        import pystac  # noqa: F401
    except ImportError:
        raise BadInputError("catalog needs pystac: pip install 'refstore[catalog]'") from None
    snap = col.snapshot(as_of)
    tag = tag_name(as_of)
    src = EmitSource(snap, tag=tag, remap=remap)
    check_out(src, "catalog", out)  # replaces only a catalog refstore wrote (``FILE_FORMS``)
    d, rep = build(src, dict(assets or {}), progress=progress)
    text = json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    with atomic_output(out, previous=is_stac_catalog) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    for note in rep.notes:
        warnings.warn(note, CatalogWarning, stacklevel=2)
    return CatalogReport(os.path.abspath(out), rep.version, rep.tag, rep.bbox, rep.interval, rep.assets, rep.notes)
