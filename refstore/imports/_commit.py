"""Committing an imported store: one new version that replaces the collection's arrays, sources
and chunk rows (remap rules stay), through the scan's commit path (``table/_replace.py``,
``table/_commit.py``).

Layout, as a scan would have recorded the same files (``design/import.md``): one ``source`` row
per referenced file (identified now: size, mtime, etag; its format sniffed), one ``var`` row per
(file, array) placed where the file's chunks sit, one ``array`` row per array and one ``chunk``
row per reference (key within the file, global key) or inline chunk (``offset = -1``, source
``""``: the bytes came from the store, not from a file).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import DEST_COLUMNS, GLOBAL_KEY_COLUMNS, MAX_DIMS, NO_OFFSET, SOURCE_KEY_COLUMNS
from .._quote import quoted
from ..errors import BadInputError, SourceMissingError, SourceReadError
from ..scan._sources import normalize_location
from ..schema import Kind
from ..table._commit import commit, head_row, retry_on_conflict
from ..table._replace import replace_rows
from ..table._rows import rows
from ..table.upsert import diff_counts
from ._model import WHOLE_OBJECT

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..table.collection import Collection, Snapshot
    from ._model import ParsedStore

__all__ = ["ImportReport", "commit_import", "identify_sources"]


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What one import did: the version it made, what it brought in (``refs``: references to
    files, ``inline``: chunks held in the store), and the row changes against the version before."""

    version: int
    form: str
    store: str
    arrays: int
    sources: int
    refs: int
    inline: int
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unsupported: tuple[tuple[str, str], ...] = ()
    held_kept: int = 0
    """Held chunks of the version before whose reference is unchanged: their bytes stay held."""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "form": self.form,
            "store": self.store,
            "arrays": self.arrays,
            "sources": self.sources,
            "chunks": {"referenced": self.refs, "inline": self.inline},
            "refs": {"inserted": self.inserted, "updated": self.updated, "deleted": self.deleted},
            "unsupported": [{"array": a, "reason": r} for a, r in self.unsupported],
            "held_kept": self.held_kept,
            **self.detail,
        }


@dataclass(frozen=True, slots=True)
class _Source:
    location: str
    size: int
    mtime_ns: int
    etag: str
    format: str | None


def _sniff(location: str) -> str | None:
    from ..errors import RefstoreError
    from ..scan.auto import sniff

    try:
        kind = sniff(location)
    except (RefstoreError, OSError):
        return None
    return None if kind == "unknown" else kind


def identify_sources(
    store: str, locations: list[str], progress: Callable[[int, int], None] | None = None
) -> dict[str, _Source]:
    """Size, mtime and etag of each referenced file now, and its format by its first bytes: a
    file that does not exist or cannot be reached is refused (``BadInputError`` naming it)."""
    from ..read.fetch import Fetcher

    fetcher = Fetcher()
    out: dict[str, _Source] = {}
    for i, loc in enumerate(locations):
        try:
            size, mtime, etag = fetcher.head(loc)
        except SourceMissingError:
            raise BadInputError(f"{store}: references {loc}, which does not exist") from None
        except SourceReadError as e:
            raise BadInputError(f"{store}: references {loc}, which cannot be reached "
                                f"({str(e).removeprefix(loc + ': ')})") from None  # fmt: skip
        out[loc] = _Source(loc, int(size), -1 if mtime is None else int(mtime), etag or "", _sniff(loc))
        if progress is not None:
            progress(i + 1, len(locations))
    return out


def _local_etag(location: str) -> str | None:
    """A local file's etag as object_store (Icechunk's storage layer) computes it, None for a
    remote location (its etag comes from the HEAD request)."""
    import os

    import obstore
    from obstore.store import LocalStore

    from .. import _objstore

    if _objstore.is_remote(location):
        return None
    path = os.path.abspath(location.removeprefix("file://"))
    try:
        tag = obstore.head(LocalStore(os.path.dirname(path)), os.path.basename(path)).get("e_tag")
    except Exception:  # gone or unreadable since it was identified: no etag to compare
        return None
    return None if tag is None else str(tag)


_Arr = np.ndarray[Any, Any]


def _slabs(keys: _Arr, src: _Arr, n_src: int) -> tuple[_Arr, _Arr, _Arr, _Arr, int]:
    """Per file (``src`` codes): the files present, their first and last chunk key per axis, their
    chunk offset, and the axis the files are laid along (-1: none). Along the first axis on which
    the files' key ranges are disjoint (a series combined along it), each file starts at its first
    chunk there; elsewhere at 0 (``design/import.md``)."""
    nd = keys.shape[1]
    lo = np.full((n_src, nd), np.iinfo(np.int64).max, np.int64)
    hi = np.full((n_src, nd), -1, np.int64)
    np.minimum.at(lo, src, keys)
    np.maximum.at(hi, src, keys)
    present = np.unique(src)
    place = np.zeros((n_src, nd), np.int64)
    axis = -1
    if len(present) > 1:
        for d in range(nd):
            order = present[np.argsort(lo[present, d], kind="stable")]
            if np.all(lo[order[1:], d] > hi[order[:-1], d]):
                place[present, d] = lo[present, d]
                axis = d
                break
    return present, lo, hi, place, axis


def _rows_for(parsed: ParsedStore, sources: dict[str, _Source], locs: pa.Array) -> tuple[pa.Table, pa.Table, int]:
    """Chunk rows and var rows of the imported references; the number of referenced chunks.
    Columnar: Python loops over arrays and (array, file) pairs only."""
    arrays = parsed.arrays
    ok = pa.array([n for n, m in arrays.items() if m.status == "ok"], pa.string())
    keep = pc.is_in(parsed.refs.column("array"), ok)
    refs = parsed.refs.filter(keep).combine_chunks()
    locs = locs.filter(keep)
    n = refs.num_rows
    is_ref = (refs.column("offset").to_numpy() >= 0) & pc.is_valid(refs.column("path")).to_numpy(zero_copy_only=False)
    source_col = pc.fill_null(locs, "")
    if isinstance(source_col, pa.ChunkedArray):
        source_col = source_col.combine_chunks()
    src_codes = source_col.dictionary_encode()
    src_idx = src_codes.indices.to_numpy(zero_copy_only=False).astype(np.int64) if n else np.zeros(0, np.int64)
    src_names = src_codes.dictionary.to_pylist() if n else []
    length = refs.column("length").to_numpy().astype(np.int64)
    whole = is_ref & (length == WHOLE_OBJECT)
    if whole.any():
        sizes = np.array([sources[s].size if s else 0 for s in src_names], np.int64)
        length = np.where(whole, sizes[src_idx], length)
    g = [refs.column(c).to_numpy() for c in GLOBAL_KEY_COLUMNS]  # int32, NO_DIM past an array's dimensions
    k: list[np.ndarray[Any, Any] | None] = [None] * MAX_DIMS  # copies only where a file is placed off 0
    arr_codes = refs.column("array").combine_chunks().dictionary_encode()
    arr_idx = arr_codes.indices.to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
    var_arrays: list[str] = []
    var_sources: list[str] = []
    var_meta: list[str] = []
    dest: list[list[int]] = [[] for _ in DEST_COLUMNS]
    ref_rows = np.flatnonzero(is_ref)
    by_array = ref_rows[np.argsort(arr_idx[ref_rows], kind="stable")]
    cuts = np.searchsorted(arr_idx[by_array], np.arange(len(arr_codes.dictionary) + 1)) if n else np.zeros(1, int)
    for ai, name in enumerate(arr_codes.dictionary.to_pylist() if n else []):
        meta = arrays[name]
        sel = by_array[cuts[ai] : cuts[ai + 1]]
        if not len(sel):
            continue
        nd = meta.ndim
        keys = (np.stack([g[d][sel].astype(np.int64) for d in range(nd)], axis=1) if nd
                else np.zeros((len(sel), 0), np.int64))  # fmt: skip
        present, _lo, hi, place, axis = _slabs(keys, src_idx[sel], len(src_names))
        for d in range(nd):
            if place[:, d].any():
                kd = k[d]
                if kd is None:
                    kd = k[d] = g[d].copy()
                kd[sel] = (keys[:, d] - place[src_idx[sel], d]).astype(np.int32)
        chunks = np.asarray(meta.chunks, np.int64)
        shape = np.asarray(meta.shape, np.int64)
        for si in present.tolist():
            start = place[si] * chunks
            stop = np.minimum((hi[si] + 1) * chunks, shape)
            extent = np.where(np.arange(nd) == axis, stop - start, shape)  # the file's slab
            var_arrays.append(name)
            var_sources.append(src_names[si])
            var_meta.append(meta.with_shape(tuple(int(x) for x in extent)).to_json())
            for d in range(MAX_DIMS):
                dest[d].append(int(start[d]) if d < nd else 0)
    inline = pc.if_else(pa.array(is_ref), pa.scalar(b"", pa.large_binary()), refs.column("inline"))
    chunk_rows = rows(
        Kind.CHUNK, n, array=refs.column("array"), source=source_col,
        **{c: refs.column(GLOBAL_KEY_COLUMNS[d]) if k[d] is None else pa.array(k[d], pa.int32())
           for d, c in enumerate(SOURCE_KEY_COLUMNS)},
        **{c: refs.column(c) for c in GLOBAL_KEY_COLUMNS},
        offset=pa.array(np.where(is_ref, refs.column("offset").to_numpy(), NO_OFFSET), pa.int64()),
        length=pa.array(length, pa.int64()), inline=inline,
    )  # fmt: skip
    var_rows = rows(
        Kind.VAR, len(var_arrays), array=var_arrays, source=var_sources, status=["ok"] * len(var_arrays),
        meta=var_meta, **{c: pa.array(dest[d], pa.int64()) for d, c in enumerate(DEST_COLUMNS)},
    )  # fmt: skip
    return chunk_rows, var_rows, int(is_ref.sum())


def _carry_held(
    snap: Snapshot, chunk_rows: pa.Table, sources: dict[str, _Source] | None = None
) -> tuple[pa.Table, int]:
    """``chunk_rows`` with the held bytes of the previous version's rows that reference the same
    bytes (same array, key, source, offset and length, the source's size, mtime and etag as
    recorded): importing a store again keeps what was held on unchanged references (``hold.md``),
    never the bytes of a file rewritten since (a Zarr chunk object of the same length). The
    number of rows carried."""
    key = ["array", *GLOBAL_KEY_COLUMNS, "source", "offset", "length"]
    old = snap.ds.to_table(columns=[*key, "held_at", "held_ns", "held_digest"],
                           filter="kind = 'chunk' AND held_at >= 0", with_row_id=True)  # fmt: skip
    if sources is not None and old.num_rows:
        was = snap.source_identity()
        changed = [s for s, now in sources.items() if s in was and was[s] != (now.size, now.mtime_ns, now.etag)]
        if changed:
            old = old.filter(pc.invert(pc.is_in(old.column("source"), pa.array(changed, pa.string()))))
    if old.num_rows == 0 or chunk_rows.num_rows == 0:
        return chunk_rows, 0
    n = chunk_rows.num_rows
    j = chunk_rows.select(key).append_column("__n", pa.array(np.arange(n))).join(
        old.select(key).append_column("__o", pa.array(np.arange(old.num_rows))), keys=key, join_type="inner")
    if j.num_rows == 0:
        return chunk_rows, 0
    ni = j.column("__n").to_numpy()
    oi = j.column("__o").to_numpy()
    from lance.blob import blob_array

    data: list[bytes | None] = [None] * n
    blobs = snap.ds.read_blobs("held", ids=old.column("_rowid").take(pa.array(oi)), preserve_order=True)
    for i, (_addr, raw) in zip(ni.tolist(), blobs, strict=True):
        data[i] = raw
    cols = {}
    for c, fill in (("held_at", -1), ("held_ns", -1), ("held_digest", "")):
        values = np.full(n, fill, dtype=object if c == "held_digest" else np.int64)
        values[ni] = old.column(c).to_numpy(zero_copy_only=False)[oi]
        cols[c] = pa.array(values, chunk_rows.schema.field(c).type)
    cols["held"] = blob_array(data)
    for c, arr in cols.items():
        i = chunk_rows.schema.get_field_index(c)
        chunk_rows = chunk_rows.set_column(i, chunk_rows.schema.field(c), arr)
    return chunk_rows, len(ni)


def _check_ranges(parsed: ParsedStore, sources: dict[str, _Source], chunk_rows: pa.Table) -> None:
    """Refuse a reference past the end of its file."""
    t = chunk_rows.filter(pc.greater_equal(chunk_rows.column("offset"), 0))
    if not t.num_rows:
        return
    codes = t.column("source").combine_chunks().dictionary_encode()
    size = np.array([sources[s].size for s in codes.dictionary.to_pylist()], np.int64)[codes.indices.to_numpy()]
    end = t.column("offset").to_numpy() + t.column("length").to_numpy()
    bad = np.flatnonzero(end > size)
    if len(bad):
        i = int(bad[0])
        raise BadInputError(
            f"{parsed.location}: a chunk of {quoted(t.column('array')[i].as_py())} references bytes "
            f"{t.column('offset')[i].as_py()}-{int(end[i])} of {t.column('source')[i].as_py()}, "
            f"which has {int(size[i])} bytes"
        )


def _attempt(col: Collection, parsed: ParsedStore, sources: dict[str, _Source], locs: pa.Array) -> ImportReport:
    snap: Snapshot = col.snapshot()
    chunk_rows, var_rows, n_refs = _rows_for(parsed, sources, locs)
    _check_ranges(parsed, sources, chunk_rows)
    chunk_rows, kept_held = _carry_held(snap, chunk_rows, sources)
    names = sorted(parsed.arrays)
    array_rows = rows(Kind.ARRAY, len(names), array=names, status=[parsed.arrays[n].status for n in names],
                      meta=[parsed.arrays[n].to_json() for n in names])  # fmt: skip
    ordered = sorted(sources)
    source_rows = rows(
        Kind.SOURCE, len(ordered), source=ordered, size=[sources[s].size for s in ordered],
        mtime_ns=[sources[s].mtime_ns for s in ordered], etag=[sources[s].etag for s in ordered],
        sort_value=[math.nan] * len(ordered),
        meta=[json.dumps({"order": i, "sort_units": None,
                          **({"format": sources[s].format} if sources[s].format else {})}, sort_keys=True)
              for i, s in enumerate(ordered)],
    )  # fmt: skip
    imported = {"form": parsed.form, "store": parsed.location, **parsed.detail}
    head = head_row(snap, {"concat_dim": None, "mosaic": None, "set_aside": {}, "prefer": [], "time_from_name": None,
                           "imported": imported, "groups": parsed.groups})  # fmt: skip
    cols = ["array", *GLOBAL_KEY_COLUMNS, "source", "offset", "length", "inline"]
    old = snap.rows(Kind.CHUNK, cols, "g0 >= -1")
    ins, upd, dele = diff_counts(old, chunk_rows.select(cols), ["array", *GLOBAL_KEY_COLUMNS], cols[9:])
    new_rows = pa.concat_tables([head, source_rows, var_rows, array_rows, chunk_rows])
    txn = replace_rows(snap, new_rows, "kind IN ('collection', 'source', 'var', 'array', 'chunk')")
    unsupported = tuple((n, m.reason or "") for n, m in sorted(parsed.arrays.items()) if m.status != "ok")
    inline = chunk_rows.num_rows - n_refs
    record = {"form": parsed.form, "store": parsed.location, "arrays": len(names), "sources": len(ordered),
              "chunks": {"referenced": n_refs, "inline": inline},
              "refs": {"inserted": ins, "updated": upd, "deleted": dele},
              "held_kept": kept_held, "unsupported": [{"array": a, "reason": r} for a, r in unsupported]}  # fmt: skip
    message = (f"import {parsed.form} {parsed.location}: {len(names)} arrays, {len(ordered)} sources, "
               f"{n_refs} references, {inline} inline chunks; refs +{ins} ~{upd} -{dele}")  # fmt: skip
    version = commit(col, txn, "import", message, record, parent=snap)
    return ImportReport(version=version, form=parsed.form, store=parsed.location, arrays=len(names),
                        sources=len(ordered), refs=n_refs, inline=inline, inserted=ins, updated=upd, deleted=dele,
                        unsupported=unsupported, held_kept=kept_held)  # fmt: skip


def commit_import(
    col: Collection,
    parsed: ParsedStore,
    *,
    allow: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Identify the files ``parsed`` references (refusing any outside the store's own folder or
    bucket and the ``allow`` prefixes (``_trust.py``), missing, unreachable, or shorter than a
    reference into it) and commit the store as one new version."""
    from ._trust import check_locations

    paths = parsed.refs.column("path").combine_chunks()
    distinct = [p for p in pc.unique(paths).to_pylist() if p is not None]
    check_locations(parsed.location, distinct, allow)
    canonical = {p: normalize_location(p) for p in distinct}
    locs = pc.take(pa.array([canonical[p] for p in distinct], pa.string()),
                   pc.index_in(paths, pa.array(distinct, pa.string())))  # fmt: skip
    if isinstance(locs, pa.ChunkedArray):
        locs = locs.combine_chunks()
    ok = {n for n, m in parsed.arrays.items() if m.status == "ok"}
    used = pc.unique(locs.filter(pc.is_in(parsed.refs.column("array"), pa.array(sorted(ok), pa.string())))).to_pylist()
    sources = identify_sources(parsed.location, sorted(s for s in used if s is not None), progress)
    for loc, stamp in parsed.modified_before.items():
        src = sources.get(normalize_location(loc))
        if src is not None and src.mtime_ns >= 0 and src.mtime_ns > stamp * 1_000_000_000:
            raise BadInputError(f"{parsed.location}: its references into {src.location} were recorded for the file as "
                                f"of {stamp} s since the epoch; the file was modified since")  # fmt: skip
    for loc, recorded in parsed.etags.items():
        src = sources.get(normalize_location(loc))
        if src is None:
            continue
        now = src.etag or _local_etag(src.location)
        if now is None or now.strip('"') != recorded.strip('"'):
            raise BadInputError(f"{parsed.location}: its references into {src.location} were recorded for the "
                                f"file with etag {recorded}; its etag is now {now or 'unknown'} "
                                "(modified since)")  # fmt: skip
    store = normalize_location(parsed.location)
    if store in sources and not (parsed.form == "zarr" and parsed.detail.get("zip")):  # a zipped store: its entries
        raise BadInputError(f"{parsed.location}: references itself")
    inline_ok = pc.and_(pc.is_null(locs), pc.is_in(parsed.refs.column("array"), pa.array(sorted(ok), pa.string())))
    if pc.any(inline_ok).as_py():  # inline chunks: their bytes came from the store
        sources[store] = _store_identity(store, parsed.form)
        locs = pc.fill_null(locs, store)
    return retry_on_conflict(col, lambda: _attempt(col, parsed, sources, locs))


def _store_identity(store: str, form: str) -> _Source:
    """The store as the source of its inline chunks: its identity where one request gives it
    (a file, or a folder's own entry), else unknown; never read again (the bytes are in the rows)."""
    from ..read.fetch import Fetcher

    try:
        size, mtime, etag = Fetcher().head(store)
    except (SourceReadError, OSError):
        size, mtime, etag = -1, None, None
    return _Source(store, int(size), -1 if mtime is None else int(mtime), etag or "", form)
