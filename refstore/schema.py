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
                    (``k0..k7``), global key (``g0..g7``; ``g0 = NOT_PLACED`` when not in the
                    view) on the grid of its ``era``, byte range or inline bytes, and the
                    ``held`` blob column (a later cache of the bytes).
    ``remap``       one row per remap rule (prefix -> replacement).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

from ._keys import DEST_COLUMNS, GLOBAL_KEY_COLUMNS, MAX_DIMS, NO_DIM, NO_OFFSET, NOT_PLACED, SOURCE_KEY_COLUMNS

__all__ = [
    "CREATE_SCHEMA",
    "DATA_STORAGE_VERSION",
    "DEFAULTS",
    "DEST_COLUMNS",
    "FORMAT_VERSION",
    "GLOBAL_KEY_COLUMNS",
    "HELD_COLUMNS",
    "HELD_INLINE_MAX",
    "KEY_COLUMNS",
    "MAX_DIMS",
    "MERGE_KEY",
    "NOT_PLACED",
    "NO_DIM",
    "NO_OFFSET",
    "SCHEMA",
    "SOURCE_KEY_COLUMNS",
    "VALUE_COLUMNS",
    "Kind",
    "empty_table",
]

FORMAT_VERSION: Final = 2
"""Version of refstore's table layout (bumped on any incompatible schema change). 2: the held
bytes' checksum column is ``held_digest`` (``blake3:<hex>``); format 1 named it ``held_sha256``
(bare sha256 hex). A writer upgrades a format-1 collection first (``table/_upgrade.py``); its
older versions and tags keep format 1 and stay readable."""

DATA_STORAGE_VERSION: Final = "2.2"
"""Lance file format: 2.2 compresses reference columns ~15x better than 2.0."""


# No column ever holds NULL (except ``held``): Lance 2.2 stores a definition level per row
# (~2 bytes) for any column mixing NULLs and values, which would triple bytes per reference.
# Every column has a sentinel default instead (see ``DEFAULTS``).


class Kind:
    COLLECTION: Final = "collection"
    SOURCE: Final = "source"
    VAR: Final = "var"
    ARRAY: Final = "array"
    CHUNK: Final = "chunk"
    REMAP: Final = "remap"


KEY_COLUMNS: Final = ("kind", "array", "source", *SOURCE_KEY_COLUMNS)
MERGE_KEY: Final = list(KEY_COLUMNS)

# zstd: sorted integer runs ~0.3 B/row instead of ~2 (bit packing); strings and binaries that are
# empty on almost every row ~0.1 B/row instead of ~4 (their offsets are not compressed otherwise).
_ZSTD = {"lance-encoding:compression": "zstd"}


def _f(name: str, typ: pa.DataType, *, zstd: bool = False) -> pa.Field:
    return pa.field(name, typ, nullable=False, metadata=_ZSTD if zstd else None)


HELD_INLINE_MAX: Final = 4096
"""Held values up to this many bytes sit inline in the data file; larger ones go to Lance's
packed ``.blob`` sidecar files, which a write fills 3-8x faster than inline pages of 64 KiB
values (``design/scale.md``). Lance keeps the threshold in the dataset's schema, fixed at
creation: collections made before it keep Lance's default (64 KiB), and rows written to any
collection carry no threshold of their own (``SCHEMA``), so they follow the dataset's."""


def _blob_field(name: str, inline_max: int | None = None) -> pa.Field:
    from lance.blob import blob_field

    return blob_field(name) if inline_max is None else blob_field(name, inline_size_threshold=inline_max)


_fields: list[pa.Field] = [
    _f("kind", pa.string()),
    _f("array", pa.string()),
    _f("source", pa.string()),  # location exactly as scanned (local paths made absolute)
    *(_f(c, pa.int32(), zstd=True) for c in SOURCE_KEY_COLUMNS),  # chunk index within the source
    *(_f(c, pa.int32(), zstd=True) for c in GLOBAL_KEY_COLUMNS),  # chunk index in the global array (its era's grid)
    _f("era", pa.int32(), zstd=True),  # chunk/var rows: era of the global array (0 unless codecs etc. change)
    _f("offset", pa.int64(), zstd=True),  # bytes from the start of the source; NO_OFFSET if inline
    _f("length", pa.int64(), zstd=True),  # bytes (of the range, or of the inline value)
    _f("filter_mask", pa.int32()),  # HDF5: bit k set = filter k skipped for this chunk
    _f("inline", pa.large_binary(), zstd=True),  # chunk bytes stored in the row (compact datasets); b"" if not
    *(_f(c, pa.int64()) for c in DEST_COLUMNS),  # var rows: placement in elements; d0=NOT_PLACED
    _f("size", pa.int64()),  # source rows: bytes
    _f("mtime_ns", pa.int64()),  # source rows: modification time, ns since epoch
    _f("etag", pa.string(), zstd=True),
    _f("sort_value", pa.float64()),  # source rows: first coordinate along the concat dim (NaN: none)
    _f("status", pa.string(), zstd=True),  # var/array rows: "ok" | "unsupported"
    _f("meta", pa.string(), zstd=True),  # JSON: array metadata, source details, settings
    _f("held_at", pa.int32(), zstd=True),  # chunk rows: version that holds the bytes; -1 = not held
    _f("held_ns", pa.int64(), zstd=True),  # chunk rows: when the bytes were held, ns since epoch; -1
    _f("held_digest", pa.string(), zstd=True),  # chunk rows: "blake3:<hex>" of the held bytes; "" (see _held_digest)
    _blob_field("held"),  # chunk rows: bytes held in the collection (a cache); NULL = not held
]

DEFAULTS: Final[dict[str, object]] = {
    "array": "",
    "source": "",
    **{c: NO_DIM for c in SOURCE_KEY_COLUMNS},
    **{c: NO_DIM for c in GLOBAL_KEY_COLUMNS},
    "era": 0,
    "offset": NO_OFFSET,
    "length": 0,
    "filter_mask": 0,
    "inline": b"",
    **{c: 0 for c in DEST_COLUMNS},
    "size": -1,
    "mtime_ns": -1,
    "etag": "",
    "sort_value": float("nan"),
    "status": "",
    "meta": "",
    "held_at": -1,
    "held_ns": -1,
    "held_digest": "",
}

SCHEMA: Final = pa.schema(_fields, metadata={"refstore.format_version": str(FORMAT_VERSION)})

CREATE_SCHEMA: Final = pa.schema(
    [f if f.name != "held" else _blob_field("held", HELD_INLINE_MAX) for f in _fields], metadata=SCHEMA.metadata
)
"""``SCHEMA`` with the held column's inline threshold: the schema a collection is created with."""

HELD_COLUMNS: Final = ("held_at", "held_ns", "held_digest", "held")

VALUE_COLUMNS: Final = tuple(f.name for f in _fields if f.name not in KEY_COLUMNS and f.name not in HELD_COLUMNS)
"""Columns compared to decide whether an upserted row really changed (a scan never compares or
keeps held bytes: a changed reference drops them)."""


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()
