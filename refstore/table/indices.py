"""Lance scalar indices of the collection, built and refreshed by ``compact`` (each index build
is a Lance version of its own, so ``scan`` never builds them: one operation, one version).

At 10M rows the filters every operation runs (``kind = 'var'``, ``source IN (...)``, a box on
``array`` and ``g0..``) scan whole columns without them (0.4-1 s each) and take milliseconds
with them (``design/scale.md``). Rows written after the last build are unindexed but still
found (Lance scans them), so a collection stays correct whether or not ``compact`` ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ..errors import StorageError

if TYPE_CHECKING:
    from .collection import Collection

__all__ = ["INDICES", "build_indices"]

INDICES: tuple[tuple[str, Literal["BITMAP", "ZONEMAP"]], ...] = (
    ("kind", "BITMAP"),  # a handful of values: every metadata read filters on it
    ("source", "BITMAP"),  # rows of changed sources (rescans), stale checks, hold
    ("array", "BITMAP"),  # the first term of every view filter
    ("g0", "ZONEMAP"),  # rows are clustered by source, hence along the concat dimension
)
"""(column, Lance index type): the indices a collection gets."""


def build_indices(col: Collection) -> dict[str, Any]:
    """Create the missing indices and bring existing ones up to date with new fragments."""
    ds = col._dataset()
    have = {tuple(i.field_names) for i in ds.describe_indices()}
    built: list[str] = []
    try:
        for column, kind in INDICES:
            if (column,) not in have:
                ds.create_scalar_index(column, kind, name=f"{column}_idx")
                ds = col._dataset()
                built.append(column)
        if len(built) < len(INDICES):
            ds.optimize.optimize_indices()
    except (OSError, ValueError, RuntimeError) as e:
        raise StorageError(f"{col.uri}: building scalar indices failed: {str(e).splitlines()[0]}") from None
    return {"indices": [c for c, _ in INDICES], "built": built}
