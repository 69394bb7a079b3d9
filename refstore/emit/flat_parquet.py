"""Flat Parquet: one self-describing Parquet file of every chunk reference of a version.

One row per chunk reference, sorted by ``(array_name, era, dim_0, dim_1, ...)``:
``array_name`` (string), ``era`` (int32), ``dim_0..dim_{n-1}`` (int64 chunk keys on the era's grid; null past
the array's rank), ``path`` (published URL; null for inline chunks), ``offset`` (int64; null
for inline), ``size`` (int64 bytes), ``inline`` (binary: the chunk's stored bytes, decoded like
fetched ones; null unless inline; held chunks are written here with their held bytes) and
``filter_mask`` (int32; bit i set = codec i of the pipeline was skipped for this chunk).
Row groups of ``ROW_GROUP_ROWS`` rows with min/max statistics, so a filter on the array and
chunk key reads one row group (pyarrow, DuckDB).

An array with no chunk grid (tiles placed off each other's chunk edges, ``grid: "none"`` in its
era, format ``/3``) has its chunks' element origins in ``dim_i`` instead of chunk keys, and its
``slabs`` (offset and shape) in the metadata: a chunk belongs to the slab holding its origin and
contributes ``min(chunk, slab offset + slab shape - origin)`` elements per dimension. The chunks
touching ``[lo, hi)`` are those with ``lo - chunk < dim_i < hi``.

Everything else is JSON under the Parquet key-value metadata key ``refstore`` (``METADATA_KEY``):
format, version and the tag the caller named (``tag``: null for a version number or latest),
sources (published and scanned locations, size, mtime, etag), the
remap rules applied, group attributes and every array's metadata with its eras (each with its
own chunk grid, dtype, fill value, codecs and attributes). Codec configs are refstore's
pipeline vocabulary in encode order (``design/formats.md``); attributes and fill values are
refstore's typed JSON. See ``design/emit.md``.

Writer options are pinned (zstd level 3, dictionary for ``array_name``/``path``, Parquet 2.6, data
page v1, no stored Arrow schema), so one version and options give byte-identical files; nothing
time-based is written.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from ..errors import UnexpressibleError
from ..plan.grid import edges_to_json
from ..plan.remap import to_url
from ..zarr_meta import LAYOUTS_DIFFER
from ._common import atomic_output

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = ["FORMAT", "METADATA_KEY", "ROW_GROUP_ROWS", "check", "metadata", "write"]

FORMAT = "refstore-flat-parquet/1"
"""``format`` in the metadata; a reader refuses other values."""
FORMAT_RECTILINEAR = "refstore-flat-parquet/2"
"""``format`` when some era has a rectilinear grid (``chunk_edges``): a /1 reader would place its
chunks at ``key * chunk`` and read wrong, so it must refuse the file."""
FORMAT_GRIDLESS = "refstore-flat-parquet/3"
"""``format`` when some array has no chunk grid (``gridless``): its ``dim_i`` are element origins,
not chunk keys, so a /1 or /2 reader must refuse the file."""
METADATA_KEY = "refstore"
"""The Parquet key-value metadata key holding the JSON document."""
ROW_GROUP_ROWS = 8192
"""Rows per row group: small enough that a key lookup reads little, large enough to compress."""


def check(src: EmitSource, meta: ArrayMeta) -> None:
    """Only arrays refstore itself cannot decode are refused: eras, short strips and filter
    masks are all expressible here."""
    if meta.status != "ok":
        raise UnexpressibleError(f"array {meta.name!r}: {meta.reason}")
    if meta.cell:  # each era has one codec pipeline and one chunk shape here
        raise UnexpressibleError(LAYOUTS_DIFFER.format(name=meta.name, form="a flat Parquet era"))


def _eras(src: EmitSource, meta: ArrayMeta) -> list[dict[str, Any]]:
    """Every era of the array (one covering the whole array when it has no era boundary)."""
    keep = ("first_source", "last_source")
    if meta.eras:
        out = []
        for e in meta.eras:
            em = meta.era_meta(e)
            out.append({
                "index": int(e["index"]), "axis": int(e["axis"]), "start": int(e["start"]), "stop": int(e["stop"]),
                "shape": list(em.shape), "chunks": list(em.chunks), "dtype": em.dtype, "fill_value": em.fill_value,
                "codecs": list(em.codecs), "attrs": em.attrs, **{k: e[k] for k in keep if k in e}, **_edges(em),
            })  # fmt: skip
        return out
    return [{
        "index": 0, "axis": 0 if meta.shape else None, "start": 0, "stop": int(meta.shape[0]) if meta.shape else None,
        "shape": list(meta.shape), "chunks": list(meta.chunks), "dtype": meta.dtype, "fill_value": meta.fill_value,
        "codecs": list(meta.codecs), "attrs": meta.attrs, **_edges(meta), **_slabs(src, meta),
    }]  # fmt: skip


def _edges(meta: ArrayMeta) -> dict[str, Any]:
    """``chunk_edges`` of a rectilinear grid (per dimension null or run-length chunk lengths;
    ``dim_i`` keys count chunks of that list), nothing for a regular one."""
    return {"chunk_edges": edges_to_json(meta.edges)} if meta.edges else {}


def _slabs(src: EmitSource, meta: ArrayMeta) -> dict[str, Any]:
    """A gridless array's placement: ``"grid": "none"`` and its ``slabs`` (each ``offset`` and
    ``shape`` in elements, sorted by offset). Its rows' ``dim_i`` are each chunk's element
    origin; a chunk belongs to the slab holding its origin and contributes
    ``min(chunk, slab offset + slab shape - origin)`` elements per dimension (the rest of its
    decoded buffer is padding)."""
    if not meta.gridless:
        return {}
    lay = src.snapshot.slab_layout(meta.name)
    slabs = sorted(zip(lay.offset.tolist(), lay.extent.tolist(), strict=True))
    return {"grid": "none", "slabs": [{"offset": o, "shape": n} for o, n in slabs]}


def _array_doc(src: EmitSource, meta: ArrayMeta) -> dict[str, Any]:
    dtype = np.result_type(*[np.dtype(e["dtype"]) for e in meta.eras]).str if meta.eras else np.dtype(meta.dtype).str
    return {
        "dims": list(meta.dims),
        "shape": [int(s) for s in meta.shape],
        "dtype": dtype,
        "fill_value": meta.fill_value,
        "attrs": meta.attrs,
        "short_edge": bool(meta.short_edge),
        "eras": _eras(src, meta),
    }


def metadata(src: EmitSource, arrays: list[ArrayMeta], key_columns: int) -> dict[str, Any]:
    """The JSON document stored under ``METADATA_KEY``."""
    s = src.sources()
    sources = [
        {"published": to_url(p), "scanned": loc, "size": size, "mtime_ns": mt, "etag": et or None}
        for p, loc, size, mt, et in zip(*(s.column(c).to_pylist() for c in ("published", "location", "size",
                                                                           "mtime_ns", "etag")), strict=True)
    ]  # fmt: skip
    rect = any(m.edges or any("edges" in e for e in m.eras) for m in arrays)
    gridless = any(m.gridless for m in arrays)
    return {
        "format": FORMAT_GRIDLESS if gridless else FORMAT_RECTILINEAR if rect else FORMAT,
        "version": src.version,
        "tag": src.tag,
        "concat_dim": src.concat_dim,
        "key_columns": [f"dim_{i}" for i in range(key_columns)],
        "remap": {"applied": bool(src.rules), "rules": [r.to_json() for r in src.rules]},
        "sources": sources,
        "groups": src.group_attrs(),
        "arrays": {m.name: _array_doc(src, m) for m in arrays},
    }


STREAM_REFS = 1_000_000
"""References read from the collection at once (a range of axis-0 chunk rows): the emit's memory
is that of one range and one row group, not of the array (``design/scale.md``)."""


def _parts(src: EmitSource, meta: ArrayMeta, ndim_max: int) -> Iterator[pa.Table]:
    """The rows of one array in key order: era by era, else axis-0 range by range."""
    if meta.eras:
        for e in meta.eras:
            yield _rows(src, meta, int(e["index"]), int(e["index"]), ndim_max)
        return
    grid = src.grid(meta)
    if not grid or not grid[0]:
        yield _rows(src, meta, None, 0, ndim_max)
        return
    step = max(1, STREAM_REFS // max(1, math.prod(grid[1:])))
    for a in range(0, grid[0], step):
        yield _rows(src, meta, None, 0, ndim_max, rows=(a, min(a + step, grid[0])))


def _rows(src: EmitSource, meta: ArrayMeta, era: int | None, era_index: int, ndim_max: int,
          rows: tuple[int, int] | None = None) -> pa.Table:  # fmt: skip
    t = src.refs(meta.name, era=era, rows=rows)
    n = t.num_rows
    inline = pc.less(t.column("offset"), 0)
    path: Any = pa.array([], pa.string())
    if n:  # published URLs: remap work per distinct location, as the source column is dictionary-encoded
        d = t.column("path").combine_chunks()
        urls = pa.array([to_url(u) for u in d.dictionary.to_pylist()], pa.string())
        path = pc.take(urls, d.indices)
    cols: dict[str, Any] = {
        "array_name": pa.repeat(pa.scalar(meta.name, pa.string()), n),
        "era": pa.repeat(pa.scalar(era_index, pa.int32()), n),
    }
    for i in range(ndim_max):
        cols[f"dim_{i}"] = t.column(GLOBAL_KEY_COLUMNS[i]) if i < meta.ndim else pa.nulls(n, pa.int64())
    cols["path"] = pc.if_else(inline, pa.scalar(None, pa.string()), path)
    cols["offset"] = pc.if_else(inline, pa.scalar(None, pa.int64()), pc.cast(t.column("offset"), pa.int64()))
    cols["size"] = pc.if_else(inline, pc.cast(pc.binary_length(t.column("inline")), pa.int64()),
                              pc.cast(t.column("length"), pa.int64()))  # fmt: skip
    cols["inline"] = pc.if_else(inline, pc.cast(t.column("inline"), pa.binary()), pa.scalar(None, pa.binary()))
    cols["filter_mask"] = pc.cast(t.column("filter_mask"), pa.int32())
    return pa.table(cols)


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    import pyarrow.parquet as pq

    arrays = sorted(arrays, key=lambda m: m.name.encode("utf-8"))
    ndim_max = max((m.ndim for m in arrays), default=0)

    def tables() -> Iterator[pa.Table]:
        for i, meta in enumerate(arrays):
            yield from _parts(src, meta, ndim_max)
            if progress is not None:
                progress(i + 1, len(arrays))

    stream = tables()
    first = next(stream, None)
    if first is None:  # pragma: no cover - emit() refuses a version without arrays first
        raise ValueError("no arrays to write")
    doc = metadata(src, arrays, ndim_max)
    order = ["array_name", "era", *(f"dim_{i}" for i in range(ndim_max))]
    sorting = [pq.SortingColumn(first.schema.get_field_index(c)) for c in order]
    n_refs = 0
    with atomic_output(out) as tmp:
        writer = pq.ParquetWriter(
            tmp, first.schema,
            version="2.6",
            data_page_version="1.0",
            compression="zstd",
            compression_level=3,
            use_dictionary=["array_name", "path"],
            write_statistics=True,
            store_schema=False,
            write_page_index=False,
            sorting_columns=sorting,
        )  # fmt: skip
        try:
            # whole row groups as they fill (the same groups as one write of everything)
            pending: list[pa.Table] = []
            held = 0
            for part in itertools.chain([first], stream):
                pending.append(part)
                held += part.num_rows
                n_refs += part.num_rows
                if held >= ROW_GROUP_ROWS:
                    buf = pa.concat_tables(pending)
                    full = held - held % ROW_GROUP_ROWS
                    writer.write_table(buf.slice(0, full), row_group_size=ROW_GROUP_ROWS)
                    pending, held = [buf.slice(full)], held - full
            if held:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
            text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
            writer.add_key_value_metadata({METADATA_KEY: text})
        finally:
            writer.close()
    return {"refs": n_refs, "row_groups": -(-n_refs // ROW_GROUP_ROWS)}
