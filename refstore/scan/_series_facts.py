"""What a series plan needs to know of a source's values, computed once at scan time.

The plan is pure (``plan/``): it cannot open files. Two facts about a source's values decide
how it joins a series, so the scan records them in the source row (``meta``):

- ``order_keys``: for every numeric 1-D array along the concat dimension (other than the
  dimension's own coordinate, which is ``sort_value``), its first and last values, units and
  whether it is a CF time (``standard_name`` ``time``, ``axis`` ``T`` or units ``X since
  DATE``). A NEMO file's ``time_counter`` is 0 in every file; ``time_centered(time_counter)``
  tells the months apart (``series_order``).
- ``digests``: for every array taken once (without the concat dimension; every array when
  there is none), and for arrays along it of at most ``ALONG_BYTES`` (its coordinate and
  bounds: what files of one step split by variable share), a digest the plan compares
  between sources (``plan/concat.py``, ``plan/series_order.py``). Arrays of at most
  ``VALUE_BYTES`` decoded bytes are digested by their decoded values (``v:``): the same
  coordinates compare equal whatever the chunking or compression. Larger ones by their layout
  (codecs, chunk shape, every chunk's key and stored length) and at most ``SAMPLE_BYTES`` of
  the stored bytes of their first and last chunks (``r:``): bounded reads. A source's decoded reads stop at
  ``BUDGET_BYTES``; arrays past it get the ``r:`` digest.

Everything is read through the chunk rows the scanner just made (byte ranges or inline
bytes) and decoded by refstore's codec pipeline: one routine for every format.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from .._keys import SOURCE_KEY_COLUMNS
from ..read.decode import make_decoder
from ._cftime import cf_seconds, is_cf_time

if TYPE_CHECKING:
    import pyarrow as pa

    from ._types import ArrayMeta, ScanResult

__all__ = ["ALONG_BYTES", "BUDGET_BYTES", "SAMPLE_BYTES", "VALUE_BYTES", "with_series_facts"]

VALUE_BYTES = 4 << 20
"""Arrays taken once up to this many decoded bytes are digested by their values."""
ALONG_BYTES = 64 << 10
"""Arrays along the concat dimension up to this many decoded bytes (its coordinate, bounds) are
digested too: files of one step split by variable must agree on them (``series_order``)."""
BUDGET_BYTES = 64 << 20
"""Decoded bytes one source may read for its digests and order keys."""
SAMPLE_BYTES = 1 << 20
"""Bytes of the first chunk's start and the last chunk's end that a layout digest reads."""
_MAX_ORDER_KEYS = 32
MAX_CHUNKS = 1024
"""Arrays stored in more chunks (other than one raw run) are not decoded: layout digest, or none."""


class _TooManyChunks(ValueError):
    """More than ``MAX_CHUNKS`` chunks to decode one by one."""


class _Rows:
    """The chunk rows of one array: keys, byte ranges or inline bytes, filter masks."""

    def __init__(self, table: pa.Table, meta: ArrayMeta) -> None:
        self.n = table.num_rows
        self.keys = np.stack([table.column(c).to_numpy() for c in SOURCE_KEY_COLUMNS[: meta.ndim]], axis=1) \
            if meta.ndim else np.zeros((self.n, 0), np.int64)  # fmt: skip
        self.offset = table.column("offset").to_pylist()
        self.length = table.column("length").to_pylist()
        self.inline = table.column("inline").to_pylist()
        self.mask = [m or 0 for m in table.column("filter_mask").to_pylist()]

    def raw(self, fh: BinaryIO, i: int) -> bytes:
        inline = self.inline[i]
        if inline is not None:
            return bytes(inline)
        fh.seek(int(self.offset[i]))
        data = fh.read(int(self.length[i]))
        if len(data) != int(self.length[i]):
            raise OSError("short read")
        return data

    def head(self, fh: BinaryIO, i: int, limit: int, *, tail: bool = False) -> bytes:
        """At most ``limit`` stored bytes of chunk ``i``: its first ones, or its last (``tail``)."""
        inline = self.inline[i]
        if inline is not None:
            data = bytes(inline)
            return data[-limit:] if tail else data[:limit]
        start, n = int(self.offset[i]), int(self.length[i])
        take = min(n, limit)
        fh.seek(start + n - take if tail else start)
        data = fh.read(take)
        if len(data) != take:
            raise OSError("short read")
        return data

    def stored(self, i: int) -> int:
        inline = self.inline[i]
        return len(inline) if inline is not None else int(self.length[i] or 0)


def _raw_run(fh: BinaryIO, meta: ArrayMeta, rows: _Rows) -> np.ndarray[Any, Any] | None:
    """The array in one read when it is stored raw (no codecs) in chunks that split only its
    first dimension, every one present (a contiguous variable split along the concat
    dimension, netCDF3 records): their bytes in key order are the array in C order (an edge
    chunk stored full size ends past it). None: not such an array, or its chunks lie far apart."""
    if meta.codecs or meta.ndim == 0 or tuple(meta.chunks[1:]) != tuple(meta.shape[1:]) or rows.n < 2:
        return None
    if any(x is not None for x in rows.inline):
        return None
    order = np.argsort(rows.keys[:, 0], kind="stable")
    if not np.array_equal(rows.keys[order, 0], np.arange(-(-meta.shape[0] // meta.chunks[0]))):
        return None
    off = np.asarray(rows.offset, np.int64)[order]
    ln = np.asarray(rows.length, np.int64)[order]
    nbytes = math.prod(meta.shape) * meta.np_dtype.itemsize
    lo, hi = int(off.min()), int((off + ln).max())
    if hi - lo > 2 * nbytes + (64 << 10):
        return None
    fh.seek(lo)
    buf = fh.read(hi - lo)
    if len(buf) != hi - lo:
        raise OSError("short read")
    data = b"".join(buf[o - lo : o - lo + n] for o, n in zip(off.tolist(), ln.tolist(), strict=True))
    if len(data) < nbytes:
        return None
    return np.frombuffer(data[:nbytes], dtype=meta.np_dtype).reshape(meta.shape)


def _values(fh: BinaryIO, meta: ArrayMeta, rows: _Rows) -> np.ndarray[Any, Any]:
    """The whole array decoded (absent chunks as zeros: the digest also covers which are present)."""
    run = _raw_run(fh, meta, rows)
    if run is not None:
        return run
    if rows.n > MAX_CHUNKS:
        raise _TooManyChunks
    out = np.zeros(meta.shape, dtype=meta.np_dtype)
    chunks = tuple(int(c) for c in meta.chunks)
    decode = make_decoder(meta.codecs, meta.dtype, chunks)
    for i in range(rows.n):
        k = rows.keys[i]
        start = [int(k[d]) * chunks[d] for d in range(meta.ndim)]
        edge = tuple(min(chunks[d], meta.shape[d] - start[d]) for d in range(meta.ndim))
        block = decode(rows.raw(fh, i), rows.mask[i], edge)
        sel = tuple(slice(s, s + e) for s, e in zip(start, edge, strict=True))
        out[sel] = block[tuple(slice(0, e) for e in edge)]
    return out


def _value_digest(fh: BinaryIO, meta: ArrayMeta, rows: _Rows) -> str:
    values = _values(fh, meta, rows)
    h = hashlib.sha256(json.dumps([meta.dtype, list(meta.shape)]).encode())
    h.update(np.ascontiguousarray(rows.keys).tobytes())
    h.update(np.ascontiguousarray(values).tobytes())
    return "v:" + h.hexdigest()


def _layout_digest(fh: BinaryIO, meta: ArrayMeta, rows: _Rows) -> str:
    h = hashlib.sha256(json.dumps([meta.dtype, list(meta.shape), list(meta.chunks), list(meta.codecs)],
                                  sort_keys=True).encode())  # fmt: skip
    order = np.lexsort(rows.keys.T[::-1]) if rows.n and meta.ndim else np.arange(rows.n)
    h.update(np.ascontiguousarray(rows.keys[order]).tobytes())
    h.update(np.array([rows.stored(int(i)) for i in order], np.int64).tobytes())
    if rows.n:
        h.update(rows.head(fh, int(order[0]), SAMPLE_BYTES))
        h.update(rows.head(fh, int(order[-1]), SAMPLE_BYTES, tail=True))
    return "r:" + h.hexdigest()


def _by_array(table: pa.Table) -> dict[str, pa.Table]:
    if not table.num_rows:
        return {}
    names = table.column("array").to_numpy(zero_copy_only=False)
    order = np.argsort(names, kind="stable")
    sorted_names = names[order]
    out: dict[str, pa.Table] = {}
    bounds = np.flatnonzero(np.r_[True, sorted_names[1:] != sorted_names[:-1], True])
    for a, b in itertools.pairwise(bounds):
        out[str(sorted_names[a])] = table.take(order[a:b])
    return out


def _first_last(fh: BinaryIO, meta: ArrayMeta, rows: _Rows) -> tuple[float, float] | None:
    """First and last values of a 1-D array, decoding only the chunks holding them."""
    (n,), (c,) = meta.shape, meta.chunks
    k = rows.keys[:, 0]
    lo, hi = int(np.argmin(k)), int(np.argmax(k))
    if int(k[lo]) != 0 or int(k[hi]) != (n - 1) // c:
        return None  # the first or last value is not stored: the fill value
    decode = make_decoder(meta.codecs, meta.dtype, (c,))
    first = decode(rows.raw(fh, lo), rows.mask[lo], (min(c, n),))
    last_edge = n - int(k[hi]) * c
    last = decode(rows.raw(fh, hi), rows.mask[hi], (last_edge,))
    return float(first[0]), float(last[last_edge - 1])


def _order_key(fh: BinaryIO, meta: ArrayMeta, rows: _Rows) -> list[Any] | None:
    if rows.n == 0 or not meta.shape[0]:
        return None
    found = _first_last(fh, meta, rows)
    if found is None:
        return None
    first, last = found
    if not (math.isfinite(first) and math.isfinite(last)):
        return None
    units = meta.attrs.get("units", {}).get("value")
    calendar = meta.attrs.get("calendar", {}).get("value", "standard")
    time = is_cf_time(meta.attrs)
    if isinstance(units, str):
        s0, s1 = cf_seconds(first, units, str(calendar)), cf_seconds(last, units, str(calendar))
        if s0 is not None and s1 is not None:
            return [s0, s1, "seconds since 1970-01-01", time]
        return [first, last, units, time]
    return [first, last, None, time]


def with_series_facts(res: ScanResult, fh: BinaryIO, concat_dim: str | None) -> ScanResult:
    """``res`` with its ``order_keys`` and ``digests`` (``fh``: the opened source). A value
    that cannot be read or decoded leaves its entry out (the plan then does not compare it)."""
    tables = _by_array(res.chunks)
    budget = BUDGET_BYTES
    keys: dict[str, list[Any]] = {}
    digests: dict[str, str] = {}
    for meta in res.arrays:
        if meta.status != "ok" or meta.np_dtype.kind not in "biufcSUV" or any(c <= 0 for c in meta.chunks):
            continue
        rows = _Rows(tables[meta.name], meta) if meta.name in tables else None
        nbytes = math.prod(meta.shape) * meta.np_dtype.itemsize
        if math.prod(meta.chunks) * meta.np_dtype.itemsize > VALUE_BYTES:
            nbytes = max(nbytes, VALUE_BYTES + 1)  # chunks larger than the budget: never decoded here
        along = concat_dim is not None and concat_dim in meta.dims
        try:
            if along:
                if (meta.dims == (concat_dim,) and meta.name != concat_dim and meta.np_dtype.kind in "iuf"
                        and rows is not None and nbytes <= min(VALUE_BYTES, budget)
                        and len(keys) < _MAX_ORDER_KEYS):  # fmt: skip
                    budget -= nbytes
                    key = _order_key(fh, meta, rows)
                    if key is not None:
                        keys[meta.name] = key
                if rows is not None and meta.ndim <= 2 and nbytes <= min(ALONG_BYTES, budget):
                    budget -= nbytes
                    digests[meta.name] = _value_digest(fh, meta, rows)
                continue
            if rows is None:
                digests[meta.name] = "v:absent"  # no chunk stored: every element is the fill value
            elif nbytes <= min(VALUE_BYTES, budget):
                budget -= nbytes
                try:
                    digests[meta.name] = _value_digest(fh, meta, rows)
                except _TooManyChunks:
                    digests[meta.name] = _layout_digest(fh, meta, rows)
            else:
                digests[meta.name] = _layout_digest(fh, meta, rows)
        except Exception:  # any reader's or codec's failure: not recorded, so not compared
            continue
    return dataclasses.replace(res, order_keys=keys, digests=digests)
