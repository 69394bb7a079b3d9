"""Decoding chunk bytes through a codec pipeline (numcodecs / imagecodecs). Pure CPU work.

A pipeline is a list of codec configs in encode order (HDF5 filter order; TIFF: predictor, then
compression). Decoding undoes it in reverse. Byte-to-byte steps come first; steps that need the
chunk's shape (TIFF predictors, JPEG, 1-bit unpacking) receive it. A chunk may be shorter than
the chunk grid (a TIFF's last strip): the decoder then gives the edge shape it was told.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import UnsupportedArrayError

__all__ = ["ChunkDecoder", "make_decoder"]

# a step takes (data, dtype, shape) and returns bytes or an array of that shape
_Step = Callable[[Any, np.dtype[Any], tuple[int, ...]], Any]


def _bytes_step(fn: Callable[[Any], Any]) -> _Step:
    return lambda data, _dt, _shape: fn(data)


def _as_array(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    if isinstance(data, np.ndarray):
        return data.reshape(shape)
    return np.frombuffer(data, dtype=dt).reshape(shape)


_BYTES_ONLY = frozenset({"zlib", "shuffle", "fletcher32", "zstd", "blosc", "lz4h5", "szip", "lzw", "packbits"})
"""Codecs whose step maps bytes to bytes whatever the chunk's shape (the decoder's fast path)."""


def _bytes_fn(codec: dict[str, Any]) -> Callable[[Any], Any]:
    """The plain bytes -> bytes function of a codec in ``_BYTES_ONLY`` (numcodecs' results are
    byte arrays: the next function, or ``np.frombuffer``, reads their buffer without a copy)."""
    if codec["id"] == "shuffle":
        return _unshuffle(int(codec["elementsize"]))
    if codec["id"] == "fletcher32":
        from numcodecs import Fletcher32

        return Fletcher32().decode  # type: ignore[no-any-return]
    step = _step(codec)
    return lambda b: step(b, _NO_DTYPE, ())


_NO_DTYPE = np.dtype("u1")


def _unshuffle(elementsize: int) -> Callable[[Any], Any]:
    """HDF5's shuffle undone: bytes past the last whole element (a shuffle after a compressor
    in the pipeline) are left as they are, as ``H5Z__filter_shuffle`` leaves them."""
    from numcodecs import Shuffle

    decode = Shuffle(elementsize=elementsize).decode

    def unshuffle(buf: Any) -> Any:
        n = buf.nbytes if isinstance(buf, (np.ndarray, memoryview)) else len(buf)
        whole = n - n % elementsize
        if whole == n:
            return decode(buf)
        if whole == 0:
            return buf
        raw = np.frombuffer(buf, np.uint8)
        return np.concatenate([np.frombuffer(bytes(decode(raw[:whole])), np.uint8), raw[whole:]])

    return unshuffle

_VALUE_STEPS = frozenset({"spacepad", "nullterm"})
"""Conversions of decoded values (HDF5 type conversions, not filters): last in a pipeline,
applied after every filter; the HDF5 filter mask counts only the filters before them."""


def _spacepad(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Fixed-length strings as HDF5 converts space padding to null padding: trailing spaces
    become NULs."""
    n = values.dtype.itemsize
    b = values.reshape(-1).view(np.uint8).reshape(-1, n).copy()
    keep = np.flip(np.cumsum(np.flip(b != 0x20, axis=1), axis=1), axis=1) > 0  # up to the last non-space
    b[~keep] = 0
    out: np.ndarray[Any, Any] = b.view(values.dtype).reshape(values.shape)
    return out


def _nullterm(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Fixed-length strings as HDF5 converts null termination to null padding: every byte from
    the first NUL on becomes NUL (a string without one keeps all its bytes)."""
    n = values.dtype.itemsize
    b = values.reshape(-1).view(np.uint8).reshape(-1, n).copy()
    b[np.cumsum(b == 0, axis=1) > 0] = 0
    out: np.ndarray[Any, Any] = b.view(values.dtype).reshape(values.shape)
    return out


def _step(codec: dict[str, Any]) -> _Step:
    cid = codec["id"]
    if cid == "zlib":
        return _bytes_step(zlib.decompress)
    if cid == "shuffle":
        unshuffle = _unshuffle(int(codec["elementsize"]))
        return _bytes_step(lambda b: bytes(unshuffle(b)))
    if cid == "fletcher32":
        from numcodecs import Fletcher32

        fl = Fletcher32()
        return _bytes_step(lambda b: bytes(fl.decode(b)))
    if cid in ("zstd", "blosc", "lz4h5", "lzw", "packbits", "lerc"):
        import imagecodecs

        decoders: dict[str, Callable[[Any], Any]] = {
            "zstd": imagecodecs.zstd_decode,
            "blosc": imagecodecs.blosc_decode,
            "lz4h5": imagecodecs.lz4h5_decode,
            "lzw": imagecodecs.lzw_decode,
            "packbits": imagecodecs.packbits_decode,
            "lerc": imagecodecs.lerc_decode,
        }
        return _bytes_step(decoders[cid])
    if cid == "szip":
        import imagecodecs

        mask, ppb, bpp, pps = (int(codec[k]) for k in ("mask", "pixels_per_block", "bits_per_pixel",
                                                       "pixels_per_scanline"))  # fmt: skip
        return _bytes_step(lambda b: bytes(imagecodecs.szip_decode(b, mask, ppb, bpp, pps, header=True)))
    if cid == "jpeg":
        import imagecodecs

        tables = base64.b64decode(codec["tables"]) if codec.get("tables") else None
        cs, ocs = codec.get("colorspace"), codec.get("outcolorspace")

        def jpeg(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> Any:
            return imagecodecs.jpeg_decode(data, tables=tables, colorspace=cs, outcolorspace=ocs)

        return jpeg
    if cid == "delta":
        import imagecodecs

        axis = int(codec.get("axis", -1))

        def undelta(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> Any:
            arr = _as_array(data, dt, shape).astype(dt.newbyteorder("="))
            return imagecodecs.delta_decode(arr, axis=axis).astype(dt)

        return undelta
    if cid == "floatpred":
        import imagecodecs

        axis = int(codec.get("axis", -1))

        def unfloatpred(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> Any:
            s = shape if len(shape) == 3 else (*shape, 1)  # floatpred wants (rows, width, samples)
            arr = np.frombuffer(bytes(data), dtype=dt).reshape(s).copy()
            out = imagecodecs.floatpred_decode(arr, axis=-2 if axis in (-1, -2) and len(shape) == 2 else axis)
            return np.asarray(out).astype(dt, copy=False).reshape(shape)

        return unfloatpred
    if cid == "refstore.grib":  # a whole GRIB message -> its values, through ecCodes (refstore/_grib.py)
        from .._grib import decode_message

        def grib(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> Any:
            return decode_message(data, dt).reshape(shape)

        return grib
    if cid == "vlen-utf8":  # variable-length strings held inline (numcodecs' VLenUTF8 encoding)
        from numcodecs import VLenUTF8

        vlen = VLenUTF8()

        def strings(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> Any:
            out = np.asarray(vlen.decode(bytes(data)), dtype=object)
            return out.reshape(shape) if out.size == math.prod(shape) else out

        return strings
    if cid == "bitunpack":

        def unpack(data: Any, dt: np.dtype[Any], shape: tuple[int, ...]) -> Any:
            # packed rows are whole bytes; a short last strip holds fewer rows than the chunk
            raw, cols = bytes(data), shape[-1]
            row_bytes = (cols + 7) // 8
            rows = min(shape[-2], len(raw) // row_bytes)
            packed = np.frombuffer(raw, np.uint8)[: rows * row_bytes].reshape(rows, row_bytes)
            return np.unpackbits(packed, axis=-1)[:, :cols].astype(bool).reshape((*shape[:-2], rows, cols))

        return unpack
    raise UnsupportedArrayError(f"no decoder for codec {cid!r}")


class ChunkDecoder:
    """Decode one chunk: undo the pipeline in reverse order, skipping filters the chunk's HDF5
    ``filter_mask`` says were not applied, then view the result as ``dtype`` in ``shape``."""

    def __init__(self, codecs: Sequence[dict[str, Any]], dtype: str, shape: tuple[int, ...]) -> None:
        self.spacepad = any(c["id"] == "spacepad" for c in codecs)
        self.nullterm = any(c["id"] == "nullterm" for c in codecs)
        codecs = [c for c in codecs if c["id"] not in _VALUE_STEPS]
        self.steps = [_step(c) for c in codecs]
        # every step bytes -> bytes: one call per step, no shape bookkeeping (most HDF5 chunks)
        self.fast = [_bytes_fn(c) for c in reversed(codecs)] if all(c["id"] in _BYTES_ONLY for c in codecs) else None
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)
        self.items = math.prod(self.shape)
        self.nbytes = self.items * self.dtype.itemsize

    def __call__(
        self, raw: bytes | memoryview, filter_mask: int = 0, edge: tuple[int, ...] | None = None
    ) -> np.ndarray[Any, Any]:
        """``edge``: the chunk's shape when cut by the array's end (used if the stored chunk is
        short, like a TIFF's last strip; edge chunks stored full size decode to ``shape``)."""
        out = self._filters(raw, filter_mask, edge)
        if self.spacepad:
            out = _spacepad(out)
        return _nullterm(out) if self.nullterm else out

    def _filters(
        self, raw: bytes | memoryview, filter_mask: int, edge: tuple[int, ...] | None
    ) -> np.ndarray[Any, Any]:
        if self.fast is not None and not filter_mask:
            buf: Any = raw
            for fn in self.fast:
                buf = fn(buf)
            if (buf.nbytes if isinstance(buf, np.ndarray) else len(buf)) == self.nbytes:
                return np.frombuffer(buf, dtype=self.dtype).reshape(self.shape)
        buf = raw
        full_n = self.items
        edge_n = full_n if edge is None or edge == self.shape else math.prod(edge)
        for i in range(len(self.steps) - 1, -1, -1):
            if filter_mask and (filter_mask >> i) & 1:
                continue
            items = buf.size if isinstance(buf, np.ndarray) else len(buf) // self.dtype.itemsize
            short = edge is not None and items == edge_n and items != full_n
            buf = self.steps[i](buf, self.dtype, edge if short and edge is not None else self.shape)
        items = buf.size if isinstance(buf, np.ndarray) else len(buf) // self.dtype.itemsize
        nbytes = buf.nbytes if isinstance(buf, np.ndarray) else len(buf)
        for shape, n in ((self.shape, full_n), (edge, edge_n)):
            if shape is not None and items == n and nbytes == n * self.dtype.itemsize:
                if isinstance(buf, np.ndarray):
                    return buf.reshape(shape).astype(self.dtype, copy=False)
                return np.frombuffer(buf, dtype=self.dtype).reshape(shape)
        raise ValueError(f"decoded chunk holds {nbytes} bytes, expected {self.nbytes}")


@lru_cache(maxsize=256)
def _cached(codecs_key: str, dtype: str, shape: tuple[int, ...]) -> ChunkDecoder:
    return ChunkDecoder(json.loads(codecs_key), dtype, shape)


def make_decoder(codecs: Sequence[dict[str, Any]], dtype: str, shape: tuple[int, ...]) -> ChunkDecoder:
    return _cached(json.dumps(list(codecs), sort_keys=True), dtype, tuple(shape))
