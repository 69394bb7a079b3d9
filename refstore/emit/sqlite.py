"""SQLite: the mdim-refs/0.2 layout, as the public readers (hypertidy/zaro ``mdimrefs://``,
GDAL/OGR over SQLite) expect it, and mdim-refs/0.3 when an array has a rectilinear grid.

- ``meta(key TEXT PRIMARY KEY, value TEXT)``: ``format_version`` = ``mdim-refs/0.2`` (``0.3``
  when some array is rectilinear: a 0.2 reader places chunk ``k`` at ``k * chunk`` and would
  read it wrong, so it must refuse the file), plus
  ``generator``, ``refstore_version``, ``tag`` (the tag the caller named, ``""`` for a
  version number or latest), ``concat_dim``, ``remap_rules`` and
  ``group_attrs`` (JSON).
- ``sources(source_id INTEGER PRIMARY KEY, source TEXT)``: ``source`` is the published
  location (remapped); extra columns ``scanned``, ``file_size``, ``mtime_ns``, ``etag``.
- ``remap(target TEXT, prefix TEXT, replacement TEXT)``: target ``scanned``, one exact row per
  source mapping the published location back to the location as scanned (reading on the archive
  host); longest prefix first picks each source's own row.
- ``arrays(array TEXT PRIMARY KEY, kind, storage, dims, shape, chunks, dtype, fill, codec,
  attrs, affine, "values" BLOB)``: JSON text; ``codec`` is zarr v2 ``{"compressor": null,
  "filters": [numcodecs configs]}``; ``fill`` text (``NaN``/``Infinity`` spelled out); plus
  ``chunk_table``.
- one chunk table per array, ``chunks_<array>(source_id, dim_0.., present, "offset" BIGINT,
  size BIGINT, info, data BLOB)``, primary key ``(dim_0..)``; absent chunks have no row; inline
  chunks (held chunks too, with their held bytes) have ``offset`` NULL and their bytes in
  ``data``.
- one view per array, ``refs_<array>``: ``dim_0.., present, path, "offset", size, info,
  data`` (path NULL for inline chunks).
- 0.3 only: ``chunk_edges(array, dim, chunk, start, size)``, primary key ``(array, dim,
  chunk)``: for each rectilinear dimension of an array (sources placed off their chunk
  boundaries: monthly files of daily data), every chunk along it: its start and length in
  elements. Along such a dimension ``dim_i`` counts these chunks; a chunk still decodes to
  ``chunks`` elements (an HDF5 partial chunk stored padded) and contributes its first ``size``.
  Dimensions without rows are regular (chunk ``k`` at ``k * chunk``, cut by the shape).

Arrays the zarr v2 model cannot express are refused (eras, short strips, filter masks, codecs
without a numcodecs id, arrays with no chunk grid). Rows are written in a fixed order into a
fresh database with a pinned page size, then ``VACUUM``; journal mode DELETE (not WAL), so one
version and options give byte-identical files.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from .._values import decode_fill
from ..errors import StorageError, UnexpressibleError
from ..zarr_meta import attr_values, plain_attrs, v2_filters
from ._common import atomic_output, check_zarr

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = ["FORMAT_VERSION", "FORMAT_VERSION_RECTILINEAR", "check", "fill_text", "quote", "write"]

FORMAT_VERSION = "mdim-refs/0.2"
FORMAT_VERSION_RECTILINEAR = "mdim-refs/0.3"
"""``format_version`` when some array has a rectilinear grid (the ``chunk_edges`` table)."""
PAGE_SIZE = 4096
BATCH_ROWS = 50_000


def check(src: EmitSource, meta: ArrayMeta) -> None:
    if any(c["id"] == "refstore.grib" for c in meta.codecs):
        raise UnexpressibleError(f"array {meta.name!r}: GRIB messages decode only with refstore's codec "
                                 "(refstore.grib, through ecCodes); mdim-refs readers lack it")  # fmt: skip
    check_zarr(src, meta, zarr_format=2, rectilinear=True)


def quote(name: str) -> str:
    """An SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _strict(obj: Any) -> Any:
    """Non-finite floats as the strings zarr uses (``NaN``, ``Infinity``): strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return _float_text(obj)
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strict(v) for v in obj]
    return obj


def _dumps(obj: Any) -> str:
    return json.dumps(_strict(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)


def fill_text(meta: ArrayMeta) -> str:
    """The stored fill value as text: what absent chunks read as (NaN/Infinity spelled out;
    bytes dtypes base64)."""
    dt = np.dtype(meta.dtype)
    v = decode_fill(meta.fill_value, dt)
    if dt.kind in "SV":
        import base64

        return base64.b64encode(np.asarray(v, dt).tobytes()).decode("ascii")
    if dt.kind == "b":
        return "1" if bool(v) else "0"
    if dt.kind in "iu":
        return str(int(v))
    if dt.kind == "c":
        return _dumps([_float_text(v.real), _float_text(v.imag)])
    return _float_text(v)


def _float_text(v: Any) -> str:
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return repr(f)


def _kind(meta: ArrayMeta) -> str:
    """``coord`` for a dimension's coordinate variable (1-d, named like its dimension)."""
    return "coord" if meta.ndim == 1 and meta.dims[0] == meta.name.rsplit("/", 1)[-1] else "data"


_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE sources(source_id INTEGER PRIMARY KEY, source TEXT UNIQUE NOT NULL, scanned TEXT NOT NULL,
  file_size BIGINT, mtime_ns BIGINT, etag TEXT);
CREATE TABLE remap(target TEXT NOT NULL, prefix TEXT NOT NULL, replacement TEXT NOT NULL,
  PRIMARY KEY (target, prefix)) WITHOUT ROWID;
CREATE TABLE arrays(array TEXT PRIMARY KEY, kind TEXT, storage TEXT, dims TEXT, shape TEXT, chunks TEXT,
  dtype TEXT, fill TEXT, codec TEXT, attrs TEXT, affine TEXT, "values" BLOB, chunk_table TEXT) WITHOUT ROWID;
"""


_EDGES_DDL = """CREATE TABLE chunk_edges(array TEXT NOT NULL, dim INTEGER NOT NULL, chunk INTEGER NOT NULL,
  start BIGINT NOT NULL, size BIGINT NOT NULL, PRIMARY KEY (array, dim, chunk)) WITHOUT ROWID"""


def _rectilinear(meta: ArrayMeta) -> bool:
    return any(ls is not None for ls in meta.edges)


def _edge_rows(meta: ArrayMeta) -> list[tuple[str, int, int, int, int]]:
    """``chunk_edges`` rows of one array: every chunk along each rectilinear dimension."""
    out: list[tuple[str, int, int, int, int]] = []
    for d, ls in enumerate(meta.edges):
        if ls is None:
            continue
        starts = np.concatenate([[0], np.cumsum(np.asarray(ls, np.int64))[:-1]]).tolist()
        out += [(meta.name, d, k, int(a), int(n)) for k, (a, n) in enumerate(zip(starts, ls, strict=True))]
    return out


def _chunk_ddl(meta: ArrayMeta) -> tuple[str, str]:
    dims = [f"dim_{i}" for i in range(meta.ndim)]
    table, view = quote(f"chunks_{meta.name}"), quote(f"refs_{meta.name}")
    cols = ", ".join(f"{d} INTEGER NOT NULL" for d in dims)
    pk = f", PRIMARY KEY ({', '.join(dims)})) WITHOUT ROWID" if dims else ")"
    ddl = (f'CREATE TABLE {table}(source_id INTEGER NOT NULL REFERENCES sources, {cols}{", " if cols else ""}'
           f'present INTEGER NOT NULL DEFAULT 1, "offset" BIGINT, size BIGINT, info TEXT, data BLOB{pk}')  # fmt: skip
    sel = "".join(f"c.{d}, " for d in dims)
    view_ddl = (f"CREATE VIEW {view} AS SELECT {sel}c.present, "
                f'CASE WHEN c."offset" IS NULL THEN NULL ELSE s.source END AS path, c."offset", c.size, c.info, c.data '
                f"FROM {table} AS c JOIN sources AS s USING(source_id)")  # fmt: skip
    return ddl, view_ddl


def _chunk_rows(src: EmitSource, meta: ArrayMeta, ids: dict[str, int]) -> Iterator[list[tuple[Any, ...]]]:
    """Rows of the array's chunk table in key order, in batches (Python tuples only per batch)."""
    t = src.refs(meta.name)
    for lo in range(0, t.num_rows, BATCH_ROWS):
        b = t.slice(lo, BATCH_ROWS)
        d = b.column("path").combine_chunks()
        sid = np.array([ids[p] for p in d.dictionary.to_pylist()], np.int64)[d.indices.to_numpy()]
        offsets = b.column("offset").to_numpy()
        inline = offsets < 0
        sizes = b.column("length").to_numpy().copy()
        if inline.any():
            sizes[inline] = pc.binary_length(b.column("inline")).to_numpy()[inline]
        cols: list[list[Any]] = [sid.tolist()]
        cols += [b.column(GLOBAL_KEY_COLUMNS[i]).to_numpy().tolist() for i in range(meta.ndim)]
        n = b.num_rows
        off: list[Any] = offsets.tolist()
        data: list[Any] = [None] * n
        if inline.any():
            raw = b.column("inline").to_pylist()
            for j in np.flatnonzero(inline).tolist():
                off[j] = None
                data[j] = raw[j]
        cols += [[1] * n, off, sizes.tolist(), [None] * n, data]
        yield list(zip(*cols, strict=True))


def _array_row(meta: ArrayMeta) -> tuple[Any, ...]:
    filters = v2_filters(meta, rectilinear=True)  # the chunk_edges table records the grid
    attrs = plain_attrs(meta)
    return (
        meta.name, _kind(meta), "referenced", _dumps(list(meta.dims)), _dumps([int(s) for s in meta.shape]),
        _dumps([int(c) for c in meta.chunks]), np.dtype(meta.dtype).str, fill_text(meta),
        _dumps({"compressor": None, "filters": filters or None}), _dumps(attrs), None, None, f"chunks_{meta.name}",
    )  # fmt: skip


def _meta_rows(src: EmitSource, arrays: list[ArrayMeta]) -> list[tuple[str, str]]:
    groups = {g: attr_values(a) for g, a in src.group_attrs().items()}
    rows = {
        "format_version": FORMAT_VERSION_RECTILINEAR if any(map(_rectilinear, arrays)) else FORMAT_VERSION,
        "generator": "refstore",
        "refstore_version": str(src.version),
        "tag": src.tag or "",
        "concat_dim": src.concat_dim or "",
        "remap_rules": _dumps([r.to_json() for r in src.rules]),
        "group_attrs": _dumps(groups),
    }
    return sorted(rows.items())


def _fill_db(
    con: sqlite3.Connection, src: EmitSource, arrays: list[ArrayMeta], progress: Callable[[int, int], None] | None
) -> int:
    s = src.sources()
    published = s.column("published").to_pylist()
    scanned = s.column("location").to_pylist()
    ids = {p: i + 1 for i, p in enumerate(published)}
    for stmt in _SCHEMA.strip().split(";"):
        if stmt.strip():
            con.execute(stmt)
    con.executemany("INSERT INTO meta VALUES (?, ?)", _meta_rows(src, arrays))
    if any(map(_rectilinear, arrays)):
        con.execute(_EDGES_DDL)
        con.executemany("INSERT INTO chunk_edges VALUES (?, ?, ?, ?, ?)", [r for m in arrays for r in _edge_rows(m)])
    etags = [e or None for e in s.column("etag").to_pylist()]
    extra = (s.column("size").to_pylist(), s.column("mtime_ns").to_pylist(), etags)
    con.executemany("INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?)",
                    zip(ids.values(), published, scanned, *extra, strict=True))  # fmt: skip
    con.executemany("INSERT INTO remap VALUES ('scanned', ?, ?)", sorted(zip(published, scanned, strict=True)))
    con.executemany(f"INSERT INTO arrays VALUES ({', '.join('?' * 13)})", [_array_row(m) for m in arrays])
    n_refs = 0
    for i, meta in enumerate(arrays):
        ddl, view = _chunk_ddl(meta)
        con.execute(ddl)
        con.execute(view)
        insert = f"INSERT INTO {quote(f'chunks_{meta.name}')} VALUES ({', '.join('?' * (meta.ndim + 6))})"
        for batch in _chunk_rows(src, meta, ids):
            con.executemany(insert, batch)
            n_refs += len(batch)
        if progress is not None:
            progress(i + 1, len(arrays))
    return n_refs


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    arrays = sorted(arrays, key=lambda m: m.name)
    with atomic_output(out) as tmp:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            con.execute("BEGIN")
            n_refs = _fill_db(con, src, arrays, progress)
            con.execute("COMMIT")
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("VACUUM")
        except sqlite3.Error as e:
            raise StorageError(f"{out}: cannot write SQLite: {e}") from None
        finally:
            con.close()
    return {"refs": n_refs}
