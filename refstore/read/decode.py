"""Decoding chunk bytes through a codec pipeline (numcodecs / imagecodecs). Pure CPU work."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import UnsupportedArrayError

__all__ = ["ChunkDecoder", "make_decoder"]

_Step = Callable[[bytes], bytes]


def _step(codec: dict[str, Any]) -> _Step:
    cid = codec["id"]
    if cid == "zlib":
        return zlib.decompress
    if cid == "shuffle":
        from numcodecs import Shuffle

        sh = Shuffle(elementsize=int(codec["elementsize"]))
        return lambda b: bytes(sh.decode(b))
    if cid == "fletcher32":
        from numcodecs import Fletcher32

        fl = Fletcher32()
        return lambda b: bytes(fl.decode(b))
    if cid == "zstd":
        from numcodecs import Zstd

        zs = Zstd()
        return lambda b: bytes(zs.decode(b))
    if cid == "blosc":
        from numcodecs import Blosc

        bl = Blosc()
        return lambda b: bytes(bl.decode(b))
    if cid == "lz4h5":
        import imagecodecs

        return lambda b: bytes(imagecodecs.lz4h5_decode(b))
    if cid == "szip":
        import imagecodecs

        mask, ppb, bpp, pps = (int(codec[k]) for k in ("mask", "pixels_per_block", "bits_per_pixel",
                                                       "pixels_per_scanline"))  # fmt: skip
        return lambda b: bytes(imagecodecs.szip_decode(b, mask, ppb, bpp, pps, header=True))
    raise UnsupportedArrayError(f"no decoder for codec {cid!r}")


class ChunkDecoder:
    """Decode one chunk: undo the pipeline in reverse order, skipping filters the chunk's HDF5
    ``filter_mask`` says were not applied, then view the bytes as ``dtype`` in ``shape``."""

    def __init__(self, codecs: Sequence[dict[str, Any]], dtype: str, shape: tuple[int, ...]) -> None:
        self.steps = [_step(c) for c in codecs]
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize

    def __call__(self, raw: bytes | memoryview, filter_mask: int = 0) -> np.ndarray[Any, Any]:
        buf: Any = raw
        for i in range(len(self.steps) - 1, -1, -1):
            if filter_mask and (filter_mask >> i) & 1:
                continue
            buf = self.steps[i](buf)
        if len(buf) != self.nbytes:
            raise ValueError(f"decoded chunk holds {len(buf)} bytes, expected {self.nbytes}")
        return np.frombuffer(buf, dtype=self.dtype).reshape(self.shape)


@lru_cache(maxsize=256)
def _cached(codecs_key: str, dtype: str, shape: tuple[int, ...]) -> ChunkDecoder:
    import json

    return ChunkDecoder(json.loads(codecs_key), dtype, shape)


def make_decoder(codecs: Sequence[dict[str, Any]], dtype: str, shape: tuple[int, ...]) -> ChunkDecoder:
    import json

    return _cached(json.dumps(list(codecs), sort_keys=True), dtype, tuple(shape))
