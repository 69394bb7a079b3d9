"""What an existing reference store holds, as refstore will record it: arrays, group
attributes and the chunk references as columns (never a dict per chunk past the parser)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .._keys import GLOBAL_KEY_COLUMNS, MAX_DIMS, NO_DIM
from .._quote import quoted
from ..errors import BadInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..scan._types import ArrayMeta

__all__ = ["REFS_SCHEMA", "WHOLE_OBJECT", "ParsedStore", "RefColumns", "check_grid"]

WHOLE_OBJECT = -1
"""``length`` of a reference to a whole object (kerchunk's ``[url]``): its size once identified."""

REFS_SCHEMA = pa.schema(
    [
        pa.field("array", pa.string(), nullable=False),
        *(pa.field(c, pa.int32(), nullable=False) for c in GLOBAL_KEY_COLUMNS),
        pa.field("path", pa.string()),  # null: inline chunk
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("length", pa.int64(), nullable=False),  # WHOLE_OBJECT: the object's size
        pa.field("inline", pa.large_binary(), nullable=False),
    ]
)
"""Chunk references of a store: key in the array's chunk grid (``g0..``, ``NO_DIM`` past the
array's dimensions), location as the store spells it (null for inline chunks), byte range."""


@dataclass(frozen=True, slots=True)
class ParsedStore:
    """A reference store read: ``form`` (``kerchunk-json``, ``kerchunk-parquet``, ``icechunk``),
    where it is, its arrays, group attributes (typed JSON, ``""`` = root) and ``refs``
    (``REFS_SCHEMA``). ``native``: arrays holding chunks the store keeps itself (Icechunk)."""

    form: str
    location: str
    arrays: dict[str, ArrayMeta]
    groups: dict[str, dict[str, dict[str, Any]]]
    refs: pa.Table
    detail: dict[str, Any]
    modified_before: dict[str, int] = field(default_factory=dict)
    """Location (as the store spells it) -> seconds since the epoch: the store read that file as
    it was no later than this (Icechunk's ``checksum_last_modified``); a file modified since is
    refused, as Icechunk itself would refuse to read it."""
    etags: dict[str, str] = field(default_factory=dict)
    """Location (as the store spells it) -> the etag the store recorded for it (Icechunk's
    ``checksum_etag``); a file whose etag is now another is refused, as Icechunk itself refuses
    to read it ("the checksum of the object owning the virtual chunk has changed")."""


class RefColumns:
    """Accumulates references column by column (one Python tuple per JSON entry at most)."""

    def __init__(self) -> None:
        self.array: list[str] = []
        self.keys: list[list[int]] = [[] for _ in range(MAX_DIMS)]
        self.path: list[str | None] = []
        self.offset: list[int] = []
        self.length: list[int] = []
        self.inline: list[bytes] = []

    def add(self, array: str, key: Sequence[int], path: str | None, offset: int, length: int, inline: bytes) -> None:
        self.array.append(array)
        for i in range(MAX_DIMS):
            self.keys[i].append(int(key[i]) if i < len(key) else NO_DIM)
        self.path.append(path)
        self.offset.append(offset)
        self.length.append(length)
        self.inline.append(inline)

    def table(self) -> pa.Table:
        return pa.table(
            {
                "array": pa.array(self.array, pa.string()),
                **{
                    c: pa.array(np.asarray(self.keys[i], np.int64), pa.int32())
                    for i, c in enumerate(GLOBAL_KEY_COLUMNS)
                },
                "path": pa.array(self.path, pa.string()),
                "offset": pa.array(self.offset, pa.int64()),
                "length": pa.array(self.length, pa.int64()),
                "inline": pa.array(self.inline, pa.large_binary()),
            },
            schema=REFS_SCHEMA,
        )


def check_grid(location: str, refs: pa.Table, arrays: dict[str, ArrayMeta], keys: Sequence[str] | None = None) -> None:
    """Refuse (``BadInputError`` naming the store, the array and the key) a reference whose key
    lies outside its array's chunk grid, that names no array, or a chunk two references name
    (``a/0.0`` and ``a/00.0``: zarr reads one of them; which bytes a read got would be chance).
    ``keys``: the store's spelling of each row's key, to name both."""
    if refs.num_rows == 0:
        return
    codes = refs.column("array").combine_chunks().dictionary_encode()
    which = codes.indices.to_numpy()
    for i, name in enumerate(codes.dictionary.to_pylist()):
        meta = arrays.get(name)
        if meta is None:
            raise BadInputError(f"{location}: chunk references for {quoted(name)}, which is not an array of the store")
        rows = np.flatnonzero(which == i)
        grid = [-(-s // c) if c else 0 for s, c in zip(meta.shape, meta.chunks, strict=True)] or []
        bad = np.zeros(len(rows), bool)
        for d, c in enumerate(GLOBAL_KEY_COLUMNS):
            k = refs.column(c).to_numpy()[rows]
            bad |= (k < 0) | (k >= grid[d]) if d < len(grid) else (k != NO_DIM)
        if bad.any():
            j = int(rows[int(np.flatnonzero(bad)[0])])
            key = [int(refs.column(c)[j].as_py()) for c in GLOBAL_KEY_COLUMNS[: meta.ndim]]
            raise BadInputError(
                f"{location}: chunk {'.'.join(map(str, key)) or '0'} of {quoted(name)} is outside its chunk grid "
                f"{tuple(grid)} (shape {tuple(meta.shape)}, chunks {tuple(meta.chunks)})"
            )
        cols = [refs.column(c).to_numpy()[rows] for c in GLOBAL_KEY_COLUMNS[: meta.ndim]]
        if len(rows) > 1:
            order = np.lexsort(cols[::-1]) if cols else np.arange(len(rows))
            same = np.ones(len(rows) - 1, bool)
            for k in cols:
                same &= k[order][1:] == k[order][:-1]
            if same.any():
                m = int(np.flatnonzero(same)[0])
                a, b = int(rows[order[m]]), int(rows[order[m + 1]])
                chunk = ".".join(str(int(k[order][m])) for k in cols) or "0"
                named = f" ({keys[a]!r} and {keys[b]!r})" if keys is not None else ""
                raise BadInputError(f"{location}: two references name chunk {chunk} of {quoted(name)}{named}; "
                                    "a chunk has one reference")  # fmt: skip
