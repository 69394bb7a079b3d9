"""kerchunk Parquet: fsspec's ``LazyReferenceMapper`` layout, with zarr v2 metadata.

``OUT/.zmetadata`` holds ``{"metadata": {".zgroup": {...}, "sst/.zarray": {...}, ...},
"record_size": N, "zarr_consolidated_format": 1}`` (metadata as JSON objects; also valid zarr v2
consolidated metadata). Each array ``A`` has ``OUT/A/refs.<k>.parq``,
``k = 0 .. ceil(chunks / N) - 1``: row ``i`` of the array's references is the chunk whose C-order
flat index is ``k * N + i``, and every file has exactly ``N`` rows. Columns: ``path`` (string,
null unless a reference), ``offset`` and ``size`` (int64; 0 unless a reference), ``raw``
(binary, the inline chunk bytes, else null). A row whose ``path`` and ``raw`` are both null is an
absent chunk (zarr reads the fill value); see ``kerchunk_json.fill_plan`` for fill values (and
the absent chunks it writes inline).

Built columnar: the rows of an array are scattered into the padded grid with numpy and
``pyarrow.compute.take`` (work per distinct URL, never per chunk), and written with pinned
Parquet options (zstd, statistics only for the integer columns, format 2.6, data pages v1, one
row group per file), so the bytes depend only on the version, the options and the pyarrow
release. Held chunks are written as ``raw`` (their held bytes), so the form reads what its
version reads.

Open with ``fsspec.filesystem("reference", fo=OUT, remote_protocol="file")`` + zarr (v2), or
xarray ``open_dataset("reference://", engine="zarr", storage_options={"fo": OUT, ...})``. fsspec
reads the files with fastparquet by default; with ``LazyReferenceMapper(OUT, engine="pyarrow")``
under pandas 3, a null ``path`` reaches fsspec as NaN and absent chunks fail to read unless
``pandas.set_option("future.infer_string", False)`` (see ``design/emit.md``).
"""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import BadInputError
from ..plan.remap import to_url
from ._common import atomic_output, is_kerchunk_parquet
from .kerchunk_json import check_v2, consolidated, fill_plan, string_dictionary, v2_metadata

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = ["MAX_RECORD_SIZE", "SCHEMA", "check", "padded_refs", "record_size", "write"]

MAX_RECORD_SIZE = 100_000
"""Rows per ``refs.<k>.parq`` file (kerchunk's and VirtualiZarr's default); smaller when no array
has that many chunks."""

SCHEMA = pa.schema([
    pa.field("path", pa.string()),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("raw", pa.binary()),
])  # fmt: skip

_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": ["path"],
    # fastparquet reads an int64 column without statistics (null count) as float64
    "write_statistics": ["offset", "size"],
    "version": "2.6",
    "data_page_version": "1.0",
    "store_schema": True,
    "write_page_index": False,
    "write_page_checksum": False,
}
"""Pinned so the bytes do not follow pyarrow's defaults (the footer's ``created_by`` names the
pyarrow release and nothing else varies)."""


def check(src: EmitSource, meta: ArrayMeta) -> None:
    check_v2(src, meta)


def _n_chunks(src: EmitSource, meta: ArrayMeta) -> int:
    return math.prod(src.grid(meta))


def record_size(src: EmitSource, arrays: list[ArrayMeta]) -> int:
    """Rows per file: the largest array's chunk count, at most :data:`MAX_RECORD_SIZE`."""
    return max(1, min(MAX_RECORD_SIZE, max((_n_chunks(src, m) for m in arrays), default=1)))


MAX_FILES = 1_000_000
"""``refs.<k>.parq`` files one array may take (10^11 chunks at the default record size): a grid
claiming more is refused before anything is written."""


STREAM_REFS = 1_000_000
"""References read from the collection at once: record files are written batch by batch, each
batch from the axis-0 chunk rows covering it, so memory follows one batch, not the array."""


def _batches(src: EmitSource, meta: ArrayMeta, rs: int, n_files: int) -> Iterator[tuple[int, int, pa.Table]]:
    """(first file, end file, the references those files hold or more): arrays with eras at once
    (their axis-0 keys are per era), others by axis-0 rows covering ~``STREAM_REFS`` chunks."""
    grid = src.grid(meta)
    per_row = math.prod(grid[1:]) if grid else 1
    if meta.eras or not grid or not per_row:
        yield 0, n_files, src.refs(meta.name)
        return
    step = max(1, STREAM_REFS // rs)
    for k0 in range(0, n_files, step):
        k1 = min(k0 + step, n_files)
        a, b = k0 * rs // per_row, min(grid[0], -(-(k1 * rs) // per_row))
        yield k0, k1, src.refs(meta.name, rows=(a, b))


class _Records:
    """The reference files of one array, one at a time: memory follows the references and one
    record file (``rows`` rows), never the chunk grid."""

    def __init__(
        self, src: EmitSource, meta: ArrayMeta, refs: pa.Table, rows: int, *, n_refs: int | None = None
    ) -> None:
        """``n_refs``: the array's references in all (``refs`` may be those of some files only)."""
        self.rows = rows
        self.n_chunks = _n_chunks(src, meta)
        flat = src.flat_index(meta, refs)
        order = np.argsort(flat, kind="stable") if len(flat) and (np.diff(flat) < 0).any() else None
        if order is not None:
            refs, flat = refs.take(pa.array(order)), flat[order]
        self.flat = flat
        self.offsets = refs.column("offset").to_numpy()
        self.lengths = refs.column("length").to_numpy()
        self.inline = refs.column("inline")
        if refs.num_rows:
            d = string_dictionary(refs.column("path"))
            self.urls = pa.array([to_url(p) for p in d.dictionary.to_pylist()], pa.string())
            self.path_idx = d.indices.to_numpy(zero_copy_only=False)
        self.fill = fill_plan(meta, self.n_chunks, refs.num_rows if n_refs is None else n_refs).chunk

    def bounds(self, k: int) -> tuple[int, int]:
        """Rows of the references in file ``k``."""
        lo, hi = np.searchsorted(self.flat, [k * self.rows, (k + 1) * self.rows])
        return int(lo), int(hi)

    def table(self, k: int) -> pa.Table:
        """File ``k``: ``rows`` rows, row ``i`` the chunk of flat index ``k * rows + i``."""
        rows, start = self.rows, k * self.rows
        lo, hi = self.bounds(k)
        at = self.flat[lo:hi] - start
        offsets, lengths = self.offsets[lo:hi], self.lengths[lo:hi]
        inline = offsets < 0
        ref = ~inline
        off = np.zeros(rows, np.int64)
        size = np.zeros(rows, np.int64)
        off[at[ref]] = offsets[ref]
        size[at[ref]] = lengths[ref]
        if hi > lo:
            idx = np.full(rows, -1, np.int64)
            idx[at[ref]] = self.path_idx[lo:hi][ref]
            path = pc.take(self.urls, pa.array(idx, mask=idx < 0))
        else:
            path = pa.nulls(rows, pa.string())
        if inline.any():
            values = pc.cast(self.inline.slice(lo, hi - lo).filter(pa.array(inline)).combine_chunks(), pa.binary())
            raw = _scatter(values, at[inline], rows)
        else:
            raw = pa.nulls(rows, pa.binary())
        if self.fill is not None:  # absent chunks written inline as the encoded fill chunk
            absent = np.zeros(rows, bool)
            absent[: max(0, min(rows, self.n_chunks - start))] = True
            absent[at] = False
            raw = pc.if_else(pa.array(absent), pa.scalar(self.fill, pa.binary()), raw)
        return pa.Table.from_arrays([path, pa.array(off), pa.array(size), raw], schema=SCHEMA)

    def is_empty(self, k: int) -> bool:
        """File ``k`` holds no reference and no fill chunk (all such files are the same bytes)."""
        lo, hi = self.bounds(k)
        return hi == lo and self.fill is None


def _scatter(values: pa.Array, where: np.ndarray[Any, Any], total: int) -> pa.Array:
    """``total`` rows, null except ``values[j]`` at row ``where[j]``."""
    idx = np.full(total, -1, np.int64)
    idx[where] = np.arange(len(where), dtype=np.int64)
    return pc.take(values, pa.array(idx, mask=idx < 0))


def padded_refs(src: EmitSource, meta: ArrayMeta, refs: pa.Table, rows: int) -> pa.Table:
    """The array's references as ``rows`` rows (a multiple of the record size) in C-order flat
    chunk index, with :data:`SCHEMA` (one table: for small arrays and tests; ``write`` streams)."""
    return _Records(src, meta, refs, rows).table(0)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=table.num_rows, **_PARQUET_OPTIONS)
    return bytes(sink.getvalue())


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    rs = record_size(src, arrays)
    n_refs: dict[str, int] = {}
    files = 0
    with atomic_output(out, directory=True, previous=is_kerchunk_parquet) as tmp:
        for meta in arrays:
            n_files = math.ceil(_n_chunks(src, meta) / rs)
            if n_files > MAX_FILES:
                raise BadInputError(
                    f"array {meta.name!r}: its grid of {_n_chunks(src, meta)} chunks would take {n_files} reference "
                    f"files of {rs} rows (at most {MAX_FILES}); the parquet and sqlite forms list only its references"
                )
        empty: bytes | None = None
        for i, meta in enumerate(arrays):
            n_files = math.ceil(_n_chunks(src, meta) / rs)
            total = src.snapshot.ds.count_rows(filter=src.snapshot.view_filter(meta.name))
            folder = os.path.join(tmp, *meta.name.split("/"))
            os.makedirs(folder, exist_ok=True)
            for k0, k1, refs in _batches(src, meta, rs, n_files):
                records = _Records(src, meta, refs, rs, n_refs=total)
                for k in range(k0, k1):
                    if records.is_empty(k):
                        empty = empty if empty is not None else _parquet_bytes(records.table(k))
                        data = empty
                    else:
                        data = _parquet_bytes(records.table(k))
                    with open(os.path.join(folder, f"refs.{k}.parq"), "wb") as f:
                        f.write(data)
            n_refs[meta.name] = total
            files += n_files
            if progress is not None:
                progress(i + 1, len(arrays))
        doc = {**consolidated(v2_metadata(src, arrays, n_refs)), "record_size": rs}
        with open(os.path.join(tmp, ".zmetadata"), "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, sort_keys=True, separators=(",", ":")))
    return {"refs": sum(n_refs.values()), "record_size": rs, "files": files}
