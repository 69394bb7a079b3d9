"""Decoding one GRIB message (a chunk) through ecCodes, and the codec that does it for numcodecs
(zarr v2) and zarr v3 under the stable id ``refstore.grib``.

A chunk is one whole GRIB1/GRIB2 message, byte for byte as in the file. Decoding gives its
values as cfgrib gives them: ecCodes' ``values`` (float64) cast to the array's dtype (float32 by
default), with the points the message's bitmap marks missing as NaN (cfgrib sets ``missingValue``
to the float32 maximum and masks it; so does this). ecCodes is imported when a chunk is decoded,
so a missing ``eccodes`` package only affects GRIB arrays (``pip install 'refstore[grib]'``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from numcodecs.abc import Codec

from .errors import UnsupportedArrayError

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

__all__ = ["CODEC_ID", "MISSING", "GribCodec", "decode_message", "import_eccodes"]

CODEC_ID = "refstore.grib"
"""The codec's id in refstore's pipelines, numcodecs' registry and zarr v3 metadata."""

MISSING = float(np.finfo(np.float32).max)
"""The value ecCodes is told to give missing points (cfgrib's ``MISSING_VAUE_INDICATOR``)."""


def import_eccodes() -> Any:
    """The ``eccodes`` module, or a clear error saying what to install."""
    try:
        import eccodes
    except (ImportError, RuntimeError) as e:  # RuntimeError: the bindings found no ecCodes library
        raise UnsupportedArrayError(
            f"GRIB messages decode through ecCodes: install the 'eccodes' package (pip install 'refstore[grib]'): {e}"
        ) from None
    return eccodes


def decode_message(data: Any, dtype: Any = "<f4") -> np.ndarray[Any, Any]:
    """The values of one GRIB message (bytes-like) as a flat array of ``dtype``, missing
    points (bitmap) as NaN."""
    ec = import_eccodes()
    buf = bytes(data) if not isinstance(data, bytes) else data
    h = ec.codes_new_from_message(buf)
    try:
        ec.codes_set(h, "missingValue", MISSING)
        values = np.asarray(ec.codes_get_values(h))
        bitmap = ec.codes_get(h, "bitmapPresent", int) if ec.codes_is_defined(h, "bitmapPresent") else 0
    finally:
        ec.codes_release(h)
    out = values.astype(np.dtype(dtype))
    if bitmap:
        out[values == MISSING] = np.nan
    return out


class GribCodec(Codec):  # type: ignore[misc]
    """numcodecs codec: a GRIB message -> its values (decode only)."""

    codec_id = CODEC_ID

    def __init__(self, dtype: str = "<f4") -> None:
        self.dtype = str(np.dtype(dtype).str)

    def decode(self, buf: Any, out: Any = None) -> Any:
        values = decode_message(memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf, self.dtype)
        if out is not None:
            np.copyto(np.asarray(out).reshape(-1).view(values.dtype), values)
            return out
        return values

    def encode(self, buf: Any) -> Any:
        raise NotImplementedError("refstore.grib decodes GRIB messages; it does not encode")

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "dtype": self.dtype}


def zarr_codec() -> type[Any]:
    """The zarr v3 array->bytes codec class (made on first use: zarr's ABCs are imported then)."""
    global _ZARR_CODEC
    if _ZARR_CODEC is not None:
        return _ZARR_CODEC
    from zarr.abc.codec import ArrayBytesCodec

    @dataclasses.dataclass(frozen=True)
    class GribZarrCodec(ArrayBytesCodec):
        """zarr v3 ``refstore.grib``: a chunk's bytes are one GRIB message; decoding gives the
        chunk's values (float, NaN where missing). Decode only."""

        is_fixed_size = False

        @classmethod
        def from_dict(cls, data: dict[str, Any]) -> Self:
            return cls()

        def to_dict(self) -> dict[str, Any]:
            return {"name": CODEC_ID, "configuration": {}}

        async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
            dtype = chunk_spec.dtype.to_native_dtype()
            values = decode_message(chunk_bytes.as_numpy_array(), dtype).reshape(chunk_spec.shape)
            return chunk_spec.prototype.nd_buffer.from_numpy_array(values)

        async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
            raise NotImplementedError("refstore.grib decodes GRIB messages; it does not encode")

        def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
            raise NotImplementedError("a GRIB message's size is not known before it is written")

    _ZARR_CODEC = GribZarrCodec
    return GribZarrCodec


_ZARR_CODEC: type[Any] | None = None
