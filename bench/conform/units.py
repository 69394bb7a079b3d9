"""What the matrix runs over: every file under the given folders, and the series and mosaics
they form, found by rule from the file names and the files themselves (never a list of
names).

- A *file* unit per regular file (``MANIFEST.md``, ``SHA256SUMS`` and dot files aside), its
  format from its first bytes (a GRIB message may follow a header); a folder holding Zarr
  metadata (``.zarray``/``.zgroup``/``zarr.json``) is one ``zarr`` unit (a store, not a source).
- A *series*: files of one folder and format whose names differ only in runs of 4 or more digits
  (dates: CMIP6's
  ``ta_Amon_MODEL_..._195001-195012.nc`` per model and table). netCDF/HDF5: along the
  dimension every file has as its unlimited dimension, else along the one whose coordinate
  variable has CF time units (``... since ...``); none: not a series. TIFF: along time, when the
  digits that differ read as dates (``%Y``, ``%Y%m``, ``%Y%m%d``); the scan gets the matching
  ``--time-from-name``.
- A *mosaic*: GeoTIFFs of one folder with a transform (pixel scale and one tie point; tiles
  georeferenced by GCPs only, as Sentinel-1 SLC measurements, have none), one pixel size,
  dtype and band count, whose extents do not overlap, scanned with ``--mosaic``.
Nothing here imports refstore."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Geo", "Unit", "discover", "sniff", "tiff_geo"]

SKIP_NAMES = frozenset({"MANIFEST.md", "SHA256SUMS", "README.md"})
GRIB_HEADER_MAX = 1 << 16
"""How far into a file a GRIB message may start (WMO/EBCDIC bulletin headers)."""


@dataclass(frozen=True)
class Unit:
    id: str
    kind: str  # file | series | mosaic
    fmt: str  # hdf5 | netcdf3 | tiff | grib | hdf4 | zarr | unknown
    sources: tuple[str, ...]
    concat_dim: str | None = None
    time_from_name: str | None = None
    times: tuple[int, ...] = ()

    def scan_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.kind == "series":
            kw["concat_dim"] = self.concat_dim
        if self.time_from_name:
            kw["time_from_name"] = self.time_from_name
        if self.kind == "mosaic":
            kw["mosaic"] = True
        return kw

    def to_json(self) -> dict[str, Any]:
        return {"unit": self.id, "kind": self.kind, "format": self.fmt, "sources": list(self.sources),
                **({"concat_dim": self.concat_dim} if self.concat_dim else {}),
                **({"time_from_name": self.time_from_name} if self.time_from_name else {})}  # fmt: skip


def sniff(path: str) -> str:
    if os.path.isdir(path):
        return "zarr"
    with open(path, "rb") as fh:
        head = fh.read(GRIB_HEADER_MAX)
    if head[:8] == b"\x89HDF\r\n\x1a\n" or _hdf5_userblock(path):
        return "hdf5"
    if head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05"):
        return "netcdf3"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    if head[:4] == b"\x0e\x03\x13\x01":
        return "hdf4"
    if b"GRIB" in head:
        return "grib"
    return "unknown"


def _hdf5_userblock(path: str) -> bool:
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        at = 512
        while at < min(size, 1 << 20):
            fh.seek(at)
            if fh.read(8) == b"\x89HDF\r\n\x1a\n":
                return True
            at *= 2
    return False


def _is_store(folder: Path) -> bool:
    return any((folder / n).is_file() for n in (".zarray", ".zgroup", "zarr.json"))


def _walk(root: Path, skip: set[Path]) -> tuple[list[Path], list[Path]]:
    files: list[Path] = []
    stores: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here.resolve() in skip and here.resolve() != root.resolve():
            dirnames[:] = []
            continue
        if _is_store(here):
            stores.append(here)
            dirnames[:] = []
            continue
        dirnames.sort()
        files += [here / n for n in sorted(filenames) if n not in SKIP_NAMES and not n.startswith(".")]
    return files, stores


def discover(dirs: list[str]) -> list[Unit]:
    """Every unit under ``dirs`` (a folder given twice, or inside another given one, once)."""
    roots = [Path(d) for d in dirs]
    resolved = {r.resolve() for r in roots}
    seen: set[Path] = set()
    units: list[Unit] = []
    for root in roots:
        files, stores = _walk(root, resolved)
        for p in stores:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                units.append(Unit(_uid(root, p) + "/", "file", "zarr", (str(p),)))
        fresh = [p for p in files if p.resolve() not in seen and p.is_file()]
        seen.update(p.resolve() for p in fresh)
        fmts = {str(p): sniff(str(p)) for p in fresh}
        units += [Unit(_uid(root, p), "file", fmts[str(p)], (str(p),)) for p in fresh]
        units += _groups(root, fresh, fmts)
    return units


def _uid(root: Path, p: Path) -> str:
    return f"{root.name}/{p.relative_to(root)}"


def _groups(root: Path, files: list[Path], fmts: dict[str, str]) -> list[Unit]:
    by_key: dict[tuple[str, str, str], list[Path]] = defaultdict(list)
    by_dir: dict[str, list[Path]] = defaultdict(list)
    for p in files:
        by_key[(str(p.parent), re.sub(r"\d{4,}", "#", p.name), fmts[str(p)])].append(p)
        if fmts[str(p)] == "tiff":
            by_dir[str(p.parent)].append(p)
    out: list[Unit] = []
    for (_, key, fmt), group in sorted(by_key.items()):
        if len(group) < 2:
            continue
        unit = _series(root, key, fmt, sorted(group))
        if unit is not None:
            out.append(unit)
    for _, group in sorted(by_dir.items()):
        unit = _mosaic(root, sorted(group))
        if unit is not None:
            out.append(unit)
    return out


def _series(root: Path, key: str, fmt: str, group: list[Path]) -> Unit | None:
    uid = f"{_uid(root, group[0].parent)}/{key} (series of {len(group)})"
    srcs = tuple(str(p) for p in group)
    if fmt in ("hdf5", "netcdf3"):
        dim = _concat_dim([str(p) for p in group], fmt)
        return None if dim is None else Unit(uid, "series", fmt, srcs, concat_dim=dim)
    if fmt == "tiff":
        dated = _dates([p.name for p in group])
        if dated is None:
            return None
        pattern, times = dated
        order = sorted(range(len(group)), key=lambda i: times[i])
        return Unit(uid, "series", fmt, tuple(srcs[i] for i in order), concat_dim="time", time_from_name=pattern,
                    times=tuple(times[i] for i in order))  # fmt: skip
    return None


def _concat_dim(paths: list[str], fmt: str) -> str | None:
    """The unlimited dimension all files share, else the dimension whose coordinate variable
    has CF time units in every file."""
    unlimited: set[str] | None = None
    timed: set[str] | None = None
    for p in paths:
        try:
            u, t = _netcdf3_dims(p) if fmt == "netcdf3" else _hdf5_dims(p)
        except OSError:
            return None
        unlimited = u if unlimited is None else unlimited & u
        timed = t if timed is None else timed & t
    for found in (unlimited, timed):
        if found and len(found) == 1:
            return next(iter(found))
    return None


def _netcdf3_dims(path: str) -> tuple[set[str], set[str]]:
    from .oracle import _netcdf4

    with _netcdf4().Dataset(path) as nc:
        return ({n for n, d in nc.dimensions.items() if d.isunlimited()},
                {n for n in nc.dimensions if n in nc.variables
                 and " since " in str(getattr(nc.variables[n], "units", ""))})  # fmt: skip


def _hdf5_dims(path: str) -> tuple[set[str], set[str]]:
    """Root-group dimension scales (netCDF-4 dimensions): unlimited ones, CF-time ones."""
    import h5py

    unlimited: set[str] = set()
    timed: set[str] = set()
    with h5py.File(path, "r") as f:
        for name, obj in f.items():
            if not isinstance(obj, h5py.Dataset) or obj.ndim != 1 or not h5py.h5ds.is_scale(obj.id):
                continue
            if obj.maxshape[0] is None:
                unlimited.add(name)
            units = obj.attrs.get("units", b"")
            if " since " in (units.decode("utf-8", "replace") if isinstance(units, bytes) else str(units)):
                timed.add(name)
    return unlimited, timed


_DATE_FORMATS = {4: "%Y", 6: "%Y%m", 8: "%Y%m%d", 10: "%Y%m%d%H"}


def _dates(names: list[str]) -> tuple[str, list[int]] | None:
    """The ``--time-from-name`` pattern and each name's date (seconds since 1970), when the one
    digit run that differs between the names is a date."""
    runs = [re.findall(r"\d{4,}", n) for n in names]
    if len({len(r) for r in runs}) != 1:
        return None
    differ = [i for i in range(len(runs[0])) if len({r[i] for r in runs}) > 1]
    if len(differ) != 1:
        return None
    i = differ[0]
    width = {len(r[i]) for r in runs}
    if len(width) != 1 or (w := width.pop()) not in _DATE_FORMATS:
        return None
    fmt = _DATE_FORMATS[w]
    try:
        dates = [datetime.strptime(r[i], fmt).replace(tzinfo=UTC) for r in runs]
    except ValueError:
        return None
    if len(set(dates)) != len(dates):
        return None
    spans = [m.span() for m in re.finditer(r"\d{4,}", names[0])]
    prefix = re.sub(r"\d", "", names[0][max(0, spans[i][0] - 4):spans[i][0]])
    return prefix + fmt, [int(d.timestamp()) for d in dates]


# ----------------------------------------------------------------------------- mosaics
@dataclass(frozen=True)
class Geo:
    scale: tuple[float, float]
    origin: tuple[float, float]
    shape: tuple[int, ...]
    dtype: str
    nodata: float | None


def tiff_geo(path: str) -> Geo | None:
    """The GeoTIFF transform of the first page (None: GCPs only, a rotation, or no geokeys)."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        tags = page.tags
        scale = tags.get("ModelPixelScaleTag")
        tie = tags.get("ModelTiepointTag")
        if scale is None or tie is None or len(tie.value) != 6:
            return None
        sx, sy = float(scale.value[0]), float(scale.value[1])
        i, j, _, x, y, _ = (float(v) for v in tie.value)
        nd = tags.get("GDAL_NODATA")
        nodata = float(str(nd.value).strip("\x00 ")) if nd is not None else None
        return Geo((sx, sy), (x - i * sx, y + j * sy), tuple(page.shape), str(page.dtype), nodata)


def _mosaic(root: Path, group: list[Path]) -> Unit | None:
    if len(group) < 2:
        return None
    try:
        geos = [tiff_geo(str(p)) for p in group]
    except Exception:
        return None
    if any(g is None for g in geos):
        return None
    gs = [g for g in geos if g is not None]
    if len({(g.scale, g.dtype, g.shape[2:]) for g in gs}) != 1:
        return None
    boxes = [(g.origin[0], g.origin[1] - g.shape[0] * g.scale[1], g.origin[0] + g.shape[1] * g.scale[0], g.origin[1])
             for g in gs]  # fmt: skip
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            if _overlap(boxes[a], boxes[b]):
                return None
    return Unit(f"{_uid(root, group[0].parent)}/* (mosaic of {len(group)})", "mosaic", "tiff",
                tuple(str(p) for p in group))


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
