"""The mosaic plan: GeoTIFF tiles placed on their common pixel grid by their affine transforms. Pure.

Two layers:

- **Grids** (``Footprint`` -> ``LevelGrid``): tiles of one level (``image``, ``overview_1``...)
  with their GDAL transforms (``x0, dx, rx, y0, ry, dy``) and sizes in pixels. They share a
  grid when the pixel matrix ``(dx, rx, ry, dy)`` is the same (relative ``PIXEL_RTOL``) and every
  origin sits on whole pixels of the first tile's grid (within ``tolerance`` pixels, default
  ``TOLERANCE``). The mosaic's origin is the top-left-most tile corner; each tile gets its
  element offset ``(row, col)``; ``overlaps`` and ``gaps`` are exact on that integer grid.
- **The plan** (``make_mosaic_plan``): the tiles as ``SourceSlab`` values (``ArrayMeta`` per
  IFD, as ``scan/tiff.py`` records them) -> the ``Plan`` the scan commit uses (placements
  ``(row, col)`` or ``(date, row, col)``, the global arrays with the mosaic's shape and
  transform). Refused, one line naming the files: a tile without georeferencing, different
  CRS, different pixel size, an origin off the grid, overlapping tiles (both named), tiles whose
  ``image`` differs in dtype, blocks, codecs, bands or nodata. ``--prefer`` rules decide an
  overlap only when the losing tile lies wholly inside the winner (a re-delivered or reprocessed
  tile): the loser is set aside, nothing is lost; a partial overlap is always refused (cutting a
  tile short needs placements inside a source). Other levels (overviews, masks) are mosaicked
  where every tile has them on one grid, else left out with the reason (``MosaicPlan.dropped``).

With a concat dimension (``--mosaic --concat-dim time``) the tiles are grouped by their date
(``sort_value``), one mosaic per date on one grid shared by all dates, stacked along the
dimension; overlaps are judged within a date.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import PlanError
from .concat import Plan
from .series_order import SetAside
from .slabs import key_cell

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..scan._types import ArrayMeta
    from .concat import SourceSlab
    from .series_order import PreferRule

__all__ = [
    "PIXEL_RTOL",
    "TOLERANCE",
    "Footprint",
    "LevelGrid",
    "MosaicPlan",
    "common_grid",
    "gaps",
    "make_mosaic_plan",
    "overlaps",
]

TOLERANCE = 1e-6
"""Pixels: how far a tile's origin may sit from a whole pixel of the common grid."""
PIXEL_RTOL = 1e-9
"""Relative difference below which two pixel sizes (and rotation terms) are the same."""

Transform = tuple[float, float, float, float, float, float]
Box = tuple[int, int, int, int]
"""``(row0, row1, col0, col1)``: a half-open pixel box of the mosaic."""


@dataclass(frozen=True, slots=True)
class Footprint:
    """One tile of one level: GDAL transform of its pixel (0, 0) corner, size in pixels."""

    location: str
    transform: Transform
    rows: int
    cols: int


@dataclass(frozen=True, slots=True)
class LevelGrid:
    """The common grid of one level. ``transform``: the mosaic's (GDAL order, pixel (0, 0) corner);
    ``shape``: ``(rows, cols)`` of the mosaic; ``offsets[location]``: the tile's ``(row, col)``."""

    transform: Transform
    shape: tuple[int, int]
    offsets: Mapping[str, tuple[int, int]] = field(default_factory=dict)


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= PIXEL_RTOL * scale


def common_grid(footprints: Sequence[Footprint], *, level: str = "image", tolerance: float = TOLERANCE) -> LevelGrid:
    """The grid every footprint sits on, or PlanError naming two files that disagree."""
    if not footprints:
        raise PlanError(f"a mosaic of '{level}' needs at least one tile")
    ref = footprints[0]
    x0, dx, rx, y0, ry, dy = ref.transform
    scale = max(abs(dx), abs(rx), abs(ry), abs(dy))
    det = dx * dy - rx * ry
    if scale == 0 or not math.isfinite(det) or abs(det) <= PIXEL_RTOL * scale * scale:
        raise PlanError(f"{ref.location}: '{level}' has a degenerate transform {list(ref.transform)}")
    rows: list[int] = []
    cols: list[int] = []
    for fp in footprints:
        tx0, tdx, trx, ty0, try_, tdy = fp.transform
        if not all(_close(a, b, scale) for a, b in ((tdx, dx), (trx, rx), (try_, ry), (tdy, dy))):
            raise PlanError(
                f"{fp.location} and {ref.location} have different pixel sizes for '{level}' "
                f"({_pixel(fp.transform)} and {_pixel(ref.transform)}); a mosaic needs one pixel grid"
            )
        # solve [dx rx; ry dy] @ (col, row) = (tx0 - x0, ty0 - y0)
        ex, ey = tx0 - x0, ty0 - y0
        col = (dy * ex - rx * ey) / det
        row = (dx * ey - ry * ex) / det
        rc, cc = round(row), round(col)
        if not (abs(row - rc) <= tolerance and abs(col - cc) <= tolerance):
            raise PlanError(
                f"{fp.location}: the origin of '{level}' is off the pixel grid of {ref.location} by "
                f"({row - rc:+.4g}, {col - cc:+.4g}) pixels (row, col); a mosaic needs tiles on one grid"
            )
        rows.append(int(rc))
        cols.append(int(cc))
    r0, c0 = min(rows), min(cols)
    r1 = max(r + fp.rows for r, fp in zip(rows, footprints, strict=True))
    c1 = max(c + fp.cols for c, fp in zip(cols, footprints, strict=True))
    transform: Transform = (x0 + c0 * dx + r0 * rx, dx, rx, y0 + c0 * ry + r0 * dy, ry, dy)
    offsets = {fp.location: (r - r0, c - c0) for fp, r, c in zip(footprints, rows, cols, strict=True)}
    return LevelGrid(transform, (r1 - r0, c1 - c0), offsets)


def _pixel(t: Transform) -> str:
    return f"{t[1]:g} x {t[5]:g}" if t[2] == 0 and t[4] == 0 else f"[{t[1]:g}, {t[2]:g}, {t[4]:g}, {t[5]:g}]"


def _boxes(grid: LevelGrid, footprints: Sequence[Footprint]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``(n, 4)`` int64: each footprint's ``(row0, row1, col0, col1)`` on the grid."""
    out = np.empty((len(footprints), 4), np.int64)
    for i, fp in enumerate(footprints):
        r, c = grid.offsets[fp.location]
        out[i] = (r, r + fp.rows, c, c + fp.cols)
    return out


def overlaps(grid: LevelGrid, footprints: Sequence[Footprint]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j`` (indices into ``footprints``), of tiles sharing a pixel.
    A sweep along rows: each tile is compared with the tiles starting before it ends."""
    if len(footprints) < 2:
        return []
    b = _boxes(grid, footprints)
    order = np.argsort(b[:, 0], kind="stable")
    s = b[order]
    out: list[tuple[int, int]] = []
    for k in range(len(s)):
        stop = int(np.searchsorted(s[:, 0], s[k, 1], side="left"))
        if stop <= k + 1:
            continue
        cand = s[k + 1 : stop]  # every one starts before s[k] ends (stop: searchsorted's left bound)
        hit = (cand[:, 2] < s[k, 3]) & (s[k, 2] < cand[:, 3])
        for m in np.flatnonzero(hit):
            i, j = int(order[k]), int(order[k + 1 + m])
            out.append((min(i, j), max(i, j)))
    return sorted(out)


def gaps(grid: LevelGrid, footprints: Sequence[Footprint]) -> tuple[Box, ...]:
    """Disjoint boxes covering exactly the pixels of the mosaic no tile holds, row bands top to
    bottom, each band's boxes left to right (adjacent cells of a band merged)."""
    b = _boxes(grid, footprints)
    h, w = grid.shape
    re = np.unique(np.concatenate([[0, h], b[:, 0], b[:, 1]]))
    ce = np.unique(np.concatenate([[0, w], b[:, 2], b[:, 3]]))
    cover = np.zeros((len(re), len(ce)), np.int64)
    ri0, ri1 = np.searchsorted(re, b[:, 0]), np.searchsorted(re, b[:, 1])
    ci0, ci1 = np.searchsorted(ce, b[:, 2]), np.searchsorted(ce, b[:, 3])
    np.add.at(cover, (ri0, ci0), 1)
    np.add.at(cover, (ri1, ci0), -1)
    np.add.at(cover, (ri0, ci1), -1)
    np.add.at(cover, (ri1, ci1), 1)
    cover = cover.cumsum(0).cumsum(1)[:-1, :-1]
    out: list[Box] = []
    for i in range(cover.shape[0]):
        empty = np.flatnonzero(cover[i] == 0)
        if empty.size == 0:
            continue
        breaks = np.flatnonzero(np.diff(empty) > 1)
        starts = np.concatenate([[empty[0]], empty[breaks + 1]])
        stops = np.concatenate([empty[breaks], [empty[-1]]]) + 1
        for a, z in zip(starts.tolist(), stops.tolist(), strict=True):
            out.append((int(re[i]), int(re[i + 1]), int(ce[a]), int(ce[z])))
    return tuple(out)


# --------------------------------------------------------------------------- the plan
@dataclass(frozen=True, slots=True)
class MosaicPlan:
    """``plan``: what the scan commit applies. ``crs``: the tiles' CRS (``EPSG:n`` or a citation;
    None when they carry none). ``grids[array]``: each placed level's grid (offsets of every
    placed tile). ``dropped``: ``(array, reason)`` for levels left out. ``gaps``: boxes of the
    ``image`` grid no tile holds (for every date). ``dates``: the ``sort_value`` of each step
    along the concat dimension (empty without one)."""

    plan: Plan
    crs: str | None
    grids: dict[str, LevelGrid]
    dropped: tuple[tuple[str, str], ...] = ()
    gaps: tuple[tuple[int, tuple[Box, ...]], ...] = ()
    """``(date index, gap boxes)`` for each date with gaps (index 0 without a concat dim)."""
    dates: tuple[float, ...] = ()

    def summary(self) -> dict[str, Any]:
        """What the scan report shows of the mosaic (JSON-ready)."""
        image = self.grids.get("image")
        return {
            "tiles": sum(1 for loc in self.plan.order if image is None or loc in image.offsets),
            "shape": list(image.shape) if image else [],
            "transform": list(image.transform) if image else [],
            "crs": self.crs,
            "dates": len(self.dates),
            "gap_pixels": sum((b[1] - b[0]) * (b[3] - b[2]) for _, boxes in self.gaps for b in boxes),
            "dropped": [{"array": a, "reason": r} for a, r in self.dropped],
        }


def _attr(meta: ArrayMeta, key: str) -> Any:
    enc = meta.attrs.get(key)
    return None if enc is None else enc.get("value")


def _crs(meta: ArrayMeta) -> str | None:
    """The CRS's identity: ``EPSG:n``, else its GeoKeys (``scan/tiff.py``), else its citation."""
    crs = _attr(meta, "crs")
    if crs is not None:
        return str(crs)
    keys = _attr(meta, "crs_geokeys")
    cit = _attr(meta, "crs_citation")
    if keys is not None:
        return f"{cit or 'user-defined'} [{keys}]"
    return None if cit is None else f"citation:{cit}"


def _yx(meta: ArrayMeta) -> tuple[int, int] | None:
    """Axes of the rows and columns of a TIFF array (dims ``y``/``y_overview_1``..., ``x``...)."""
    ys = [i for i, d in enumerate(meta.dims) if d == "y" or d.startswith("y_")]
    xs = [i for i, d in enumerate(meta.dims) if d == "x" or d.startswith("x_")]
    return (ys[0], xs[0]) if len(ys) == 1 and len(xs) == 1 else None


def _footprint(loc: str, meta: ArrayMeta) -> Footprint | None:
    t = _attr(meta, "transform")
    yx = _yx(meta)
    if t is None or yx is None or len(t) != 6:
        return None
    return Footprint(loc, (float(t[0]), float(t[1]), float(t[2]), float(t[3]), float(t[4]), float(t[5])),
                     meta.shape[yx[0]], meta.shape[yx[1]])  # fmt: skip


def _structure(meta: ArrayMeta, yx: tuple[int, int]) -> tuple[Any, ...]:
    """What must agree between tiles of one level (sizes along y and x may differ; the layout,
    ``_layout``, may too)."""
    other = tuple(n for i, n in enumerate(meta.shape) if i not in yx)
    return (meta.dtype, meta.dims, other, json.dumps(meta.fill_value))


def _layout(meta: ArrayMeta) -> tuple[Any, ...]:
    """How a tile stores its chunks: block shape, codecs, short last strip. Tiles of one level
    that differ here keep their own (``ArrayMeta.cell``, ``plan/slabs.py``)."""
    return (meta.chunks, json.dumps(meta.codecs, sort_keys=True), meta.short_edge)


def _differs(a: ArrayMeta, b: ArrayMeta, yx: tuple[int, int]) -> str:
    sa, sb = _structure(a, yx), _structure(b, yx)
    what = ("dtype", "dimensions", "bands", "nodata")
    return next(w for w, x, y in zip(what, sa, sb, strict=True) if x != y)


def _mixed(holders: Sequence[ArrayMeta]) -> tuple[int, ...]:
    """The coarse key cell (``plan/slabs.key_cell``) when the tiles of a level differ in layout,
    else ``()``."""
    first = _layout(holders[0])
    if all(_layout(m) == first for m in holders[1:]):
        return ()
    return key_cell([m.chunks for m in holders])


MAX_AXIS_CHUNKS = 1 << 22
"""Chunks along one axis of a mosaic's grid (of the first tile's block size) above which it is
refused: rectilinear grids, the zarr grid and reports list the chunks of an axis."""
MAX_SPREAD = 10_000
"""How many chunks of its grid a mosaic may have per chunk its tiles hold (above
``SPREAD_FLOOR``) before it is refused as spread out absurdly (a tile moved 2^31 pixels)."""
SPREAD_FLOOR = 1 << 20
"""Grids of up to this many chunks are never refused as spread out (they are cheap anyway)."""
MAX_KEY = (1 << 31) - 1
"""Chunk keys are int32."""


def extent_problem(level: str, grid: LevelGrid,
                   tiles: Sequence[tuple[str, tuple[int, int], tuple[int, int]]]) -> str | None:  # fmt: skip
    """Why a level's grid is absurd relative to its tiles, or None. ``tiles``: ``(location,
    (rows, cols), (block rows, block cols))``; the first tile's blocks count the grid's chunks,
    the greatest common divisor of every tile's (the key cell of tiles of different layouts)
    must keep chunk keys in int32. Arithmetic on extents only: no per-pixel or per-chunk
    structure is built (``design/mosaic.md``, "Extent")."""
    c0 = [max(1, int(c)) for c in tiles[0][2]]
    cell = key_cell([[max(1, int(c)) for c in t[2]] for t in tiles])
    axis = [-(-n // c) for n, c in zip(grid.shape, c0, strict=True)]
    far = _far_tile(grid, tiles)
    for d, what in enumerate(("rows", "columns")):
        if axis[d] > MAX_AXIS_CHUNKS or grid.shape[d] // cell[d] > MAX_KEY:
            return (f"{far}: '{level}' would make the mosaic {grid.shape[d]} {what} long ({axis[d]} chunks of "
                    f"{c0[d]}; at most {MAX_AXIS_CHUNKS}); is its georeferencing right?")  # fmt: skip
    total = axis[0] * axis[1]
    held = sum(-(-r // max(1, b0)) * -(-c // max(1, b1)) for _, (r, c), (b0, b1) in tiles)
    if total > max(SPREAD_FLOOR, MAX_SPREAD * held):
        return (f"{far}: '{level}' would spread the mosaic over {grid.shape[0]} x {grid.shape[1]} pixels, "
                f"{total} chunks for the {held} its {len(tiles)} tiles hold (at most {MAX_SPREAD} per chunk "
                "held); is its georeferencing right? Tiles that far apart make separate mosaics")  # fmt: skip
    return None


def _far_tile(grid: LevelGrid, tiles: Sequence[tuple[str, tuple[int, int], tuple[int, int]]]) -> str:
    """The tile farthest from the others' median corner (the one most likely misplaced)."""
    at = np.asarray([grid.offsets[loc] for loc, _, _ in tiles], np.float64).reshape(len(tiles), 2)
    mid = np.median(at, axis=0)
    return tiles[int(np.argmax(np.abs(at - mid).sum(axis=1)))][0]


def _inside(inner: np.ndarray[Any, Any], outer: np.ndarray[Any, Any]) -> bool:
    return bool(outer[0] <= inner[0] and inner[1] <= outer[1] and outer[2] <= inner[2] and inner[3] <= outer[3])


def _resolve_overlaps(
    tiles: list[SourceSlab], prints: list[Footprint], grid: LevelGrid, prefer: Sequence[PreferRule]
) -> list[SetAside]:
    """Tiles set aside so that none of ``tiles`` (one date) overlap, or PlanError naming two."""
    aside: list[SetAside] = []
    live = list(range(len(tiles)))
    while True:
        sub = [prints[i] for i in live]
        pairs = overlaps(grid, sub)
        if not pairs:
            return aside
        i, j = (live[k] for k in pairs[0])
        a, b = tiles[i], tiles[j]
        box = _boxes(grid, [prints[i], prints[j]])
        shared = (max(box[0, 0], box[1, 0]), min(box[0, 1], box[1, 1]), max(box[0, 2], box[1, 2]),
                  min(box[0, 3], box[1, 3]))  # fmt: skip
        where = f"rows {shared[0]}:{shared[1]}, cols {shared[2]}:{shared[3]} of the mosaic"
        if not prefer:
            raise PlanError(
                f"{a.location} and {b.location} overlap ({where}); a mosaic places each pixel from one tile: "
                "remove one, or scan with --prefer newest / --prefer GLOB when one lies inside the other"
            )
        cands, rule = [a, b], ""
        for r in prefer:
            kept = r.keep(cands)
            if kept and len(kept) < len(cands):
                cands, rule = kept, str(r)
                break
        if len(cands) != 1:
            rules = " ".join(f"--prefer {r}" for r in prefer)
            raise PlanError(f"{a.location} and {b.location} overlap ({where}) and {rules} does not choose between them")
        win, lose = (0, 1) if cands[0] is a else (1, 0)
        if not _inside(box[lose], box[win]):
            raise PlanError(
                f"{a.location} and {b.location} overlap ({where}) and --prefer {rule} chose "
                f"{(a, b)[win].location}, but {(a, b)[lose].location} extends beyond it: setting it aside would "
                "lose pixels, and a tile cannot be placed in part"
            )
        aside.append(SetAside((a, b)[lose].location, (a, b)[win].location, rule))
        live.remove((i, j)[lose])


def make_mosaic_plan(
    slabs: Sequence[SourceSlab],
    concat_dim: str | None = None,
    *,
    prefer: Sequence[PreferRule] = (),
    require_aligned: bool = False,
    tolerance: float = TOLERANCE,
) -> MosaicPlan:
    """Place GeoTIFF tiles on their common grid (see the module docstring), or raise PlanError
    naming the files. ``require_aligned`` (off by default: ``plan/placement.complete_grid`` gives
    misaligned tiles a rectilinear grid): a tile of a level must start, and end unless at the
    mosaic's edge, on that level's block grid; a misaligned ``image`` is refused, other misaligned
    levels are dropped with the reason."""
    tiles = sorted(slabs, key=lambda s: s.order)
    if not tiles:
        return MosaicPlan(Plan(concat_dim=concat_dim, order=()), None, {})
    image: dict[str, tuple[ArrayMeta, Footprint]] = {}
    for s in tiles:
        m = s.arrays.get("image")
        if m is None:
            names = ", ".join(sorted(s.arrays)) or "none"
            raise PlanError(f"{s.location}: no 'image' array (arrays: {names}); only GeoTIFF tiles with one "
                            "full-resolution image form a mosaic")  # fmt: skip
        if m.status != "ok":
            raise PlanError(f"{s.location}: its image cannot join a mosaic: {m.reason}")
        fp = _footprint(s.location, m)
        if fp is None:
            raise PlanError(f"{s.location}: no georeferencing (ModelTransformation, or ModelPixelScale and "
                            "ModelTiepoint); a mosaic places tiles by their transforms")  # fmt: skip
        image[s.location] = (m, fp)
    t0 = tiles[0]
    crs0 = _crs(image[t0.location][0])
    for s in tiles[1:]:
        crs = _crs(image[s.location][0])
        if crs != crs0:
            raise PlanError(f"{s.location} and {t0.location} have different CRS ({crs or 'none'} and "
                            f"{crs0 or 'none'}); a mosaic needs one CRS")  # fmt: skip

    # dates (one mosaic per date along the concat dim)
    by_date: dict[float, list[SourceSlab]] = {}
    if concat_dim is not None:
        for s in tiles:
            if s.sort_value is None:
                raise PlanError(f"{s.location}: no '{concat_dim}' value (date) to stack its mosaic by")
            by_date.setdefault(s.sort_value, []).append(s)
    else:
        by_date[0.0] = list(tiles)
    dates = sorted(by_date)

    # the image grid, overlaps within each date (set aside by --prefer), then the grid of the rest
    grid = common_grid([image[s.location][1] for s in tiles], level="image", tolerance=tolerance)
    far = extent_problem("image", grid, _extents(tiles, "image"))
    if far is not None:
        raise PlanError(far)
    set_aside: list[SetAside] = []
    for d in dates:
        group = by_date[d]
        set_aside += _resolve_overlaps(group, [image[s.location][1] for s in group], grid, prefer)
    gone = {a.location for a in set_aside}
    placed = [s for s in tiles if s.location not in gone]
    for d in dates:
        by_date[d] = [s for s in by_date[d] if s.location not in gone]
    grid = common_grid([image[s.location][1] for s in placed], level="image", tolerance=tolerance)
    m0 = image[placed[0].location][0]
    yx0 = _yx(m0)
    assert yx0 is not None
    for s in placed[1:]:
        m = image[s.location][0]
        if _structure(m, yx0) != _structure(m0, yx0):
            raise PlanError(f"{s.location} and {placed[0].location}: 'image' has a different {_differs(m, m0, yx0)}; "
                            "tiles of one mosaic must agree in dtype, bands and nodata")  # fmt: skip

    t_index = {d: i for i, d in enumerate(dates)}
    date_of = {s.location: t_index[d] for d, g in by_date.items() for s in g}
    order = tuple(s.location for d in dates for s in by_date[d])
    plan = Plan(concat_dim=concat_dim, order=order, set_aside=tuple(set_aside),
                ordered_by="coordinate" if concat_dim is not None else None)  # fmt: skip
    grids: dict[str, LevelGrid] = {}
    dropped: list[tuple[str, str]] = []
    for name in sorted({n for s in placed for n in s.arrays}, key=lambda n: (n != "image", n)):
        holders = [s for s in placed if name in s.arrays]
        m0 = holders[0].arrays[name]
        yx = _yx(m0)
        if yx is None:  # not a raster: the date coordinate, taken once per date
            _place_once(plan, name, holders, by_date, dates, concat_dim)
            continue
        if len(holders) < len(placed):
            lack = next(s for s in placed if name not in s.arrays)
            dropped.append((name, f"not in every tile ({lack.location} has none)"))
            continue
        bad = next((s.arrays[name] for s in holders if s.arrays[name].status != "ok"), None)
        if bad is not None:
            plan.arrays[name] = bad
            continue
        reason = _level_problem(name, holders, yx, tolerance, by_date, require_aligned)
        if isinstance(reason, str):
            if name == "image":
                raise PlanError(reason)
            dropped.append((name, reason))
            continue
        level = reason
        grids[name] = level
        shape = list(m0.shape)
        shape[yx[0]], shape[yx[1]] = level.shape
        lead = concat_dim is not None and concat_dim in m0.dims
        if lead:
            assert concat_dim is not None
            shape[m0.dims.index(concat_dim)] = len(dates)
        attrs = {**m0.attrs, "transform": {"type": "<f8", "value": list(level.transform), "shape": [6]}}
        cell = _mixed([s.arrays[name] for s in holders])
        short = any(s.arrays[name].short_edge for s in holders)
        plan.arrays[name] = dataclasses.replace(m0, shape=tuple(shape), attrs=attrs, cell=cell, short_edge=short)
        for s in holders:
            dest = [0] * m0.ndim
            dest[yx[0]], dest[yx[1]] = level.offsets[s.location]
            if lead:
                assert concat_dim is not None
                dest[m0.dims.index(concat_dim)] = date_of[s.location]
            plan.placements[(s.location, name)] = tuple(dest)
            plan.view[(s.location, name)] = (0, tuple(dest))
    holes = tuple(
        (t_index[d], boxes)
        for d in dates
        if (boxes := gaps(grids["image"], [image[s.location][1] for s in by_date[d]]))
    )
    shown = crs0.removeprefix("citation:").split(" [", 1)[0] if crs0 else None
    return MosaicPlan(plan, shown, grids, tuple(dropped), holes,
                      tuple(dates) if concat_dim is not None else ())  # fmt: skip


def _level_problem(
    name: str,
    holders: list[SourceSlab],
    yx: tuple[int, int],
    tolerance: float,
    by_date: dict[float, list[SourceSlab]],
    require_aligned: bool,
) -> LevelGrid | str:
    """The level's grid, or why it cannot be mosaicked (one line naming the files)."""
    m0 = holders[0].arrays[name]
    for s in holders[1:]:
        m = s.arrays[name]
        if _structure(m, yx) != _structure(m0, yx):
            return (f"{s.location} and {holders[0].location}: '{name}' has a different {_differs(m, m0, yx)}; "
                    "tiles of one mosaic must agree in dtype, bands and nodata")  # fmt: skip
    prints: dict[str, Footprint] = {}
    for s in holders:
        fp = _footprint(s.location, s.arrays[name])
        if fp is None:
            return f"{s.location}: '{name}' has no transform"
        prints[s.location] = fp
    try:
        level = common_grid(list(prints.values()), level=name, tolerance=tolerance)
    except PlanError as e:
        return str(e)
    far = extent_problem(name, level, _extents(holders, name))
    if far is not None:
        return far
    for group in by_date.values():
        sub = [prints[s.location] for s in group if s.location in prints]
        pairs = overlaps(level, sub)
        if pairs:
            a, b = (sub[k].location for k in pairs[0])
            return f"{a} and {b} overlap in '{name}' (its pixels do not nest in the image's)"
    if require_aligned:
        cy, cx = m0.chunks[yx[0]], m0.chunks[yx[1]]
        for s in holders:
            r, c = level.offsets[s.location]
            fp = prints[s.location]
            for start, extent, block, total in ((r, fp.rows, cy, level.shape[0]), (c, fp.cols, cx, level.shape[1])):
                end = start + extent
                if start % block or (end % block and end != total):
                    return (
                        f"{s.location}: '{name}' would sit at element ({r}, {c}) of the mosaic, "
                        f"{'starting' if start % block else 'ending'} off its {cy}x{cx} block grid; placements "
                        "off the block grid are refused with require_aligned"
                    )
    return level


def _extents(tiles: Sequence[SourceSlab], name: str) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """``(location, (rows, cols), (block rows, block cols))`` of each tile's level ``name``."""
    out = []
    for s in tiles:
        m = s.arrays[name]
        yx = _yx(m)
        assert yx is not None
        out.append((s.location, (m.shape[yx[0]], m.shape[yx[1]]), (m.chunks[yx[0]], m.chunks[yx[1]])))
    return out


def _place_once(
    plan: Plan,
    name: str,
    holders: list[SourceSlab],
    by_date: dict[float, list[SourceSlab]],
    dates: list[float],
    concat_dim: str | None,
) -> None:
    """A non-raster array (the date coordinate): from the first tile of each date along the
    concat dimension, or from the first tile without one."""
    m0 = holders[0].arrays[name]
    if concat_dim is None or concat_dim not in m0.dims:
        plan.arrays[name] = m0
        plan.placements[(holders[0].location, name)] = (0,) * m0.ndim
        plan.view[(holders[0].location, name)] = (0, (0,) * m0.ndim)
        return
    axis = m0.dims.index(concat_dim)
    held = {s.location for s in holders}
    shape = list(m0.shape)
    shape[axis] = len(dates)
    plan.arrays[name] = m0.with_shape(tuple(shape))
    for t, d in enumerate(dates):
        first = next((s for s in by_date[d] if s.location in held), None)
        if first is None:
            continue
        dest = [0] * m0.ndim
        dest[axis] = t
        plan.placements[(first.location, name)] = tuple(dest)
        plan.view[(first.location, name)] = (0, tuple(dest))
