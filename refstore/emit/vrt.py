"""GDAL multidimensional VRT (GDAL >= 3.1, int8 arrays >= 3.7; checked against GDAL 3.13.3), see
``design/emit.md``.

``<VRTDataset><Group name="/">`` with ``<Dimension>``s, group ``<Attribute>``s, ``<Array>``s and
nested ``<Group>``s. Every placed slab of an array (a ``var`` row with its placement ``d0..``) is
one ``<Source>``: ``<SourceFilename>`` (the remapped location as a GDAL path: ``/vsicurl/`` for
http(s), ``/vsis3/`` for s3://, local paths as they are), ``<SourceArray>`` (the array's full
name in GDAL's netCDF/HDF5 drivers) or, for a TIFF, ``<SourceBand>`` (one Source per band, of the
IFD opened as ``GTIFF_DIR:n:path`` when it is not the first), ``<SourceView>`` with ``newaxis``
where the slab lacks an axis of the array (a band, or a stacking dimension), ``<SourceSlab>``
and ``<DestSlab>``. GDAL reads the source files with its own drivers, so codecs, eras of
codecs/chunks, short strips and HDF5 filter masks are no limit. Coordinates synthesised by the
scan (a TIFF series' ``time``) are written as ``<InlineValues>``.

Arrays refstore records as unsupported because no Python decoder exists for an HDF5 filter
(scaleoffset, nbit, bitshuffle) are expressed: libhdf5 decodes them when GDAL reads the source.
Refused (``UnexpressibleError``): other unsupported arrays (compound, VDS...), string and
float16 dtypes, zero-size dimensions, eras that differ in dtype, fill value or encoding
attributes (``refstore._cf``). Where sources lack an array (holes) GDAL reads ``NoDataValue``
(the ``_FillValue``, declared by ``_input.declare_missing`` when the files have none; else 0).
Whether a source is a TIFF and its IFD numbers are what the scan recorded (source row
``format``/``layout``), so the VRT of a version never depends on the files as they are now;
only collections scanned before that are looked at on disk (with a warning), and there IFDs
other than the first of a remotely scanned TIFF are refused.

The XML is written with a fixed element and attribute order: the same version and options give
byte-identical files.
"""

from __future__ import annotations

import functools
import json
import math
import re
import warnings
import weakref
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import numpy as np

from .._cf import encoding_attrs
from .._keys import DEST_COLUMNS, NOT_PLACED
from .._values import decode_attr
from ..errors import BadInputError, UnexpressibleError
from ..scan._types import ArrayMeta
from ._common import VRT_MARK, atomic_output

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._input import EmitSource

__all__ = ["GDAL_VERSION_CHECKED", "check", "gdal_path", "gdal_type", "write"]

GDAL_VERSION_CHECKED = "3.13.3"
"""The GDAL release the form is tested against (the gdal-wheel package's)."""

_TYPES: dict[str, str] = {
    "u1": "Byte",
    "b1": "Byte",
    "i1": "Int8",  # GDAL >= 3.7 (older releases have no Int8: their drivers widened int8 to Int16)
    "u2": "UInt16",
    "i2": "Int16",
    "u4": "UInt32",
    "i4": "Int32",
    "u8": "UInt64",
    "i8": "Int64",
    "f4": "Float32",
    "f8": "Float64",
    "c8": "CFloat32",
    "c16": "CFloat64",
}

_IFD_NAME = re.compile(r"^(image(_\d+)?|overview_\d+|mask(_\d+)?|mask_overview_\d+)$")
_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
_LIBHDF5_DECODES = re.compile(r"^HDF5 filter \S+ \(id \d+\) has no decoder")
"""Arrays refstore cannot decode but GDAL can: libhdf5 applies its own filters (scaleoffset,
nbit) and registered plugins (bitshuffle, with HDF5_PLUGIN_PATH) when GDAL reads the source."""
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_INLINE_MAX = 1 << 20
"""Synthesised arrays (no array in the source file) up to this many elements are inlined."""


def gdal_type(dtype: str) -> str | None:
    """The GDAL data type name for a numpy dtype string (``<f4``), None if there is none."""
    dt = np.dtype(dtype)
    if dt.names is not None or dt.kind not in "biufc":
        return None
    # float16: GDAL 3.6 has no Float16 and its HDF5 driver widens to Float32 without keeping NaN
    # payloads, so the values would not read back bit for bit
    return _TYPES.get(f"{dt.kind}{dt.itemsize}")


def gdal_path(location: str) -> str:
    """A published location as GDAL opens it: ``/vsicurl/`` for http(s), ``/vsis3/`` for s3,
    ``/vsigs/`` for gs, ``/vsiaz/`` for az; local paths (and ``file://`` URLs) as paths."""
    if location.startswith("file://"):
        return location[len("file://") :]
    if "://" not in location:
        return location
    scheme, rest = location.split("://", 1)
    prefix = {"http": "/vsicurl/", "https": "/vsicurl/", "s3": "/vsis3/", "gs": "/vsigs/", "gcs": "/vsigs/",
              "az": "/vsiaz/", "abfs": "/vsiaz/"}.get(scheme.lower())  # fmt: skip
    if prefix is None:
        raise BadInputError(f"{location}: GDAL has no virtual file system for {scheme}:// (remap it)")
    return prefix + (location if prefix == "/vsicurl/" else rest)


# ---------------------------------------------------------------------------- sources
def _local(location: str) -> str | None:
    if location.startswith("file://"):
        return location[len("file://") :]
    return None if "://" in location else location


class _Recorded:
    """What the scan recorded of each source of the version (source row ``meta``): its format
    and a TIFF's IFD numbers. Sources scanned before refstore recorded them are looked at on
    disk as they are now (``live`` lists them; ``write`` warns)."""

    def __init__(self, src: EmitSource) -> None:
        from ..schema import Kind

        t = src.snapshot.rows(Kind.SOURCE, ["source", "meta"])
        self.meta: dict[str, dict[str, Any]] = {
            loc: json.loads(m or "{}")
            for loc, m in zip(t.column("source").to_pylist(), t.column("meta").to_pylist(), strict=True)
        }
        self.live: set[str] = set()

    def is_tiff(self, location: str) -> bool:
        fmt = self.meta.get(location, {}).get("format")
        if fmt is not None:
            return bool(fmt == "tiff")
        self.live.add(location)
        return _live_is_tiff(location)

    def ifds(self, location: str) -> dict[str, int] | None:
        """Array name -> IFD number as scanned; None when the scan did not record them."""
        ifds = self.meta.get(location, {}).get("layout", {}).get("ifds")
        if ifds is None:
            self.live.add(location)
            return None
        return {str(k): int(v) for k, v in ifds.items()}


_RECORDED: weakref.WeakKeyDictionary[EmitSource, _Recorded] = weakref.WeakKeyDictionary()


def _recorded(src: EmitSource) -> _Recorded:
    rec = _RECORDED.get(src)
    if rec is None:
        rec = _RECORDED[src] = _Recorded(src)
    return rec


@functools.lru_cache(maxsize=1 << 16)
def _live_is_tiff(location: str) -> bool:
    """Collections scanned before formats were recorded: the file's signature, else its name."""
    path = _local(location)
    if path is not None:
        try:
            with open(path, "rb") as f:
                return f.read(4) in _TIFF_MAGIC
        except OSError:
            pass
    return location.lower().rsplit("?", 1)[0].endswith((".tif", ".tiff"))


@functools.lru_cache(maxsize=1 << 16)
def _live_ifd_numbers(location: str, size: int, mtime_ns: int) -> dict[str, int]:
    """Array name -> 0-based IFD number of a local TIFF scanned before IFD numbers were
    recorded (``size``/``mtime_ns`` key the cache)."""
    import tifffile

    from ..scan.tiff import ifd_names

    path = _local(location)
    assert path is not None
    with tifffile.TiffFile(path) as tif:
        return {n: i for i, n in enumerate(ifd_names(list(tif.pages)))}


def _vars(src: EmitSource, name: str) -> list[dict[str, Any]]:
    """The placed slabs of ``name`` in placement order: ``location``, ``meta`` (the source's
    ArrayMeta) and ``dest`` (offset in the global array). An unsupported array is not placed by
    the scan; held by one source with the global shape, it sits at the origin."""
    from ..table.collection import sql_str

    t = src.snapshot.vars(f"array = {sql_str(name)}")
    meta = src.snapshot.array(name)
    rows = []
    for r in t.to_pylist():
        m = ArrayMeta.from_json(r["meta"])
        if r["d0"] != NOT_PLACED:
            dest = tuple(int(r[c]) for c in DEST_COLUMNS[: meta.ndim])
        elif meta.status != "ok" and t.num_rows == 1 and m.shape == meta.shape:
            dest = (0,) * meta.ndim
        else:
            continue
        rows.append({"location": r["source"], "meta": m, "dest": dest})
    rows.sort(key=lambda r: (r["dest"], r["location"]))
    return rows


def _identity(src: EmitSource, location: str) -> tuple[int, int]:
    size, mtime, _etag = src.snapshot.source_identity().get(location, (-1, -1, ""))
    return size, mtime


def _tiff_dir(src: EmitSource, name: str, location: str) -> int:
    """The 0-based IFD of TIFF array ``name`` in the source scanned at ``location``, as the scan
    recorded it (collections scanned before that: read from the local file, 0 for ``image``
    of a remote one)."""
    numbers = _recorded(src).ifds(location)
    if numbers is None:
        if _local(location) is None:
            if name == "image":
                return 0
            raise UnexpressibleError(
                f"array {name!r}: {location} was scanned before refstore recorded IFD numbers, and IFDs other "
                "than the first of a remote TIFF cannot be found without them (rescan it)"
            )
        try:
            numbers = _live_ifd_numbers(location, *_identity(src, location))
        except OSError as e:
            raise UnexpressibleError(f"array {name!r}: cannot read the IFDs of {location}: {e}") from None
    if name not in numbers:
        raise UnexpressibleError(f"array {name!r}: no such IFD in {location}")
    return numbers[name]


def _synthesised(src: EmitSource, name: str, rows: list[dict[str, Any]]) -> bool:
    """An array the scan made up (a TIFF series' time coordinate): no array in the file."""
    rec = _recorded(src)
    return bool(rows) and all(rec.is_tiff(r["location"]) for r in rows) and not _IFD_NAME.match(name.split("/")[-1])


# ---------------------------------------------------------------------------- check
def check(src: EmitSource, meta: ArrayMeta) -> None:
    """Refuse what a GDAL multidimensional VRT cannot express so that GDAL reads it equal."""
    name = meta.name
    if meta.status != "ok" and not _LIBHDF5_DECODES.match(meta.reason or ""):
        raise UnexpressibleError(f"array {name!r} is recorded as unsupported: {meta.reason}")
    if any(c["id"] == "refstore.grib" for c in meta.codecs):
        raise UnexpressibleError(f"array {name!r}: GRIB messages are not mapped to GDAL's GRIB driver here")
    if gdal_type(meta.dtype) is None:
        raise UnexpressibleError(f"array {name!r}: GDAL has no data type that reads {meta.dtype} as stored")
    if any(n == 0 for n in meta.shape):
        raise UnexpressibleError(f"array {name!r}: a GDAL VRT dimension cannot have size 0")
    if meta.eras:
        first = meta.eras[0]
        for era in meta.eras[1:]:
            packing = [encoding_attrs(e["attrs"]) for e in (first, era)]
            if era["dtype"] != first["dtype"] or era["fill_value"] != first["fill_value"] or packing[0] != packing[1]:
                raise UnexpressibleError(
                    f"array {name!r}: its eras differ in dtype, fill value or CF packing or encoding attributes "
                    f"(from {era['first_source']}); one VRT array has one of each"
                )
    rows = _vars(src, name)
    if not rows:
        raise UnexpressibleError(f"array {name!r}: no source holds it")
    if _synthesised(src, name, rows):
        if math.prod(meta.shape) > _INLINE_MAX:
            raise UnexpressibleError(f"array {name!r}: made up by the scan and too large to inline")
        _inline_values(src, meta)
        return
    for r in rows:
        if _recorded(src).is_tiff(r["location"]):
            _tiff_bands(name, r["meta"], src.concat_dim)
            _tiff_dir(src, name, r["location"])


def _tiff_bands(name: str, m: ArrayMeta, concat: str | None) -> tuple[list[str], int]:
    """How one band of a TIFF slab ``m`` (read by GDAL as ``(y, x)``) fills ``m``'s axes: view
    items (``newaxis`` for the band and stacking axes, ``:`` for y and x) and the band count."""
    items = ["newaxis" if d == "band" or d == concat else ":" for d in m.dims]
    if items.count(":") != 2:
        raise UnexpressibleError(f"array {name!r}: a TIFF array with dimensions {m.dims} is not (y, x) plus bands")
    return items, (m.shape[m.dims.index("band")] if "band" in m.dims else 1)


# ---------------------------------------------------------------------------- XML
def _num(value: Any) -> str:
    """A number as GDAL parses it (shortest round-trip repr; nan, inf, -inf)."""
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    f = float(value)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return repr(f)


def _attribute(parent: ET.Element, name: str, enc: dict[str, Any]) -> None:
    """One typed ``<Attribute>``; attributes with no GDAL type (raw bytes, complex) are left out."""
    if enc["type"] == "str":
        values = enc["value"] if isinstance(enc["value"], list) else [enc["value"]]
        dtype = "String"
        text = [str(v) for v in values]
        if any(_XML_INVALID.search(t) for t in text):  # XML 1.0 cannot carry these characters
            return
    else:
        if enc["type"] == "bytes":
            return
        dtype_np = "|b1" if enc["type"] == "bool" else enc["type"]
        gt = gdal_type(dtype_np)
        if gt is None or gt.startswith("C"):
            return
        dtype = gt
        arr = np.atleast_1d(np.asarray(decode_attr(enc)))
        text = [_num(v) for v in arr.ravel().tolist()]
    el = ET.SubElement(parent, "Attribute", {"name": name})
    ET.SubElement(el, "DataType").text = dtype
    for t in text:
        ET.SubElement(el, "Value").text = t


def _read_dtype(meta: ArrayMeta) -> np.dtype[Any]:
    """The dtype GDAL's netCDF driver reads the array as: CF ``_Unsigned = "true"`` on a signed
    integer array makes it the unsigned type of the same size (the same bits)."""
    dt = np.dtype(meta.dtype)
    enc = meta.attrs.get("_Unsigned")
    if dt.kind == "i" and enc is not None and str(enc.get("value", "")).lower() == "true":
        return np.dtype(f"u{dt.itemsize}")
    return dt


def _scalar_attr(meta: ArrayMeta, key: str) -> Any:
    enc = meta.attrs.get(key)
    if enc is None or enc["type"] in ("str", "bytes") or enc.get("shape") not in (None, [], [1]):
        return None
    value = np.asarray(decode_attr(enc)).ravel()
    return value[0] if value.size == 1 else None


def _slab(parent: ET.Element, shape: tuple[int, ...], dest: tuple[int, ...]) -> None:
    if not shape:
        return
    ET.SubElement(parent, "SourceSlab", {
        "offset": ",".join("0" for _ in shape),
        "count": ",".join(str(n) for n in shape),
        "step": ",".join("1" for _ in shape),
    })  # fmt: skip
    ET.SubElement(parent, "DestSlab", {"offset": ",".join(str(d) for d in dest)})


def _view(items: list[str]) -> str | None:
    return None if all(i == ":" for i in items) else "[" + ",".join(items) + "]"


def _sources(src: EmitSource, meta: ArrayMeta, rows: list[dict[str, Any]], parent: ET.Element) -> int:
    """``<Source>`` elements of ``meta`` from its placed slabs ``rows``; returns how many."""
    n = 0
    concat = src.concat_dim
    for r in rows:
        m: ArrayMeta = r["meta"]
        location = src.published(r["location"])
        path = gdal_path(location)
        # an axis the slab lacks: the stacking dimension (a TIFF series)
        stack = meta.dims.index(concat) if m.ndim < meta.ndim and concat in meta.dims else None
        if _recorded(src).is_tiff(r["location"]):
            base, bands = _tiff_bands(meta.name, m, concat)
            ifd = _tiff_dir(src, meta.name, r["location"])
            filename = path if ifd == 0 else f"GTIFF_DIR:{ifd + 1}:{path}"
            for b in range(bands):
                items = list(base)
                shape = [1 if i == "newaxis" else s for i, s in zip(items, m.shape, strict=True)]
                dest = list(r["dest"])
                if stack is not None:
                    items.insert(stack, "newaxis")
                    shape.insert(stack, 1)
                if "band" in meta.dims:
                    dest[meta.dims.index("band")] += b
                el = ET.SubElement(parent, "Source")
                ET.SubElement(el, "SourceFilename").text = filename
                ET.SubElement(el, "SourceBand").text = str(b + 1)
                view = _view(items)
                if view is not None:
                    ET.SubElement(el, "SourceView").text = view
                _slab(el, tuple(shape), tuple(dest))
                n += 1
            continue
        items = [":"] * m.ndim
        shape = list(m.shape)
        if stack is not None:
            items.insert(stack, "newaxis")
            shape.insert(stack, 1)
        el = ET.SubElement(parent, "Source")
        ET.SubElement(el, "SourceFilename").text = path
        ET.SubElement(el, "SourceArray").text = "/" + m.name
        view = _view(items) if m.ndim else None
        if view is not None:
            ET.SubElement(el, "SourceView").text = view
        _slab(el, tuple(shape), r["dest"])
        n += 1
    return n


def _inline_values(src: EmitSource, meta: ArrayMeta) -> np.ndarray[Any, Any]:
    from .._api import Dataset

    values = np.asarray(Dataset(src.snapshot)[meta.name][...]).ravel()
    if values.dtype.kind in "iu" and values.size and float(np.abs(values.astype(np.float64)).max()) > 2**53:
        raise UnexpressibleError(f"array {meta.name!r}: inline integers beyond 2**53 (GDAL parses them as doubles)")
    return values


def _inline(src: EmitSource, meta: ArrayMeta, parent: ET.Element) -> None:
    values = _inline_values(src, meta)
    ET.SubElement(parent, "InlineValues").text = " ".join(_num(v) for v in values.tolist())


def _dim_type(meta: ArrayMeta | None) -> str | None:
    """A GDAL dimension type from a CF coordinate's attributes."""
    if meta is None:
        return None
    attrs = {k: v.get("value") for k, v in meta.attrs.items() if v.get("type") == "str"}
    axis = str(attrs.get("axis", "")).upper()
    units = str(attrs.get("units", ""))
    if axis == "T" or " since " in units:
        return "TEMPORAL"
    if axis == "X" or units in ("degrees_east", "degree_east", "degrees_E"):
        return "HORIZONTAL_X"
    if axis == "Y" or units in ("degrees_north", "degree_north", "degrees_N"):
        return "HORIZONTAL_Y"
    if axis == "Z" or "positive" in attrs:
        return "VERTICAL"
    return None


def _dimensions(arrays: list[ArrayMeta]) -> dict[str, dict[str, int]]:
    """group path -> {dimension name: size}: a name with one size in the whole dataset is declared
    at the root, others in each group that uses them."""
    sizes: dict[str, set[int]] = {}
    for m in arrays:
        for d, n in zip(m.dims, m.shape, strict=True):
            sizes.setdefault(d, set()).add(n)
    out: dict[str, dict[str, int]] = {"": {}}
    for m in arrays:
        group = m.name.rpartition("/")[0]
        for d, n in zip(m.dims, m.shape, strict=True):
            where = "" if len(sizes[d]) == 1 else group
            have = out.setdefault(where, {})
            if have.get(d, n) != n:
                raise UnexpressibleError(f"array {m.name!r}: dimension {d!r} has two sizes in group '/{group}'")
            have[d] = n
    return out


def _held_note(src: EmitSource, name: str) -> str:
    """What to say of an array with held chunks when its source changed: the VRT cannot carry them."""
    if name not in src.held_counts():
        return ""
    return (
        f"array {name!r} has held chunks, which a VRT cannot carry (GDAL reads the source files; "
        "the kerchunk, icechunk, parquet and sqlite forms carry them)"
    )


def _group_path(path: str) -> str:
    return "/" + path if path else "/"


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    dims = _dimensions(arrays)
    group_attrs = src.group_attrs()
    by_name = {m.name: m for m in arrays}
    paths = {""}
    for p in list(dims) + [m.name.rpartition("/")[0] for m in arrays]:
        parts = p.split("/") if p else []
        paths.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    root = ET.Element("VRTDataset")
    root.append(ET.Comment(VRT_MARK))  # marks a VRT refstore may replace
    groups: dict[str, ET.Element] = {}
    # a group's children in GDAL's order: dimensions, attributes, arrays, then groups
    for g in sorted(paths, key=lambda p: (p.count("/") if p else -1, p)):
        parent = root if g == "" else groups[g.rpartition("/")[0]]
        el = groups[g] = ET.SubElement(parent, "Group", {"name": "/" if g == "" else g.rpartition("/")[2]})
        prefix = f"{g}/" if g else ""
        for d, n in sorted(dims.get(g, {}).items()):
            attrs = {"name": d, "size": str(n)}
            coord = by_name.get(prefix + d)
            if coord is not None and coord.dims == (d,):
                dtype = _dim_type(coord)
                if dtype is not None:
                    attrs["type"] = dtype
                attrs["indexingVariable"] = _group_path(prefix + d)
            ET.SubElement(el, "Dimension", attrs)
        for k, enc in sorted((group_attrs.get(g) or {}).items()):
            _attribute(el, k, enc)
    n_sources = 0
    for i, meta in enumerate(arrays):
        group, _, leaf = meta.name.rpartition("/")
        parent = groups[group]
        first_group = next((j for j, c in enumerate(parent) if c.tag == "Group"), len(parent))
        el = ET.Element("Array", {"name": leaf})
        parent.insert(first_group, el)
        read_dt = _read_dtype(meta)
        gt = gdal_type(read_dt.str)
        assert gt is not None
        ET.SubElement(el, "DataType").text = gt
        for d in meta.dims:
            where = "" if d in dims[""] else group
            ET.SubElement(el, "DimensionRef", {"ref": _group_path(f"{where}/{d}" if where else d)})
        units = meta.attrs.get("units")
        if units is not None and units["type"] == "str" and isinstance(units["value"], str):
            ET.SubElement(el, "Unit").text = units["value"]
        nodata = _scalar_attr(meta, "_FillValue")
        if nodata is None:
            nodata = _scalar_attr(meta, "nodata")
        if nodata is not None:
            if read_dt.kind == "u" and np.dtype(meta.dtype).kind == "i":
                nodata = np.asarray(nodata, np.dtype(meta.dtype)).view(read_dt)[()]
            ET.SubElement(el, "NoDataValue").text = _num(nodata)
        offset, scale = _scalar_attr(meta, "add_offset"), _scalar_attr(meta, "scale_factor")
        if offset is not None:
            ET.SubElement(el, "Offset").text = _num(offset)
        if scale is not None:
            ET.SubElement(el, "Scale").text = _num(scale)
        rows = _vars(src, meta.name)
        if _synthesised(src, meta.name, rows):
            _inline(src, meta, el)
        else:
            src.check_sources((r["location"] for r in rows), note=_held_note(src, meta.name))
            n_sources += _sources(src, meta, rows, el)
        for k, enc in sorted(meta.attrs.items()):
            _attribute(el, k, enc)
        if progress is not None:
            progress(i + 1, len(arrays))
    live = sorted(_recorded(src).live)
    if live:
        warnings.warn(
            f"vrt: {len(live)} sources (first {live[0]}) were scanned before refstore recorded their format and "
            "TIFF IFD numbers; those were read from the files as they are now",
            UserWarning,
            stacklevel=2,
        )
    ET.indent(root, space="  ")
    text = ET.tostring(root, encoding="unicode") + "\n"
    with atomic_output(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    published = set(src.sources().column("published").to_pylist())
    return {"refs": n_sources, "sources": len(published), **({"read_from_files": len(live)} if live else {})}
