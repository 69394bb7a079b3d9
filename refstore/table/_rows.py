"""Building full-schema rows of one kind, columnar."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..schema import NO_DIM, SCHEMA, SOURCE_KEY_COLUMNS

__all__ = ["rows"]


def rows(kind: str, n: int, **columns: Any) -> pa.Table:
    """``n`` rows of ``kind``; columns not given are defaults (``""`` for names, ``NO_DIM`` for
    key columns, NULL elsewhere)."""
    out: list[pa.Array | pa.ChunkedArray] = []
    for f in SCHEMA:
        if f.name == "kind":
            out.append(pa.array([kind] * n, pa.string()))
            continue
        value = columns.pop(f.name, None)
        if value is None:
            if f.name in ("array", "source"):
                out.append(pa.array([""] * n, pa.string()))
            elif f.name in SOURCE_KEY_COLUMNS:
                out.append(pa.array([NO_DIM] * n, pa.int32()))
            elif isinstance(f.type, pa.ExtensionType):
                out.append(pa.ExtensionArray.from_storage(f.type, pa.nulls(n, f.type.storage_type)))
            else:
                out.append(pa.nulls(n, f.type))
            continue
        if isinstance(value, (pa.Array, pa.ChunkedArray)):
            arr = value if value.type == f.type else value.cast(f.type)
        else:
            arr = pa.array(value, f.type)
        if len(arr) != n:
            raise ValueError(f"column {f.name}: {len(arr)} values for {n} rows")
        out.append(arr)
    if columns:
        raise ValueError(f"unknown columns: {sorted(columns)}")
    return pa.Table.from_arrays(out, schema=SCHEMA)
