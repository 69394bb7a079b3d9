"""Zarr metadata of an existing reference store as refstore array metadata (the inverse of
``zarr_meta``): zarr v2 ``.zarray``/``.zattrs`` (kerchunk) and zarr v3 ``zarr.json`` (Icechunk).

Pure: metadata dicts in, :class:`~refstore.scan._types.ArrayMeta` out. A codec refstore cannot
decode makes the array ``unsupported`` with the reason (as a scan records an HDF5 filter it
cannot decode); the rest of the store is imported.
"""

from __future__ import annotations

import base64
import contextlib
import json
import struct
from typing import Any

import numpy as np

from .._keys import MAX_DIMS
from .._values import decode_attr, decode_fill, encode_attr, encode_fill
from ..scan._types import ArrayMeta
from ..zarr_meta import NCZARR_ATTR

__all__ = ["CF_TYPED_ATTRS", "group_attrs", "nczarr_types", "stored_fill", "v2_meta", "v3_meta"]

CF_TYPED_ATTRS = ("_FillValue", "missing_value", "valid_min", "valid_max", "valid_range")
"""Attributes CF requires to have the variable's own type: zarr keeps them as plain JSON numbers,
so they are typed with the array's dtype on import (other numbers: int64 / float64)."""

_SAME = frozenset({"zlib", "shuffle", "fletcher32", "zstd", "blosc"})
_IMAGECODECS = {"lz4h5", "lzw", "packbits", "lerc", "szip", "delta", "floatpred"}


class _Unsupported(Exception):
    pass


def _codec(cfg: dict[str, Any], dtype: np.dtype[Any]) -> dict[str, Any]:
    """One numcodecs-style config (v2 id, or a v3 name's configuration) as refstore's codec."""
    cid = str(cfg.get("id", ""))
    if cid.startswith("numcodecs."):
        cid = cid.removeprefix("numcodecs.")
    if cid == "zlib":
        return {"id": "zlib", "level": int(cfg.get("level", 6))}
    if cid == "shuffle":
        return {"elementsize": int(cfg.get("elementsize") or dtype.itemsize), "id": "shuffle"}
    if cid == "fletcher32":
        return {"id": "fletcher32"}
    if cid == "zstd":
        return {"id": "zstd", "level": int(cfg.get("level", 0))}
    if cid == "blosc":
        return {"id": "blosc"}
    if cid == "refstore.grib":
        return {"id": "refstore.grib"}
    if cid.startswith("imagecodecs_") and cid.removeprefix("imagecodecs_") in _IMAGECODECS:
        name = cid.removeprefix("imagecodecs_")
        if name == "szip":
            return {"id": "szip", "mask": int(cfg["options_mask"]), "pixels_per_block": int(cfg["pixels_per_block"]),
                    "bits_per_pixel": int(cfg["bits_per_pixel"]),
                    "pixels_per_scanline": int(cfg["pixels_per_scanline"])}  # fmt: skip
        if name in ("delta", "floatpred"):
            return {"axis": int(cfg.get("axis", -1)), "id": name}
        return {"id": name}
    raise _Unsupported(f"codec {cid or json.dumps(cfg)!r} has no decoder in refstore")


def _json_fill(value: Any, dtype: np.dtype[Any]) -> Any:
    """A zarr fill value (JSON) as refstore's typed fill (``_values.encode_fill``); zarr's null
    reads absent chunks as zero, so null is recorded as zero."""
    if value is None:
        return encode_fill(np.zeros((), dtype)[()], dtype)
    if dtype.kind in "SV" and isinstance(value, str):
        raw = base64.b64decode(value)
        return base64.b64encode(raw.ljust(dtype.itemsize, b"\0")[: dtype.itemsize]).decode("ascii")
    if dtype.kind == "c" and isinstance(value, list):
        return encode_fill(complex(_float(value[0]), _float(value[1])), dtype)
    if dtype.kind == "f" and isinstance(value, str):
        return encode_fill(_float(value), dtype)
    if dtype.kind == "b":
        return encode_fill(bool(value), dtype)
    return encode_fill(value, dtype)


def _float(v: Any) -> float:
    if isinstance(v, str):
        if v.startswith("0x"):  # zarr v3 spells a float fill by its bits too
            return float(np.frombuffer(bytes.fromhex(v[2:]).rjust(8, b"\0")[-8:], ">f8")[0])
        return float(v.replace("Infinity", "inf"))
    return float(v)


def _attr(name: str, value: Any, dtype: np.dtype[Any]) -> dict[str, Any]:
    """A plain JSON attribute as typed JSON: CF's typed attributes take the array's dtype; other
    numbers int64/float64; strings as text; anything else (objects, mixed lists) as its JSON text."""
    if name in CF_TYPED_ATTRS and dtype.kind in "iuf" and not isinstance(value, (str, bool, dict)):
        try:
            arr = np.asarray(value, dtype=np.float64 if dtype.kind == "f" else None)
            typed = arr.astype(dtype)
            if dtype.kind == "f" or np.array_equal(typed.astype(arr.dtype), arr):
                enc = encode_attr(typed)
                if enc is not None:
                    return enc
        except (TypeError, ValueError, OverflowError):
            pass
    if isinstance(value, (bool, int, float, str)):
        enc = encode_attr(np.asarray(value) if not isinstance(value, str) else value)
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        enc = encode_attr(np.asarray(value, dtype=object))
    elif isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                   for v in value):  # fmt: skip
        enc = encode_attr(np.asarray(value))
    else:
        enc = None
    return enc if enc is not None else {"type": "str", "value": json.dumps(value, sort_keys=True)}


def _attrs(raw: dict[str, Any], dtype: np.dtype[Any]) -> dict[str, dict[str, Any]]:
    return {k: _attr(k, v, dtype) for k, v in sorted(raw.items()) if k != NCZARR_ATTR}


def _typed(enc: dict[str, Any], dtype: str | None, shape: list[int] | None) -> dict[str, Any]:
    """``enc`` (an attribute as imported) with the dtype and shape NCZarr's ``_nczarr_attr``
    (and refstore's part of it) recorded; as it was when either does not fit."""
    try:
        if enc["type"] == "str":
            if shape is None:
                return enc
            items = enc["value"] if isinstance(enc["value"], list) else [enc["value"]]
            typed = encode_attr(np.asarray(items, dtype=object).reshape(shape))
        else:
            value = np.asarray(decode_attr(enc))
            if dtype is not None and np.dtype(dtype).kind == "c" and value.dtype.kind in "iuf" and (
                    value.shape[-1:] == (2,)):  # JSON spells a complex number [re, im]
                value = value[..., 0] + 1j * value[..., 1]
            arr = value.astype(np.dtype(dtype)) if dtype is not None else value
            if dtype is not None and not np.array_equal(arr, value, equal_nan=arr.dtype.kind in "fc"):
                return enc  # the recorded type does not hold the value: keep what the JSON says
            typed = encode_attr(arr.reshape(shape) if shape is not None else arr)
    except (TypeError, ValueError):
        return enc
    return typed if typed is not None else enc


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def nczarr_types(attrs: dict[str, dict[str, Any]], raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``attrs`` typed by the ``_nczarr_attr`` of ``raw`` (a ``.zattrs``): NCZarr's ``types``
    and refstore's ``shapes`` (see ``zarr_meta.attr_types``)."""
    spec = raw.get(NCZARR_ATTR)
    if not isinstance(spec, dict):
        return attrs
    types: dict[str, Any] = _dict(spec.get("types"))
    shapes: dict[str, Any] = _dict(_dict(spec.get("refstore")).get("shapes"))
    out = dict(attrs)
    for k, enc in attrs.items():
        t, shape = types.get(k), shapes.get(k)
        if (t is None or isinstance(t, str)) and (shape is None or isinstance(shape, list)) and (t or shape):
            out[k] = _typed(enc, t, shape)
    return out


def stored_fill(raw: dict[str, Any]) -> Any:
    """The stored fill value refstore's part of ``_nczarr_attr`` records (typed JSON), or None."""
    spec = raw.get(NCZARR_ATTR)
    extra = spec.get("refstore") if isinstance(spec, dict) else None
    return extra.get("fill_value") if isinstance(extra, dict) else None


def group_attrs(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Group attributes (plain JSON) as typed JSON (NCZarr's ``_nczarr_attr`` types them)."""
    return nczarr_types(_attrs(raw, np.dtype("f8")), raw)


def _dims(names: Any, shape: tuple[int, ...]) -> tuple[str, ...]:
    """Dimension names as the store gives them; else ``phony_dim_<size>`` (``_1``... for repeats
    within the array), as a scan names plain HDF5 dimensions."""
    if isinstance(names, list) and len(names) == len(shape) and all(isinstance(n, str) and n for n in names):
        return tuple(names)
    out: list[str] = []
    for n in shape:
        base = f"phony_dim_{n}"
        name, i = base, 0
        while name in out:
            i += 1
            name = f"{base}_{i}"
        out.append(name)
    return tuple(out)


MAX_GRID = 2**31 - 1
"""Chunks along one axis at most: chunk keys are 32-bit in the collection (``schema.py``)."""


def _grid_too_large(dims: tuple[str, ...], shape: tuple[int, ...], chunks: tuple[int, ...]) -> str | None:
    """Why an array's chunk grid cannot be keyed (None: it can)."""
    for dim, s, c in zip(dims, shape, chunks, strict=False):
        if s >= 2**62:
            return f"{s} elements along {dim!r}: more than 2^62"
        if c > 0 and -(-s // c) > MAX_GRID:
            return f"{-(-s // c)} chunks along {dim!r}: more than 2^31-1 (chunk keys are 32-bit)"
    return None


def _finish(name: str, dims: tuple[str, ...], shape: tuple[int, ...], chunks: tuple[int, ...], dtype: np.dtype[Any],
            fill: Any, codecs: list[dict[str, Any]], attrs: dict[str, dict[str, Any]],
            reason: str | None) -> ArrayMeta:  # fmt: skip
    if reason is None and len(shape) > MAX_DIMS:
        reason = f"more than {MAX_DIMS} dimensions"
    if reason is None:
        reason = _grid_too_large(dims, shape, chunks)
    return ArrayMeta(name=name, dims=dims, shape=shape, chunks=chunks, dtype=dtype.str, fill_value=fill,
                     codecs=tuple(codecs), attrs=attrs, status="ok" if reason is None else "unsupported",
                     reason=reason)  # fmt: skip


def _shape(meta: dict[str, Any], key: str) -> tuple[int, ...]:
    value = meta[key]
    if not isinstance(value, list) or not all(isinstance(x, int) and x >= 0 for x in value):
        raise ValueError(f"{key} is not a list of non-negative integers")
    return tuple(int(x) for x in value)


def v2_meta(name: str, zarray: dict[str, Any], zattrs: dict[str, Any]) -> ArrayMeta:
    """``.zarray`` and ``.zattrs`` of one array. A non-null ``fill_value`` without a
    ``_FillValue`` attribute becomes ``_FillValue`` (zarr v2 readers such as xarray mask it).
    Raises ``ValueError`` when the metadata is not zarr v2 array metadata."""
    if zarray.get("zarr_format") not in (2, None):
        raise ValueError(f"zarr_format {zarray.get('zarr_format')!r} is not 2")
    shape, chunks = _shape(zarray, "shape"), _shape(zarray, "chunks")
    if len(shape) != len(chunks) or any(c == 0 for c in chunks):
        raise ValueError("shape and chunks disagree")
    try:
        dtype = np.dtype(zarray["dtype"] if isinstance(zarray["dtype"], str) else [tuple(f) for f in zarray["dtype"]])
    except (TypeError, ValueError, KeyError):
        raise ValueError(f"dtype {zarray.get('dtype')!r} is not a numpy dtype") from None
    attrs_raw = {k: v for k, v in zattrs.items() if k != "_ARRAY_DIMENSIONS"}
    dims = _dims(zattrs.get("_ARRAY_DIMENSIONS"), shape)
    reason: str | None = None
    codecs: list[dict[str, Any]] = []
    if dtype.kind not in "biufcSV" or dtype.names is not None:
        reason = f"dtype {dtype} is not supported"
    elif zarray.get("order", "C") != "C" and len(shape) > 1:  # one dimension: F and C are the same bytes
        reason = "Fortran-ordered chunks are not supported"
    else:
        try:
            for cfg in [*(zarray.get("filters") or []), *([zarray["compressor"]] if zarray.get("compressor") else [])]:
                codecs.append(_codec(cfg, dtype))
        except _Unsupported as e:
            reason, codecs = str(e), []
    try:
        fill = _json_fill(zarray.get("fill_value"), dtype) if reason is None or dtype.kind in "biufcSV" else None
    except (TypeError, ValueError) as e:
        raise ValueError(f"fill_value {zarray.get('fill_value')!r}: {e}") from None
    attrs = _attrs(attrs_raw, dtype)
    if zarray.get("fill_value") is not None and "_FillValue" not in attrs and dtype.kind in "iufcS":
        value = np.asarray(_fill_value(fill, dtype))
        enc = encode_attr(bytes(value[()]) if dtype.kind == "S" else value)  # netCDF char: text
        if enc is not None:
            attrs = dict(sorted({**attrs, "_FillValue": enc}.items()))
    attrs = nczarr_types(attrs, zattrs)
    recorded = stored_fill(zattrs)
    if recorded is not None and fill is not None:
        with contextlib.suppress(TypeError, ValueError):
            fill = encode_fill(decode_fill(recorded, dtype), dtype)
    return _finish(name, dims, shape, chunks, dtype, fill, codecs, attrs, reason)


def _fill_value(fill: Any, dtype: np.dtype[Any]) -> Any:
    from .._values import decode_fill

    return np.asarray(decode_fill(fill, dtype), dtype)


_V3_DTYPES = {"bool": "|b1", "int8": "|i1", "uint8": "|u1", "int16": "i2", "uint16": "u2", "int32": "i4",
              "uint32": "u4", "int64": "i8", "uint64": "u8", "float16": "f2", "float32": "f4", "float64": "f8",
              "complex64": "c8", "complex128": "c16"}  # fmt: skip


def _v3_fill_attr(value: Any, dtype: np.dtype[Any]) -> Any:
    """xarray's zarr v3 ``_FillValue`` encoding undone (floats as base64 of a little-endian double,
    bytes as base64)."""
    if dtype.kind == "f" and isinstance(value, str):
        try:
            return struct.unpack("<d", base64.standard_b64decode(value))[0]
        except (ValueError, struct.error):
            return value
    if dtype.kind == "S" and isinstance(value, str):  # bytes as base64; netCDF char fills are text
        try:
            return base64.standard_b64decode(value).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return value
    return value


def v3_meta(name: str, zjson: dict[str, Any]) -> ArrayMeta:
    """``zarr.json`` of one array (zarr v3: ``bytes`` gives the byte order, numcodecs and
    imagecodecs codecs as in kerchunk). Raises ``ValueError`` when it is not v3 array metadata."""
    if zjson.get("zarr_format") != 3 or zjson.get("node_type") != "array":
        raise ValueError("not zarr v3 array metadata")
    shape = _shape(zjson, "shape")
    grid = zjson.get("chunk_grid") or {}
    if grid.get("name") != "regular":
        chunks = shape
        reason: str | None = f"chunk grid {grid.get('name')!r} is not supported"
    else:
        chunks, reason = _shape(grid.get("configuration") or {}, "chunk_shape"), None
    dt = zjson.get("data_type")
    if isinstance(dt, dict) and dt.get("name") == "null_terminated_bytes":
        dtype = np.dtype(f"S{int(dt['configuration']['length_bytes'])}")
    elif isinstance(dt, str) and dt in _V3_DTYPES:
        dtype = np.dtype(_V3_DTYPES[dt])
    else:
        dtype, reason = np.dtype("u1"), f"data type {dt!r} is not supported"
    codecs: list[dict[str, Any]] = []
    if reason is None:
        try:
            for c in zjson.get("codecs") or []:
                cname, cfg = str(c.get("name", "")), dict(c.get("configuration") or {})
                if cname == "bytes":
                    if cfg.get("endian") == "big":
                        dtype = dtype.newbyteorder(">")
                    elif dtype.itemsize > 1:
                        dtype = dtype.newbyteorder("<")
                elif cname == "zstd":
                    codecs.append({"id": "zstd", "level": int(cfg.get("level", 0))})
                else:
                    codecs.append(_codec({**cfg, "id": cname}, dtype))
        except _Unsupported as e:
            reason, codecs = str(e), []
    raw_attrs = dict(zjson.get("attributes") or {})
    if "_FillValue" in raw_attrs:
        raw_attrs["_FillValue"] = _v3_fill_attr(raw_attrs["_FillValue"], dtype)
    fill_raw = zjson.get("fill_value")
    if dtype.kind in "SV" and isinstance(fill_raw, list):  # bytes fills as a list of byte values
        fill_raw = base64.b64encode(bytes(int(b) for b in fill_raw)).decode("ascii")
    elif dtype.kind in "SV" and isinstance(fill_raw, int):
        fill_raw = base64.b64encode(bytes([fill_raw]) * dtype.itemsize).decode("ascii")
    try:
        fill = _json_fill(fill_raw, dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(f"fill_value {fill_raw!r}: {e}") from None
    dims = _dims(zjson.get("dimension_names"), shape)
    if reason is None and len(chunks) != len(shape):
        reason = "chunk shape and shape disagree"
    return _finish(name, dims, shape, chunks, dtype, fill, codecs, _attrs(raw_attrs, dtype), reason)
