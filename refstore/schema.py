"""The only place the collection table's columns, types and format version are spelled.

A collection is ONE Lance dataset. Every row has a ``kind``; see ``design/schema.md``.

kinds
    ``collection``  one row: format version and collection settings (concat dim); every commit
                    rewrites it, so two racing writers always conflict on it (Lance then makes
                    the loser retry on the winner's version).
    ``source``      one row per source: location (verbatim), size, mtime, etag, sort value.
    ``var``         one row per (source, array): the array as found in that source (metadata
                    JSON) and its placement in the global array (``d0..d7``, in elements).
    ``array``       one row per global array: metadata JSON of the concatenated array.
    ``chunk``       one row per stored chunk of a (source, array): key within the source
                    (``k0..k7``), global key (``g0..g7``, NULL when not in the view), byte range
                    or inline bytes, and the ``held`` blob column (a later cache of the bytes).
    ``remap``       one row per remap rule (prefix -> replacement).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
from lance.blob import blob_field

__all__ = [
    "CHUNK_VALUE_COLUMNS",
    "DATA_STORAGE_VERSION",
    "DEST_COLUMNS",
    "FORMAT_VERSION",
    "GLOBAL_KEY_COLUMNS",
    "KEY_COLUMNS",
    "MAX_DIMS",
    "MERGE_KEY",
    "NO_DIM",
    "SCHEMA",
    "SOURCE_KEY_COLUMNS",
    "VALUE_COLUMNS",
    "Kind",
    "empty_table",
]

FORMAT_VERSION: Final = 1
"""Version of refstore's table layout (bumped on any incompatible schema change)."""

DATA_STORAGE_VERSION: Final = "2.2"
"""Lance file format: 2.2 compresses reference columns ~15x better than 2.0."""

MAX_DIMS: Final = 8
"""Arrays with more dimensions are recorded as unsupported."""

NO_DIM: Final = -1
"""Sentinel in key columns for dimensions an array does not have (keys must be non-null:
Lance's merge_insert never matches NULL keys)."""

SOURCE_KEY_COLUMNS: Final = tuple(f"k{i}" for i in range(MAX_DIMS))
GLOBAL_KEY_COLUMNS: Final = tuple(f"g{i}" for i in range(MAX_DIMS))
DEST_COLUMNS: Final = tuple(f"d{i}" for i in range(MAX_DIMS))


class Kind:
    COLLECTION: Final = "collection"
    SOURCE: Final = "source"
    VAR: Final = "var"
    ARRAY: Final = "array"
    CHUNK: Final = "chunk"
    REMAP: Final = "remap"


KEY_COLUMNS: Final = ("kind", "array", "source", *SOURCE_KEY_COLUMNS)
MERGE_KEY: Final = list(KEY_COLUMNS)

_fields: list[pa.Field] = [
    pa.field("kind", pa.string(), nullable=False),
    pa.field("array", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    *(pa.field(c, pa.int32(), nullable=False) for c in SOURCE_KEY_COLUMNS),
    *(pa.field(c, pa.int32()) for c in GLOBAL_KEY_COLUMNS),
    pa.field("offset", pa.int64()),  # bytes from the start of the source
    pa.field("length", pa.int64()),  # bytes
    pa.field("filter_mask", pa.int32()),  # HDF5: bit k set = filter k skipped for this chunk
    pa.field("inline", pa.large_binary()),  # chunk bytes stored in the row (compact datasets)
    *(pa.field(c, pa.int64()) for c in DEST_COLUMNS),  # var rows: placement, in elements
    pa.field("size", pa.int64()),  # source rows: bytes
    pa.field("mtime_ns", pa.int64()),  # source rows: modification time, ns since epoch
    pa.field("etag", pa.string()),
    pa.field("sort_value", pa.float64()),  # source rows: first coordinate along the concat dim
    pa.field("status", pa.string()),  # var/array rows: "ok" | "unsupported"
    pa.field("meta", pa.string()),  # JSON: array metadata, source details, settings
    blob_field("held"),  # chunk rows: bytes held in the collection (a cache); NULL = not held
]

SCHEMA: Final = pa.schema(_fields, metadata={"refstore.format_version": str(FORMAT_VERSION)})

VALUE_COLUMNS: Final = tuple(f.name for f in _fields if f.name not in KEY_COLUMNS and f.name != "held")
"""Columns compared to decide whether an upserted row really changed."""

CHUNK_VALUE_COLUMNS: Final = (*GLOBAL_KEY_COLUMNS, "offset", "length", "filter_mask", "inline")


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()
