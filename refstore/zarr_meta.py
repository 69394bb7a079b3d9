"""Zarr metadata for a global array: codec pipelines as zarr v2 (numcodecs ids) and zarr v3
(``bytes`` + ``numcodecs.*`` / ``imagecodecs_*`` names), dtypes, fill values and attributes.

Shared by every zarr-shaped form (kerchunk JSON/Parquet, Icechunk, the zarr Store over the
table). What a zarr reader cannot decode the way refstore does raises
:class:`~refstore.errors.UnexpressibleError` naming the array; a form never writes a store that
reads wrong.

Codec configs come from the scanners in encode order (HDF5 filter order; TIFF: predictor, then
compression) — see ``design/formats.md``.
"""

from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ._values import decode_attr, decode_fill, nc_attr
from .errors import UnexpressibleError
from .plan.grid import rle_encode

if TYPE_CHECKING:
    from .scan._types import ArrayMeta

__all__ = [
    "NCZARR_ATTR",
    "V2_COMPRESSORS",
    "attr_types",
    "attr_value",
    "attr_values",
    "is_vlen_utf8",
    "plain_attrs",
    "plain_value",
    "register_codecs",
    "v2_array",
    "v2_attrs",
    "v2_codecs",
    "v2_filters",
    "v3_array",
    "v3_codecs",
    "v3_decoded_array",
    "v3_group",
    "v3_unexpressible",
]


# --------------------------------------------------------------------------- attributes
def plain_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [plain_value(v) for v in value.tolist()] if value.ndim else plain_value(value[()])
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value)  # NaN/Infinity: written as JSON NaN/Infinity (Python's json and zarr read them)
    if isinstance(value, (np.complexfloating, complex)):
        return [float(value.real), float(value.imag)]
    return value


def attr_value(enc: dict[str, Any]) -> Any:
    """One attribute (typed JSON) as the plain JSON value every zarr form writes: what
    netCDF4-python gives (:func:`~refstore._values.nc_attr`: one-element strings and numbers as
    scalars, so zarr readers and xarray see ``'C'``, not ``['C']``; xarray would unpack with a
    list ``scale_factor`` to an object array)."""
    return plain_value(nc_attr(enc))


def attr_values(attrs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """:func:`attr_value` of every attribute, sorted by name."""
    return {k: attr_value(v) for k, v in sorted(attrs.items())}


NCZARR_ATTR = "_nczarr_attr"
"""The zarr v2 ``.zattrs`` key of NCZarr's attribute types (netCDF-C's ``{"types": {name: "<f4"}}``);
readers hide it (xarray drops ``_nc*`` attributes, netCDF-C reads it as the types)."""


def attr_types(attrs: dict[str, dict[str, Any]], *, stored_fill: Any = None) -> dict[str, Any] | None:
    """What the plain JSON values of ``attrs`` (:func:`attr_value`) lose, as NCZarr spells it:
    ``{"types": {name: numpy dtype string}}`` for every numeric attribute; plus, under
    ``"refstore"``, what NCZarr has no word for: ``shapes`` (an attribute's recorded shape, as a
    one-element ``[x]`` is written as ``x``) and ``fill_value`` (``stored_fill``: the stored fill
    value when ``.zarray``'s ``fill_value`` says another one; typed JSON of ``_values``). None
    when there is nothing to say. Sorted: the same attributes give the same bytes."""
    types = {k: "|b1" if e["type"] == "bool" else np.dtype(e["type"]).str
             for k, e in sorted(attrs.items()) if e["type"] not in ("str", "bytes")}  # fmt: skip
    extra: dict[str, Any] = {}
    shapes = {k: list(e["shape"]) for k, e in sorted(attrs.items()) if "shape" in e}
    if shapes:
        extra["shapes"] = shapes
    if stored_fill is not None:
        extra["fill_value"] = stored_fill
    if not types and not extra:
        return None
    return {"types": types, **({"refstore": extra} if extra else {})}


def plain_attrs(meta: ArrayMeta) -> dict[str, Any]:
    """The array's attributes as plain JSON values (see :func:`attr_value`), sorted by name."""
    return attr_values(meta.attrs)


def _json_fill(value: Any, dtype: np.dtype[Any]) -> Any:
    """A fill value as zarr metadata spells it (NaN/Infinity as strings)."""
    if value is None:
        return None
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    if dtype.kind == "f":
        f = float(value)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if dtype.kind == "c":
        return [_json_fill(value.real, np.dtype("f8")), _json_fill(value.imag, np.dtype("f8"))]
    if dtype.kind in "SV":
        return base64.b64encode(np.asarray(value, dtype=dtype).tobytes()).decode("ascii")
    raise UnexpressibleError(f"fill value of dtype {dtype} has no zarr form")


# --------------------------------------------------------------------------- checks
LAYOUTS_DIFFER = (
    "array {name!r}: its tiles differ in layout (chunk shape, codecs or strips), each kept as stored; "
    "{form} has one chunk shape and one codec pipeline"
)
"""The refusal of a mosaic whose tiles differ in layout (``ArrayMeta.cell``) by a form with one codec."""


def _check_common(meta: ArrayMeta, *, rectilinear: bool) -> None:
    if meta.status != "ok":
        raise UnexpressibleError(f"array {meta.name!r}: {meta.reason}")
    if len(meta.eras) == 1:
        era = meta.eras[0]
        raise UnexpressibleError(
            f"array {meta.name!r} has one era starting at element {era['start']} along axis {era['axis']}, off "
            f"its chunk grid (its first source {era.get('first_source')} does not start on a chunk boundary); "
            "a zarr array's grid starts at 0"
        )
    if meta.eras:
        raise UnexpressibleError(
            f"array {meta.name!r} has {len(meta.eras)} eras (codecs, chunks, dtype or encoding attributes change "
            f"at {meta.eras[1].get('first_source')}); a zarr array has one"
        )
    if meta.cell:
        raise UnexpressibleError(LAYOUTS_DIFFER.format(name=meta.name, form="a zarr array"))
    if meta.short_edge:
        raise UnexpressibleError(
            f"array {meta.name!r}: its last chunk (a TIFF strip) is stored short; zarr chunks are all full size"
        )
    if meta.gridless:
        raise UnexpressibleError(
            f"array {meta.name!r} has no chunk grid: its sources' chunks cross each other's chunk edges (tiles "
            "placed at arbitrary offsets); a zarr array's chunks lie on one grid"
        )
    rect = [meta.dims[d] for d, ls in enumerate(meta.edges) if ls is not None]
    if rect and not rectilinear:
        raise UnexpressibleError(
            f"array {meta.name!r} has a rectilinear chunk grid along {', '.join(map(repr, rect))} (sources placed "
            "off their chunk boundaries); a regular zarr grid cannot express it"
        )
    if np.dtype(meta.dtype).kind not in "biufcSV" and not is_vlen_utf8(meta):
        raise UnexpressibleError(f"array {meta.name!r}: dtype {meta.dtype} has no zarr form")


def is_vlen_utf8(meta: ArrayMeta) -> bool:
    """Variable-length strings held inline as one ``vlen-utf8`` chunk (zarr v2's object dtype
    with the ``vlen-utf8`` filter; zarr v3's ``string`` data type with its ``vlen-utf8`` codec)."""
    return np.dtype(meta.dtype).kind == "O" and [c["id"] for c in meta.codecs] == ["vlen-utf8"]


# --------------------------------------------------------------------------- zarr v2
def _v2_codec(meta: ArrayMeta, codec: dict[str, Any]) -> dict[str, Any]:
    cid = codec["id"]
    dt = np.dtype(meta.dtype)
    if cid == "zlib":
        return {"id": "zlib", "level": int(codec.get("level", 6))}
    if cid == "shuffle":
        return {"id": "shuffle", "elementsize": int(codec["elementsize"])}
    if cid == "fletcher32":
        return {"id": "fletcher32"}
    if cid == "zstd":
        return {"id": "zstd", "level": int(codec.get("level", 0))}
    if cid == "blosc":
        return {"id": "blosc"}
    if cid in ("lz4h5", "lzw", "packbits", "lerc"):
        return {"id": f"imagecodecs_{cid}"}
    if cid == "szip":
        return {
            "id": "imagecodecs_szip",
            "options_mask": int(codec["mask"]),
            "pixels_per_block": int(codec["pixels_per_block"]),
            "bits_per_pixel": int(codec["bits_per_pixel"]),
            "pixels_per_scanline": int(codec["pixels_per_scanline"]),
            "header": True,
        }
    if cid == "delta":
        return {"id": "imagecodecs_delta", "axis": int(codec.get("axis", -1)), "dist": 1,
                "dtype": dt.str, "shape": list(meta.chunks)}  # fmt: skip
    if cid == "floatpred":
        return {"id": "imagecodecs_floatpred", "axis": int(codec.get("axis", -1)), "dist": 1,
                "dtype": dt.str, "shape": list(meta.chunks)}  # fmt: skip
    if cid == "refstore.grib":  # decodes with refstore's codec only (registered by register_codecs)
        return {"id": "refstore.grib", "dtype": dt.str}
    if cid == "vlen-utf8":
        return {"id": "vlen-utf8"}
    if cid == "spacepad":
        raise UnexpressibleError(f"array {meta.name!r}: space-padded HDF5 strings (read with NULs for the trailing "
                                 "spaces) have no zarr form")  # fmt: skip
    if cid == "nullterm":
        raise UnexpressibleError(f"array {meta.name!r}: null-terminated HDF5 strings holding bytes after their NUL "
                                 "(read as NULs) have no zarr form")  # fmt: skip
    raise UnexpressibleError(f"array {meta.name!r}: codec {cid!r} has no zarr v2 (numcodecs) form")


def v2_filters(meta: ArrayMeta, *, rectilinear: bool = False) -> list[dict[str, Any]]:
    """The pipeline as zarr v2 ``filters`` in encode order (``compressor`` stays null: v2
    decodes the compressor first, then the filters in reverse, so this is equivalent).
    ``rectilinear``: the caller's form records a rectilinear grid itself (SQLite mdim-refs/0.3)."""
    _check_common(meta, rectilinear=rectilinear)
    return [_v2_codec(meta, c) for c in meta.codecs]


V2_COMPRESSORS = frozenset({"zlib", "zstd", "blosc"})
"""numcodecs ids written as zarr v2's ``compressor`` when last in the pipeline: GDAL's Zarr
driver decodes them as compressors (as a filter, zlib fails on chunks that did not shrink)."""


def v2_codecs(meta: ArrayMeta) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(compressor, filters)`` of ``.zarray``: the last codec (in encode order) as the
    compressor when it is one of :data:`V2_COMPRESSORS`, the rest as filters. zarr v2 decodes
    the compressor first, then the filters in reverse: the same pipeline as all filters."""
    filters = v2_filters(meta)
    if filters and filters[-1]["id"] in V2_COMPRESSORS:
        return filters[-1], filters[:-1]
    return None, filters


def v2_array(meta: ArrayMeta, *, fill_value: Any = "auto") -> dict[str, Any]:
    """``.zarray`` of the array. ``fill_value`` "auto": the CF ``_FillValue`` when the array has
    one (zarr v2 readers such as xarray mask it), else the stored fill value."""
    compressor, filters = v2_codecs(meta)
    dt = np.dtype(meta.dtype)
    if fill_value == "auto":
        if "_FillValue" in meta.attrs:
            fill_value = np.asarray(decode_attr(meta.attrs["_FillValue"])).astype(dt).ravel()[0]
        else:
            fill_value = decode_fill(meta.fill_value, dt)
    return {
        "chunks": [int(c) for c in meta.chunks],
        "compressor": compressor,
        "dimension_separator": ".",
        "dtype": dt.str,  # bool: "|b1"
        "fill_value": _json_fill(fill_value, dt),
        "filters": filters or None,
        "order": "C",
        "shape": [int(s) for s in meta.shape],
        "zarr_format": 2,
    }


def v2_attrs(meta: ArrayMeta) -> dict[str, Any]:
    """``.zattrs``: the attributes (as netCDF4-python gives them, see :func:`attr_value`) plus
    ``_ARRAY_DIMENSIONS`` (xarray's dimension names); ``_FillValue`` is carried by
    ``.zarray``'s fill_value."""
    attrs = {k: v for k, v in plain_attrs(meta).items() if k != "_FillValue"}
    return {**attrs, "_ARRAY_DIMENSIONS": list(meta.dims)}


# --------------------------------------------------------------------------- zarr v3
_V3_DTYPES = {
    "b": {1: "bool"},
    "i": {1: "int8", 2: "int16", 4: "int32", 8: "int64"},
    "u": {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"},
    "f": {2: "float16", 4: "float32", 8: "float64"},
    "c": {8: "complex64", 16: "complex128"},
}


def _v3_dtype(meta: ArrayMeta, dtype: np.dtype[Any] | None = None) -> str | dict[str, Any]:
    """The zarr v3 ``data_type``; fixed-size bytes (netCDF ``char``) as zarr-python's
    ``null_terminated_bytes`` (an extension: zarr-python warns it is not in the v3 spec)."""
    dt = np.dtype(meta.dtype) if dtype is None else dtype
    if dt.kind == "O" and is_vlen_utf8(meta):
        return "string"
    if dt.kind == "S":
        return {"name": "null_terminated_bytes", "configuration": {"length_bytes": dt.itemsize}}
    name = _V3_DTYPES.get(dt.kind, {}).get(dt.itemsize)
    if name is None:
        raise UnexpressibleError(f"array {meta.name!r}: dtype {dt} has no zarr v3 form here")
    return name


def v3_codecs(meta: ArrayMeta, *, rectilinear: bool = False) -> list[dict[str, Any]]:
    """The zarr v3 codec chain (array->array, one array->bytes, bytes->bytes), in encode order.
    ``rectilinear``: accept a rectilinear chunk grid (zarr's rectilinear extension; else refused)."""
    _check_common(meta, rectilinear=rectilinear)
    dt = np.dtype(meta.dtype)
    endian = "big" if dt.byteorder == ">" else "little"
    array_array: list[dict[str, Any]] = []
    array_bytes: dict[str, Any] | None = None
    bytes_bytes: list[dict[str, Any]] = []
    for c in meta.codecs:
        cid = c["id"]
        if cid == "delta":
            if array_bytes is not None:
                raise UnexpressibleError(f"array {meta.name!r}: predictor after compression")
            array_array.append({"name": "imagecodecs_delta", "configuration": {"axis": int(c.get("axis", -1)),
                                                                              "dist": 1}})  # fmt: skip
        elif cid == "floatpred":
            array_bytes = {"name": "imagecodecs_floatpred", "configuration": {"axis": int(c.get("axis", -1)),
                                                                             "dist": 1}}  # fmt: skip
        elif cid == "lerc":
            array_bytes = {"name": "imagecodecs_lerc", "configuration": {}}
        elif cid == "refstore.grib":
            array_bytes = {"name": "refstore.grib", "configuration": {}}
        elif cid == "vlen-utf8":
            array_bytes = {"name": "vlen-utf8", "configuration": {}}
        elif cid == "jpeg":
            raise UnexpressibleError(f"array {meta.name!r}: JPEG tiles with shared tables have no zarr v3 form here")
        else:
            v2 = _v2_codec(meta, c)
            cid2 = v2.pop("id")
            name = cid2 if cid2.startswith("imagecodecs_") else f"numcodecs.{cid2}"
            bytes_bytes.append({"name": name, "configuration": v2})
    if array_bytes is None:
        array_bytes = ({"name": "bytes", "configuration": {"endian": endian}} if dt.itemsize > 1 and dt.kind in "biufc"
                       else {"name": "bytes"})  # fmt: skip
    return [*array_array, array_bytes, *bytes_bytes]


def v3_array(meta: ArrayMeta, *, attributes: dict[str, Any] | None = None, rectilinear: bool = False) -> dict[str, Any]:
    """``zarr.json`` of the array. Attributes default to the array's, with ``_FillValue``
    encoded the way xarray's zarr v3 backend reads it. ``rectilinear``: an array with a
    rectilinear grid gets zarr's ``rectilinear`` chunk grid (its readers must enable
    ``array.rectilinear_chunks``): rectilinear dimensions as run-length chunk lengths, regular
    ones as enough chunks of their size (the last one overhangs the extent: padded, as on a
    regular grid)."""
    codecs = v3_codecs(meta, rectilinear=rectilinear)
    dt = np.dtype(meta.dtype)
    if attributes is None:
        attributes = plain_attrs(meta)
        if "_FillValue" in meta.attrs:
            attributes["_FillValue"] = _xarray_fill(decode_attr(meta.attrs["_FillValue"]), dt)
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [int(s) for s in meta.shape],
        "data_type": _v3_dtype(meta),
        "chunk_grid": v3_chunk_grid(meta),
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": "" if is_vlen_utf8(meta) else _json_fill(decode_fill(meta.fill_value, dt), dt),
        "codecs": codecs,
        "attributes": attributes,
        "dimension_names": list(meta.dims),
    }


def v3_chunk_grid(meta: ArrayMeta) -> dict[str, Any]:
    """The ``chunk_grid`` of ``zarr.json``: regular, or rectilinear where ``meta`` has edges."""
    if not any(ls is not None for ls in meta.edges):
        return {"name": "regular", "configuration": {"chunk_shape": [int(c) for c in meta.chunks]}}
    # a regular dimension as n chunks of its size, the last one overhanging the extent (padded, as
    # on a regular grid): zarr-python and Icechunk 2.3 read that; Icechunk refuses a bare size.
    # zarr needs at least one chunk of at least one element (an extent of 0 has chunk size 0)
    shapes: list[Any] = []
    for d, (n, c) in enumerate(zip(meta.shape, meta.chunks, strict=True)):
        lengths = meta.edges[d] if d < len(meta.edges) else None
        if lengths is None:
            size = max(1, int(c))
            lengths = (size,) * max(1, -(-int(n) // size))
        shapes.append(rle_encode(lengths))
    return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}


def v3_unexpressible(meta: ArrayMeta) -> str | None:
    """Why the array's stored chunks have no zarr v3 form (eras, short last strip, a codec),
    or None when zarr can decode them as stored. Filter masks are per chunk: not checked here."""
    try:
        v3_codecs(meta)
        _v3_dtype(meta)
    except UnexpressibleError as e:
        return str(e)
    return None


def v3_decoded_array(
    meta: ArrayMeta, dtype: np.dtype[Any], chunks: tuple[int, ...], *, attributes: dict[str, Any] | None = None,
    fill_value: Any = None,
) -> dict[str, Any]:
    """``zarr.json`` of an array served as decoded chunks: little-endian ``dtype`` values in C
    order behind a plain ``bytes`` codec, on a regular grid of ``chunks`` (the store decodes).
    ``attributes`` and ``fill_value`` default to the array's (``_FillValue`` as xarray reads it)."""
    if meta.status != "ok":
        raise UnexpressibleError(f"array {meta.name!r}: {meta.reason}")
    dt = np.dtype(dtype)  # its byte order does not matter here: the bytes codec says little-endian
    name = _v3_dtype(meta, dt)
    if attributes is None:
        attributes = plain_attrs(meta)
        if "_FillValue" in meta.attrs:
            attributes["_FillValue"] = _xarray_fill(decode_attr(meta.attrs["_FillValue"]), dt)
    fill = decode_fill(meta.fill_value, dt) if fill_value is None else np.asarray(fill_value, dt)[()]
    codec: dict[str, Any] = {"name": "bytes"}
    if dt.kind in "biufc" and dt.itemsize > 1:
        codec["configuration"] = {"endian": "little"}
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [int(s) for s in meta.shape],
        "data_type": name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [int(c) for c in chunks]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": _json_fill(fill, dt),
        "codecs": [codec],
        "attributes": attributes,
        "dimension_names": list(meta.dims),
    }


def v3_group(attributes: dict[str, Any]) -> dict[str, Any]:
    """``zarr.json`` of a group."""
    return {"zarr_format": 3, "node_type": "group", "attributes": attributes}


def _xarray_fill(value: Any, dtype: np.dtype[Any]) -> Any:
    """xarray's zarr v3 ``_FillValue`` attribute encoding (``FillValueCoder``)."""
    import struct

    v = np.asarray(value).astype(dtype).ravel()[0]
    if dtype.kind == "f":
        return base64.standard_b64encode(struct.pack("<d", float(v))).decode()
    if dtype.kind == "c":  # each part as a float: two base64 little-endian doubles
        return [base64.standard_b64encode(struct.pack("<d", float(x))).decode() for x in (v.real, v.imag)]
    return _json_fill(v, dtype)  # ints and bools as JSON numbers and booleans, bytes as base64


# --------------------------------------------------------------------------- registration
_registered = False


def register_codecs() -> None:
    """Make every codec named here known to numcodecs (v2) and zarr (v3), ``refstore.grib``
    (GRIB messages through ecCodes) included. Idempotent."""
    global _registered
    if _registered:
        return
    import imagecodecs.numcodecs

    imagecodecs.numcodecs.register_codecs(verbose=False)
    import numcodecs

    from ._grib import CODEC_ID, GribCodec, zarr_codec

    numcodecs.register_codec(GribCodec, CODEC_ID)
    try:
        import imagecodecs.zarr

        imagecodecs.zarr.register_codecs(verbose=False)
        from zarr.registry import register_codec

        register_codec(CODEC_ID, zarr_codec())
    except ImportError:  # zarr not installed: v2 names are enough for numcodecs users
        pass
    _registered = True
