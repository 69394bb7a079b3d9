"""A read-only file over byte-range requests with a block cache, so format libraries that want a
file (h5py, tifffile, the netCDF3 header parser) read remote metadata without downloading the
whole object.

Reads are served from fixed-size blocks (``block_size`` bytes, aligned); the blocks a read
misses are fetched in one ranged request each (adjacent missing blocks merged), and the last
``max_blocks`` blocks are kept (least recently used dropped).
"""

from __future__ import annotations

import io
from collections import OrderedDict
from typing import Any

from .. import _objstore

__all__ = ["DEFAULT_BLOCK_SIZE", "RangeFile"]

DEFAULT_BLOCK_SIZE = 256 * 1024
"""bytes: HDF5 object headers and B-tree nodes of one dataset usually sit within one block."""


class RangeFile(io.RawIOBase):
    """``location`` read through ranged GETs; ``size`` in bytes (from a HEAD the caller made)."""

    def __init__(
        self, location: str, size: int, *, block_size: int = DEFAULT_BLOCK_SIZE, max_blocks: int = 128
    ) -> None:
        super().__init__()
        self.location = location
        self.size = int(size)
        self.block_size = int(block_size)
        self.max_blocks = int(max_blocks)
        self._pos = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self.requests = 0
        self.bytes_fetched = 0

    # ------------------------------------------------------------------ io protocol
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise OSError(22, "negative seek position")
        self._pos = pos
        return pos

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        n = min(len(view), max(0, self.size - self._pos))
        if n == 0:
            return 0
        data = self.pread(self._pos, n)
        view[:n] = data
        self._pos += n
        return n

    # ------------------------------------------------------------------ ranged reads
    def pread(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (short at the end of the object)."""
        end = min(self.size, offset + length)
        if end <= offset:
            return b""
        bs = self.block_size
        first, last = offset // bs, (end - 1) // bs
        self._fetch([i for i in range(first, last + 1) if i not in self._blocks])
        parts = []
        for i in range(first, last + 1):
            blk = self._blocks[i]
            self._blocks.move_to_end(i)
            lo = max(offset - i * bs, 0)
            hi = min(end - i * bs, len(blk))
            parts.append(blk[lo:hi])
        out = b"".join(parts) if len(parts) > 1 else parts[0]
        while len(self._blocks) > max(self.max_blocks, last - first + 1):
            self._blocks.popitem(last=False)
        return bytes(out)

    def _fetch(self, missing: list[int]) -> None:
        if not missing:
            return
        runs: list[list[int]] = []
        for i in missing:
            if runs and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
        bs = self.block_size
        starts = [a * bs for a, _ in runs]
        ends = [min(b * bs, self.size) for _, b in runs]
        got = _objstore.get_ranges(self.location, starts, ends)
        self.requests += len(runs)
        for (a, b), s, e, data in zip(runs, starts, ends, got, strict=True):
            if len(data) != e - s:
                raise OSError(f"{self.location}: short read at bytes {s}-{e} (object changed?)")
            self.bytes_fetched += len(data)
            raw = bytes(data)
            for i in range(a, b):
                self._blocks[i] = raw[(i - a) * bs : (i - a + 1) * bs]
