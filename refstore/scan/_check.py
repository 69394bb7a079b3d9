"""What every scan result must satisfy before it is recorded: each byte range inside the file,
each chunk key inside its array's chunk grid. Columnar (numpy over the whole chunk table, one
small lookup table per array), so a damaged file is refused with one line whatever its size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
from ..errors import ScanError

if TYPE_CHECKING:
    from ._types import ScanResult

__all__ = ["check_result"]


def check_result(res: ScanResult) -> None:
    """Raise ``ScanError`` naming the first reference of ``res`` that lies outside the file
    (``offset < 0``, ``length < 0`` or ``offset + length > size``, sizes in bytes) or whose key
    lies outside its array's grid (``0 <= k_i < ceil(shape_i / chunks_i)``, ``NO_DIM`` past the
    array's dimensions)."""
    t = res.chunks
    if t.num_rows == 0:
        return
    where = res.source.location
    _check_ranges(t, res.source.size, where)
    _check_keys(t, res, where)


def _check_ranges(t: pa.Table, size: int, where: str) -> None:
    offsets = t.column("offset")
    if offsets.null_count == len(offsets):
        return
    ref = pc.is_valid(offsets)
    off = offsets.filter(ref).to_numpy()
    ln = t.column("length").filter(ref).to_numpy()
    bad = (off < 0) | (ln < 0) | (off > size - ln)
    if bad.any():
        i = int(np.argmax(bad))
        name = t.column("array").filter(ref)[i].as_py()
        lo, n = int(off[i]), int(ln[i])
        what = "a negative offset or length" if lo < 0 or n < 0 else f"bytes {lo}-{lo + n}, past the end ({size} bytes)"
        more = f" (and {int(bad.sum()) - 1} more)" if int(bad.sum()) > 1 else ""
        raise ScanError(where, f"damaged: a chunk of {name!r} points at {what}{more}")


def _check_keys(t: pa.Table, res: ScanResult, where: str) -> None:
    enc = pc.dictionary_encode(t.column("array")).combine_chunks()
    names = enc.dictionary.to_pylist()
    which = enc.indices.to_numpy()
    by_name = {a.name: a for a in res.arrays}
    # per array: chunks along each of MAX_DIMS dimensions (0 = the array lacks that dimension)
    grid = np.zeros((len(names), MAX_DIMS), np.int64)
    for i, name in enumerate(names):
        meta = by_name.get(name)
        if meta is None:
            raise ScanError(where, f"damaged: chunks recorded for {name!r}, which is not an array of the file")
        for d, (s, c) in enumerate(zip(meta.shape, meta.chunks, strict=True)):
            grid[i, d] = -(-int(s) // max(int(c), 1)) if s else 1
    keys: Any = np.stack([t.column(c).to_numpy() for c in SOURCE_KEY_COLUMNS], axis=1).astype(np.int64)
    limit = grid[which]
    has = limit > 0
    bad_rows = np.where(has, (keys < 0) | (keys >= limit), keys != NO_DIM).any(axis=1)
    if bad_rows.any():
        i = int(np.argmax(bad_rows))
        a = by_name[names[which[i]]]
        key = keys[i, : a.ndim].tolist()
        more = f" (and {int(bad_rows.sum()) - 1} more)" if int(bad_rows.sum()) > 1 else ""
        raise ScanError(
            where, f"damaged: chunk {key} of {a.name!r} lies outside its grid of {grid[which[i], : a.ndim].tolist()}"
            f" chunks (shape {list(a.shape)}){more}",
        )  # fmt: skip
