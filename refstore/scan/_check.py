"""What every scan result must satisfy before it is recorded: each byte range inside the file,
each chunk key inside its array's chunk grid. Columnar (numpy over the chunk tables of a batch
of sources at once, one small lookup table per source and array), so a damaged file is refused
with one line whatever its size, and a batch of small files costs Arrow's fixed price once, not
once per file; each source is judged alone (its own first problem, named with its location)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
from ..errors import ScanError
from ._types import ChunkColumns, chunk_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._types import ArrayMeta, ScanResult

__all__ = ["check_result", "check_results"]

_NONE = [0] * MAX_DIMS


def check_result(res: ScanResult) -> None:
    """Raise ``ScanError`` naming the first reference of ``res`` that lies outside the file
    (``offset < 0``, ``length < 0`` or ``offset + length > size``, sizes in bytes) or whose key
    lies outside its array's grid (``0 <= k_i < ceil(shape_i / chunks_i)``, ``NO_DIM`` past the
    array's dimensions)."""
    err = check_results([res])[0]
    if err is not None:
        raise err


def check_results(results: Sequence[ScanResult]) -> list[Exception | None]:
    """``check_result`` of each of ``results`` in one pass: per result None, or what
    ``check_result`` raises for it (a ``ScanError``: ranges first, then arrays not in the file,
    then keys; any other exception comes from a malformed ``ArrayMeta``)."""
    errors: list[Exception | None] = [None] * len(results)
    held = [i for i, r in enumerate(results) if r.refs.num_rows]
    if not held:
        return errors
    parts = [results[i].refs for i in held]
    rows = _rows(parts)
    counts = np.fromiter((x.num_rows for x in parts), np.int64, len(parts))
    src = np.repeat(np.arange(len(held), dtype=np.int64), counts)  # row -> position in ``held``
    sizes = np.fromiter((results[i].source.size for i in held), np.int64, len(held))
    kept = [results[i] for i in held]
    _check_ranges(rows, sizes[src], src, kept, held, errors)
    _check_keys(rows, src, kept, held, errors)
    return errors


class _Rows(NamedTuple):
    """The joined chunk rows of a batch as numpy: ``which`` indexes ``names`` (each row's array);
    ``keys`` (rows x MAX_DIMS, int64); ``offset``/``length`` with nulls as 0 and where each is
    valid (None: everywhere)."""

    names: list[str]
    which: np.ndarray[Any, Any]
    keys: np.ndarray[Any, Any]
    offset: np.ndarray[Any, Any]
    offset_ok: np.ndarray[Any, Any] | None
    length: np.ndarray[Any, Any]
    length_ok: np.ndarray[Any, Any] | None


def _rows(parts: list[pa.Table | ChunkColumns]) -> _Rows:
    """The rows of ``parts``: numpy columns taken as they are (no Arrow), tables through Arrow."""
    if all(isinstance(p, ChunkColumns) for p in parts):
        c = ChunkColumns.join(parts)
        index: dict[str, int] = {}
        which = np.fromiter((index.setdefault(a, len(index)) for a in c.array), np.int64, c.num_rows)
        keys = c.keys.T.astype(np.int64)
        off = c.offset.astype(np.int64, copy=False)
        ln = c.length.astype(np.int64, copy=False)
        ref = None  # an inline row has neither offset nor length (chunk_table's nulls)
        if c.inline is not None:
            ref = np.fromiter((x is None for x in c.inline), bool, c.num_rows)
        return _Rows(list(index), which, keys, off, ref, ln, ref)
    t = chunk_table(parts).combine_chunks()  # one Arrow chunk per column (a single-chunk table is kept as is)
    enc = pc.dictionary_encode(t.column("array")).combine_chunks()
    keys = np.stack([t.column(c).to_numpy() for c in SOURCE_KEY_COLUMNS], axis=1).astype(np.int64)
    off, off_ok = _valid(t.column("offset"))
    ln, ln_ok = _valid(t.column("length"))
    return _Rows(enc.dictionary.to_pylist(), enc.indices.to_numpy().astype(np.int64), keys, off, off_ok, ln, ln_ok)


def _firsts(bad: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> list[tuple[int, int, int]]:
    """(position in ``held``, first bad row, number of bad rows) per source with a bad row."""
    rows = np.flatnonzero(bad)
    if not len(rows):
        return []
    owners, first, n = np.unique(src[rows], return_index=True, return_counts=True)
    return [(int(s), int(rows[f]), int(c)) for s, f, c in zip(owners, first, n, strict=True)]


def _valid(col: pa.ChunkedArray) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]:
    """The column's values (nulls as 0) and where it is valid (None: everywhere)."""
    if col.null_count == 0:
        return col.to_numpy(), None
    return pc.fill_null(col, 0).to_numpy(), pc.is_valid(col).to_numpy(zero_copy_only=False)


def _check_ranges(
    rows: _Rows, size: np.ndarray[Any, Any], src: np.ndarray[Any, Any], results: list[ScanResult], held: list[int],
    errors: list[Exception | None],
) -> None:  # fmt: skip
    off, ref, ln, ln_ok = rows.offset, rows.offset_ok, rows.length, rows.length_ok
    if ref is not None and not ref.any():
        return
    # a null length leaves only the offset's own sign to check (what NaN comparisons gave before)
    ln_bad = (ln < 0) | (off > size - ln)
    bad = (off < 0) | (ln_bad if ln_ok is None else ln_ok & ln_bad)
    if ref is not None:
        bad &= ref
    for s, i, n in _firsts(bad, src):
        lo, nb = int(off[i]), int(ln[i])
        what = (
            "a negative offset or length" if lo < 0 or nb < 0
            else f"bytes {lo}-{lo + nb}, past the end ({int(size[i])} bytes)"
        )  # fmt: skip
        more = f" (and {n - 1} more)" if n > 1 else ""
        errors[held[s]] = ScanError(
            results[s].source.location, f"damaged: a chunk of {rows.names[rows.which[i]]!r} points at {what}{more}"
        )


def _grid(meta: ArrayMeta, cache: dict[tuple[Any, Any], list[int]]) -> list[int]:
    """Chunks along each of MAX_DIMS dimensions of ``meta`` (``ceil(shape / chunks)``, 1 for an
    empty dimension, 0 past its dimensions)."""
    key = (meta.shape, meta.chunks)
    got = cache.get(key)
    if got is None:
        row = np.zeros(MAX_DIMS, np.int64)  # (an array of more dimensions raises IndexError, as it always did)
        for d, (s, c) in enumerate(zip(meta.shape, meta.chunks, strict=True)):
            row[d] = -(-int(s) // max(int(c), 1)) if s else 1
        got = cache[key] = row.tolist()
    return got


def _check_keys(
    rows: _Rows, src: np.ndarray[Any, Any], results: list[ScanResult], held: list[int],
    errors: list[Exception | None],
) -> None:  # fmt: skip
    names, which = rows.names, rows.which
    nn = len(names)
    pair = src * nn + which  # (source, array) of each row
    pairs, pair_of_row = np.unique(pair, return_inverse=True)
    # per (source, array): chunks along each of MAX_DIMS dimensions (0 = the array lacks that dimension)
    known = np.ones(len(pairs), bool)
    metas: list[ArrayMeta | None] = []
    cache: dict[tuple[Any, Any], list[int]] = {}
    by_name: dict[str, ArrayMeta] = {}
    at = -1
    broken: dict[int, Exception] = {}  # pair -> what computing its grid raised (a malformed ArrayMeta)
    grid_rows: list[list[int]] = []
    for j, (s, name) in enumerate(zip((pairs // nn).tolist(), [names[a] for a in (pairs % nn).tolist()], strict=True)):
        if s != at:
            at, by_name = s, {m.name: m for m in results[s].arrays}
        meta = by_name.get(name)
        metas.append(meta)
        if meta is not None:
            try:
                grid_rows.append(_grid(meta, cache))
                continue
            except Exception as e:  # that source's error, raised in its place
                broken[j] = e
        known[j] = False
        grid_rows.append(_NONE)
    grid = np.array(grid_rows, np.int64).reshape(len(pairs), MAX_DIMS)
    skip = np.fromiter((errors[h] is not None for h in held), bool, len(held))  # a range problem comes first
    # the first array (in order of appearance) that is not in the file, or whose grid is malformed
    for s, i, _n in _firsts(~known[pair_of_row] & ~skip[src], src):
        j = int(pair_of_row[i])
        errors[held[s]] = broken.get(j) or ScanError(
            results[s].source.location,
            f"damaged: chunks recorded for {names[which[i]]!r}, which is not an array of the file",
        )
        skip[s] = True
    keys = rows.keys
    limit = grid[pair_of_row]
    has = limit > 0
    bad_rows = np.where(has, (keys < 0) | (keys >= limit), keys != NO_DIM).any(axis=1) & ~skip[src]
    for s, i, n in _firsts(bad_rows, src):
        a = metas[int(pair_of_row[i])]
        assert a is not None
        key = keys[i, : a.ndim].tolist()
        more = f" (and {n - 1} more)" if n > 1 else ""
        errors[held[s]] = ScanError(
            results[s].source.location,
            f"damaged: chunk {key} of {a.name!r} lies outside its grid of "
            f"{grid[pair_of_row[i], : a.ndim].tolist()} chunks (shape {list(a.shape)}){more}",
        )
