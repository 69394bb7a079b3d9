"""A look at a TIFF's IFD entries before tifffile parses them: a damaged or hostile file can
claim 2^28 tiles in a few hundred bytes (over a sparse file), and tifffile reads every offset
of every page when it opens it (31 s and 5.2 GB for 2^28 tiles). Counts past the limits here
are refused with the figure before any of that is read."""

from __future__ import annotations

import struct
from typing import BinaryIO

__all__ = ["MAX_IFDS", "MAX_SEGMENTS", "check_tiff_counts"]

MAX_SEGMENTS = 1 << 24
"""tiles or strips one IFD may have (16,777,216; the offsets alone are 128 MiB as int64)."""

MAX_IFDS = 65_536
"""IFDs (pages) one file may have."""

_SEGMENT_TAGS = {273: "strips", 324: "tiles"}  # StripOffsets, TileOffsets


def check_tiff_counts(fh: BinaryIO) -> str | None:
    """Why the TIFF in ``fh`` is refused (an IFD claiming more than :data:`MAX_SEGMENTS`
    segments, more than :data:`MAX_IFDS` IFDs), or None. Reads only the IFD entry tables;
    structure errors are left to tifffile, which says them better."""
    fh.seek(0)
    head = fh.read(16)
    if len(head) < 8 or head[:2] not in (b"II", b"MM"):
        return None
    bo = "<" if head[:2] == b"II" else ">"
    big = struct.unpack(bo + "H", head[2:4])[0] == 43
    if big and len(head) < 16:
        return None
    at = struct.unpack(bo + "Q", head[8:16])[0] if big else struct.unpack(bo + "I", head[4:8])[0]
    n_size, entry, cnt_fmt, off_fmt = (8, 20, "Q", "Q") if big else (2, 12, "I", "I")
    seen: set[int] = set()
    while at and at not in seen:
        if len(seen) >= MAX_IFDS:
            return f"more than {MAX_IFDS} IFDs (pages); not scanned"
        seen.add(at)
        fh.seek(at)
        raw = fh.read(n_size)
        if len(raw) < n_size:
            return None
        n = struct.unpack(bo + ("Q" if big else "H"), raw)[0]
        table = fh.read(min(n, 4096) * entry)
        for i in range(len(table) // entry):
            e = table[i * entry : (i + 1) * entry]
            tag = struct.unpack(bo + "H", e[:2])[0]
            if tag in _SEGMENT_TAGS:
                count = struct.unpack(bo + cnt_fmt, e[4 : 4 + (8 if big else 4)])[0]
                if count > MAX_SEGMENTS:
                    what, ifd = _SEGMENT_TAGS[tag], len(seen) - 1
                    return f"IFD {ifd} claims {count} {what}, more than the {MAX_SEGMENTS} taken here; not scanned"
        if n > 4096:
            return None  # an entry table this long is damaged: tifffile says how
        nxt = fh.read(8 if big else 4)
        if len(nxt) < (8 if big else 4):
            return None
        at = struct.unpack(bo + off_fmt, nxt)[0]
    return None
