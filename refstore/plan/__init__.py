"""Pure planning: concatenation/placement, selection -> chunk keys, byte-range coalescing."""

from .coalesce import DEFAULT_MAX_BYTES, DEFAULT_MAX_GAP, Runs, coalesce
from .concat import Plan, SourceSlab, make_plan
from .select import Selection, chunk_slices, parse_window, select

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_GAP",
    "Plan",
    "Runs",
    "Selection",
    "SourceSlab",
    "chunk_slices",
    "coalesce",
    "make_plan",
    "parse_window",
    "select",
]
