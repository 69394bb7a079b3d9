"""Chunk-key column names and sentinels (no Lance import: scan workers load only this)."""

from __future__ import annotations

from typing import Final

__all__ = ["DEST_COLUMNS", "GLOBAL_KEY_COLUMNS", "MAX_DIMS", "NOT_PLACED", "NO_DIM", "NO_OFFSET", "SOURCE_KEY_COLUMNS"]

MAX_DIMS: Final = 8
"""Arrays with more dimensions are recorded as unsupported."""

NO_DIM: Final = -1
"""Sentinel in key columns for dimensions an array does not have (keys must be non-null:
Lance's merge_insert never matches NULL keys)."""

SOURCE_KEY_COLUMNS: Final = tuple(f"k{i}" for i in range(MAX_DIMS))
GLOBAL_KEY_COLUMNS: Final = tuple(f"g{i}" for i in range(MAX_DIMS))
DEST_COLUMNS: Final = tuple(f"d{i}" for i in range(MAX_DIMS))

NOT_PLACED: Final = -2
"""``g0`` of a chunk row (and ``d0`` of a var row) that is not in the global view."""

NO_OFFSET: Final = -1
"""``offset`` of a chunk whose bytes are inline in the row (and of rows that are not chunks)."""
