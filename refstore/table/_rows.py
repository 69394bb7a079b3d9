"""Building full-schema rows of one kind, columnar."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import DEFAULTS, SCHEMA

__all__ = ["rows", "values_equal"]


def rows(kind: str, n: int, **columns: Any) -> pa.Table:
    """``n`` rows of ``kind``; columns not given take their sentinel default (``DEFAULTS``)."""
    out: list[pa.Array | pa.ChunkedArray] = []
    for f in SCHEMA:
        if f.name == "kind":
            out.append(pa.array([kind] * n, pa.string()))
            continue
        value = columns.pop(f.name, None)
        if value is None:
            if isinstance(f.type, pa.ExtensionType):
                out.append(pa.ExtensionArray.from_storage(f.type, pa.nulls(n, f.type.storage_type)))
            elif pa.types.is_integer(f.type) or pa.types.is_floating(f.type):
                out.append(pa.array(np.full(n, DEFAULTS[f.name], dtype=f.type.to_pandas_dtype()), f.type))
            else:
                out.append(pa.repeat(pa.scalar(DEFAULTS[f.name], f.type), n) if n else pa.array([], f.type))
            continue
        if isinstance(value, (pa.Array, pa.ChunkedArray)):
            arr = value if value.type == f.type else value.cast(f.type)
        else:
            arr = pa.array(value, f.type)
        if len(arr) != n:
            raise ValueError(f"column {f.name}: {len(arr)} values for {n} rows")
        if arr.null_count and not isinstance(f.type, pa.ExtensionType):
            arr = pc.fill_null(arr, pa.scalar(DEFAULTS[f.name], f.type))
        out.append(arr)
    if columns:
        raise ValueError(f"unknown columns: {sorted(columns)}")
    return pa.Table.from_arrays(out, schema=SCHEMA)


def values_equal(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, Any]:
    """Element-wise equality as a bool array, NULL equal to NULL."""
    a_null = pc.is_null(a).to_numpy(zero_copy_only=False)
    b_null = pc.is_null(b).to_numpy(zero_copy_only=False)
    eq = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
    return np.asarray((a_null & b_null) | (~a_null & ~b_null & eq), bool)
