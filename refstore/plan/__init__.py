"""Pure planning: concatenation/placement, chunk grids (regular or rectilinear), era windows,
selection -> chunk keys, byte-range coalescing."""

from .coalesce import DEFAULT_MAX_BYTES, DEFAULT_MAX_GAP, Runs, coalesce
from .concat import Plan, SourceSlab, make_plan
from .eras import EraLayout, Part
from .grid import Grid
from .placement import complete_grid
from .select import Selection, chunk_slices, parse_window, select

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_GAP",
    "EraLayout",
    "Grid",
    "Part",
    "Plan",
    "Runs",
    "Selection",
    "SourceSlab",
    "chunk_slices",
    "coalesce",
    "complete_grid",
    "make_plan",
    "parse_window",
    "select",
]
