"""Exact, typed JSON encoding of attribute values and fill values.

Attributes keep their type: ``{"type": "<f4", "value": 0.01}``; a float32 scale_factor stays
float32 when decoded. Non-finite floats are spelled "NaN", "Infinity", "-Infinity". Strings are
decoded text (``type: "str"``); undecodable bytes are base64 (``type: "bytes"``).
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

__all__ = ["decode_attr", "decode_fill", "encode_attr", "encode_fill", "nc_attr", "plain_attr"]


def _scalar_to_json(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if isinstance(x, (complex, np.complexfloating)):
        return [_scalar_to_json(x.real), _scalar_to_json(x.imag)]
    raise TypeError(f"not a numeric scalar: {type(x).__name__}")


def _json_to_scalar(v: Any, dtype: np.dtype[Any]) -> Any:
    if dtype.kind == "c":
        return dtype.type(complex(float(v[0]), float(v[1])))
    if isinstance(v, str):  # "NaN", "Infinity", "-Infinity": Python's float reads them
        return dtype.type(float(v))
    return dtype.type(v)


def _text(b: bytes) -> dict[str, Any]:
    try:
        return {"type": "str", "value": b.decode("utf-8")}
    except UnicodeDecodeError:
        return {"type": "bytes", "value": base64.b64encode(b).decode("ascii")}


def encode_attr(value: Any) -> dict[str, Any] | None:
    """Encode one attribute value with its type; None if it has no JSON form (references)."""
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "OSU":
        items = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value.ravel().tolist()]
        if not all(isinstance(i, str) for i in items):
            return None
        return {"type": "str", "value": items if value.ndim else items[0], "shape": list(value.shape)}
    arr = np.asarray(value)
    if arr.dtype.kind not in "biufc" or arr.dtype.names is not None:
        return None
    dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
    type_str = np.dtype(dt).str if dt.kind != "b" else "bool"
    if arr.ndim == 0:
        return {"type": type_str, "value": _scalar_to_json(arr[()])}
    return {"type": type_str, "value": [_scalar_to_json(x) for x in arr.ravel()], "shape": list(arr.shape)}


def decode_attr(enc: dict[str, Any]) -> Any:
    """Inverse of :func:`encode_attr`: numpy scalars/arrays of the recorded type, or str."""
    t = enc["type"]
    v = enc["value"]
    if t == "str":
        return v
    if t == "bytes":
        return base64.b64decode(v)
    dtype = np.dtype(bool) if t == "bool" else np.dtype(t)
    if "shape" in enc:
        flat = np.array([_json_to_scalar(x, dtype) for x in v], dtype=dtype)
        return flat.reshape(enc["shape"])
    return _json_to_scalar(v, dtype)


def nc_attr(enc: dict[str, Any]) -> Any:
    """An attribute as netCDF4-python's ``getncattr`` gives it, the value every reader and form
    shows: a one-element value (string or number, any shape) as its element (``str`` or a numpy
    scalar of the recorded type), more strings as a list of ``str``, more numbers as an array;
    undecodable text as ``str`` with replacement characters."""
    v = decode_attr(enc)
    if isinstance(v, list) and len(v) == 1:
        return v[0]
    if isinstance(v, np.ndarray) and v.size == 1:
        return v.ravel()[0]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def plain_attr(enc: dict[str, Any]) -> Any:
    """A JSON-friendly plain value for reports (``info --json``)."""
    v = enc["value"]
    return v


def encode_fill(value: Any, dtype: np.dtype[Any]) -> Any:
    """JSON form of a fill value of ``dtype`` (bytes dtypes: base64 of the raw value)."""
    if value is None:
        return None
    if dtype.kind in "SV":
        raw = bytes(np.asarray(value, dtype=dtype).tobytes())
        return base64.b64encode(raw).decode("ascii")
    return _scalar_to_json(np.asarray(value, dtype=dtype)[()])


def decode_fill(enc: Any, dtype: np.dtype[Any]) -> Any:
    """A numpy scalar of ``dtype`` (zero when no fill value was recorded)."""
    if enc is None:
        return np.zeros((), dtype=dtype)[()]
    if dtype.kind in "SV":
        return np.frombuffer(base64.b64decode(enc), dtype=dtype)[0]
    return _json_to_scalar(enc, dtype)
