"""A commit that replaces a known set of rows: deletion vectors on the fragments holding them
plus new fragments with the replacement rows, as ONE Lance ``Update`` transaction.

A scan knows exactly which rows it replaces (the collection row, var and array rows, the rows
of changed sources and of moved arrays): the scalar indices find them in milliseconds and each
fragment holding some gets a deletion file. Lance's merge_insert instead joins on the key of
every row of the table (~3 s at 10M rows whatever the size of the change, ~40 s with its "not
matched by source" delete); see ``design/scale.md``.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._files import _local

if TYPE_CHECKING:
    from .collection import Snapshot

__all__ = ["SMALL_BATCH", "WRITE_BATCH_ROWS", "address_filter", "fragment_uri", "replace_rows", "replace_rows_at"]

SMALL_BATCH = 1 << 20
"""Bytes per batch below which the batches of rows to write are joined before Lance sees them."""

WRITE_BATCH_ROWS = 8192
"""Rows per batch those are joined into."""


def replace_rows(snap: Snapshot, new_rows: pa.Table, scope: str) -> Any:
    """The uncommitted transaction (on ``snap``'s version) that deletes every row matching the
    SQL filter ``scope`` and adds ``new_rows``. Deletion files and data files are written now;
    no version references them until the transaction is committed."""
    addrs = snap.ds.to_table(columns=[], filter=scope, with_row_address=True).column("_rowaddr").to_numpy()
    return _transaction(snap, new_rows, addrs, lambda _rows: scope)


def replace_rows_at(snap: Snapshot, new_rows: pa.Table | pa.RecordBatchReader,
                    addresses: np.ndarray[Any, Any]) -> Any:  # fmt: skip
    """As ``replace_rows`` for rows known by their row addresses (``_rowaddr``, from a query of
    ``snap``): no query to find them. Lance plans a filter that ORs an indexed selection with
    another (the collection row) as a scan of the whole table (~0.9 s at 10M rows).
    ``new_rows`` may be a stream of batches (at least one row), written as it is read."""
    return _transaction(snap, new_rows, np.asarray(addresses, np.uint64), address_filter)


_URL_SAFE_PATH = re.compile(r"[A-Za-z0-9._/+@=,~ -]+")
"""Local paths that read the same as the path of a URL (no '#', '?', '%' and the like)."""


def fragment_uri(uri: str) -> str:
    """Where a write's new fragments go: for a local collection, through object_store's local file
    system (``file-object-store://``), which writes each file in a few large writes to a temporary
    name and renames it when complete. Lance's own local writer hands every value of the packed
    blob column to a blocking thread for a ``write`` of its own: a 1 GiB hold of 64 KiB chunks
    spent 1.3-3.4 s in it against 0.4-0.6 s this way (``design/scale.md``). Only data files are
    written so; the version is committed through ``uri``, by Lance's put-if-not-exists commit.
    A path a URL would read differently is written to as it is."""
    if not _local(uri):
        return uri
    path = os.path.abspath(uri.removeprefix("file://"))
    if not _URL_SAFE_PATH.fullmatch(path):
        return uri
    return "file-object-store://" + path


def address_filter(addresses: np.ndarray[Any, Any]) -> str:
    """A filter matching exactly ``addresses`` (one fragment's): runs of consecutive addresses
    as ranges, the rest as one IN list."""
    a = np.unique(np.asarray(addresses, np.uint64))
    if not len(a):
        return "false"
    cuts = np.flatnonzero(np.diff(a) != 1) + 1
    runs = np.split(a, cuts)
    parts: list[str] = []
    singles: list[int] = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"(_rowaddr BETWEEN {int(run[0])} AND {int(run[-1])})")
        else:
            singles.extend(int(x) for x in run)
    if singles:
        parts.append("_rowaddr IN (" + ", ".join(map(str, singles)) + ")")
    return " OR ".join(parts)


def _parts(new_rows: pa.Table | pa.RecordBatchReader) -> list[pa.Table | pa.RecordBatchReader]:
    """The rows to write as separate fragments: a table of metadata rows (collection, source,
    var, array) followed by chunk rows is cut in two (zero-copy slices). Lance encodes a string
    column whose page holds a few long values among thousands of empty ones at ~25 bytes per
    value: a new day's 22,951 chunk rows written with its 6 metadata rows took 721 kB, 575 kB of
    it the ``meta`` column; in two fragments, 151 kB (``design/scale.md``)."""
    if not isinstance(new_rows, pa.Table):
        return [new_rows]
    if not new_rows.num_rows:
        return []
    chunk = pc.equal(new_rows.column("kind"), "chunk").to_numpy(zero_copy_only=False)
    first = int(np.argmax(chunk)) if chunk.any() else new_rows.num_rows
    if 0 < first < new_rows.num_rows and chunk[first:].all():
        return [new_rows.slice(0, first), new_rows.slice(first)]
    return [new_rows]


def _transaction(snap: Snapshot, new_rows: pa.Table | pa.RecordBatchReader, addrs: np.ndarray[Any, Any],
                 deleting: Any) -> Any:  # fmt: skip
    """Deletion files for the rows at ``addrs`` (``deleting(fragment's addresses)``: the filter
    given to ``LanceFragment.delete``) and new fragments for ``new_rows``, as one ``Update``."""
    from lance import LanceOperation
    from lance.dataset import Transaction
    from lance.fragment import write_fragments

    from ..schema import DATA_STORAGE_VERSION

    col = snap.collection
    updated, removed = [], []
    frag_ids = addrs >> np.uint64(32)
    for fid in np.unique(frag_ids).tolist():
        frag = snap.ds.get_fragment(int(fid))
        if frag is None:  # pragma: no cover - the address came from this version
            raise ValueError(f"fragment {fid} of version {snap.version} is missing")
        meta = frag.delete(deleting(addrs[frag_ids == fid]))
        if meta is None:
            removed.append(int(fid))
        else:
            updated.append(meta)
    new: list[Any] = []
    for part in _parts(new_rows):
        if isinstance(part, pa.Table):
            # a scan's rows come as one small batch per source: Lance's writer memory grew with
            # the number of batches (+0.7 GB at 3,000 sources, 11 GB at 16,387) and its
            # encodings are poor on tiny batches (the 16,387 OISST sources' rows: 116 MB in
            # batches of 17 rows) and on one huge one (58 MB), not on batches of thousands of
            # rows (18 MB). Batches of held bytes are big and are not copied; a batch longer than
            # WRITE_BATCH_ROWS (a scan batch's chunk rows joined in one, ``upsert._with_source``)
            # is sliced, without a copy.
            chunks = max(1, *(c.num_chunks for c in part.columns))
            if chunks > 1 and part.nbytes // chunks < SMALL_BATCH:
                part = part.combine_chunks()
            part = pa.Table.from_batches(part.to_batches(max_chunksize=WRITE_BATCH_ROWS), schema=part.schema)
        new += write_fragments(
            part, fragment_uri(col.uri), mode="append", data_storage_version=DATA_STORAGE_VERSION,
            storage_options=col.storage_options,
        )  # fmt: skip
    op = LanceOperation.Update(removed_fragment_ids=removed, updated_fragments=updated, new_fragments=new)
    return Transaction(read_version=snap.version, operation=op)
