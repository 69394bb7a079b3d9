"""The mosaic plan (plan/mosaic.py), pure: grids, overlaps and gaps against a brute-force model
(tiles painted on a numpy canvas), and the refusals, placements and levels of ``make_mosaic_plan``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.errors import PlanError
from refstore.plan.concat import SourceSlab
from refstore.plan.mosaic import Footprint, common_grid, gaps, make_mosaic_plan, overlaps
from refstore.plan.series_order import parse_prefer
from refstore.scan._types import ArrayMeta

# ---------------------------------------------------------------------------- the model
boxes_st = st.lists(
    st.tuples(st.integers(-20, 20), st.integers(-20, 20), st.integers(1, 12), st.integers(1, 12)),
    min_size=1,
    max_size=8,
)
pixel_st = st.tuples(
    st.sampled_from([1.0, 0.25, 30.0, 1 / 3, 8.983152841195214e-05]),
    st.sampled_from([-1.0, -0.25, -30.0, -1 / 3, 1.0, 8.983152841195214e-05]),
)
origin_st = st.tuples(st.integers(-(10**6), 10**6), st.floats(0, 1), st.integers(-(10**6), 10**6), st.floats(0, 1))
"""An origin in pixels (whole and fraction): within a million pixels of 0, as real grids are."""


def _prints(boxes: list[tuple[int, int, int, int]], pixel: tuple[float, float], origin: tuple[int, float, int, float],
            rot: float = 0.0) -> list[Footprint]:  # fmt: skip
    dx, dy = pixel
    x0, y0 = (origin[0] + origin[1]) * dx, (origin[2] + origin[3]) * dy
    return [
        Footprint(f"t{i}.tif", (x0 + c * dx + r * rot, dx, rot, y0 + c * rot + r * dy, rot, dy), h, w)
        for i, (r, c, h, w) in enumerate(boxes)
    ]


def _canvas(boxes: list[tuple[int, int, int, int]]) -> tuple[np.ndarray, int, int]:
    r0 = min(b[0] for b in boxes)
    c0 = min(b[1] for b in boxes)
    h = max(b[0] + b[2] for b in boxes) - r0
    w = max(b[1] + b[3] for b in boxes) - c0
    masks = np.zeros((len(boxes), h, w), bool)
    for i, (r, c, bh, bw) in enumerate(boxes):
        masks[i, r - r0 : r - r0 + bh, c - c0 : c - c0 + bw] = True
    return masks, r0, c0


@settings(max_examples=150, deadline=None)
@given(boxes=boxes_st, pixel=pixel_st, origin=origin_st, rotated=st.booleans())
def test_grid_overlaps_and_gaps_equal_the_painted_model(boxes, pixel, origin, rotated) -> None:
    rot = 0.1 * abs(pixel[0]) if rotated else 0.0
    prints = _prints(boxes, pixel, origin, rot)
    grid = common_grid(prints)
    masks, r0, c0 = _canvas(boxes)
    assert grid.shape == masks.shape[1:]
    for fp, (r, c, _, _) in zip(prints, boxes, strict=True):
        assert grid.offsets[fp.location] == (r - r0, c - c0)
    x0, dx, rx, y0, ry, dy = grid.transform
    assert (dx, rx, ry, dy) == (pixel[0], rot, rot, pixel[1])
    scale = max(abs(pixel[0]), abs(pixel[1]))
    ox, oy = (origin[0] + origin[1]) * pixel[0], (origin[2] + origin[3]) * pixel[1]
    assert x0 == pytest.approx(ox + c0 * pixel[0] + r0 * rot, abs=1e-6 * scale)
    assert y0 == pytest.approx(oy + c0 * rot + r0 * pixel[1], abs=1e-6 * scale)
    n = len(boxes)
    expected = sorted((i, j) for i in range(n) for j in range(i + 1, n) if (masks[i] & masks[j]).any())
    assert overlaps(grid, prints) == expected
    covered = masks.any(0)
    painted = np.zeros(covered.shape, np.int64)
    for a, b, c, d in gaps(grid, prints):
        assert a < b and c < d
        painted[a:b, c:d] += 1
    assert (painted <= 1).all(), "gap boxes overlap"
    np.testing.assert_array_equal(painted == 1, ~covered)


@settings(max_examples=60, deadline=None)
@given(boxes=boxes_st, pixel=pixel_st, origin=origin_st, which=st.integers(0, 7),
       frac=st.floats(0.01, 0.99), axis=st.sampled_from(["x", "y"]))  # fmt: skip
def test_an_origin_off_the_grid_is_refused_naming_the_tile(boxes, pixel, origin, which, frac, axis) -> None:
    prints = _prints(boxes, pixel, origin)
    k = which % len(prints)
    if k == 0:
        k = len(prints) - 1
    if k == 0:
        return  # one tile: always on its own grid
    t = list(prints[k].transform)
    t[0 if axis == "x" else 3] += frac * (pixel[0] if axis == "x" else pixel[1])
    prints[k] = Footprint(prints[k].location, tuple(t), prints[k].rows, prints[k].cols)  # type: ignore[arg-type]
    with pytest.raises(PlanError, match=rf"t{k}\.tif: the origin of 'image' is off the pixel grid of t0\.tif"):
        common_grid(prints)


def test_a_different_pixel_size_is_refused_naming_both() -> None:
    prints = _prints([(0, 0, 4, 4), (0, 4, 4, 4)], (10.0, -10.0), (0, 0.0, 0, 0.0))
    prints[1] = Footprint("t1.tif", (40.0, 10.0001, 0.0, 0.0, 0.0, -10.0), 4, 4)
    with pytest.raises(PlanError, match=r"t1\.tif and t0\.tif have different pixel sizes"):
        common_grid(prints)


def test_origin_within_tolerance_is_on_the_grid() -> None:
    prints = [Footprint("a", (0.0, 0.1, 0.0, 0.0, 0.0, -0.1), 3, 3),
              Footprint("b", (0.30000000000000004, 0.1, 0.0, 0.0, 0.0, -0.1), 3, 3)]  # fmt: skip
    assert common_grid(prints).offsets["b"] == (0, 3)


# ---------------------------------------------------------------------------- make_mosaic_plan
def _meta(name: str, rows: int, cols: int, transform: tuple[float, ...], *, block: int = 16, crs: str = "EPSG:32633",
          nodata: int | None = 0, lead: str | None = None, codecs: tuple = ({"id": "zlib"},)) -> ArrayMeta:  # fmt: skip
    sfx = "" if name == "image" else "_" + name
    dims: tuple[str, ...] = (f"y{sfx}", f"x{sfx}")
    shape: tuple[int, ...] = (rows, cols)
    chunks: tuple[int, ...] = (block, block)
    if lead:
        dims, shape, chunks = (lead, *dims), (1, *shape), (1, *chunks)
    attrs = {"transform": {"type": "<f8", "value": list(transform), "shape": [6]}, "crs": {"type": "str", "value": crs}}
    if nodata is not None:
        attrs["nodata"] = {"type": "<u2", "value": nodata}
    return ArrayMeta(name, dims, shape, chunks, "<u2", nodata if nodata is not None else 0, codecs, attrs)


def _tile(loc: str, row: int, col: int, rows: int, cols: int, *, order: int = 0, overview: bool = True,
          date: float | None = None, mtime: int = -1, **kw) -> SourceSlab:  # fmt: skip
    t = (1000.0 + col * 10.0, 10.0, 0.0, 5000.0 - row * 10.0, 0.0, -10.0)
    lead = "time" if date is not None else None
    arrays = {"image": _meta("image", rows, cols, t, lead=lead, **kw)}
    if overview:
        to = (t[0], 20.0, 0.0, t[3], 0.0, -20.0)
        arrays["overview_1"] = _meta("overview_1", -(-rows // 2), -(-cols // 2), to, lead=lead, **kw)
    if date is not None:
        arrays["time"] = ArrayMeta("time", ("time",), (1,), (1,), "<i8", None)
    return SourceSlab(loc, order, arrays, sort_value=date, sort_last=date, mtime_ns=mtime)


def test_misaligned_tiles_are_placed_at_any_offset_without_the_alignment_rule() -> None:
    tiles = [_tile("a.tif", 0, 0, 40, 37, order=0), _tile("b.tif", 0, 37, 40, 30, order=1),
             _tile("c.tif", 40, 5, 23, 50, order=2)]  # fmt: skip
    mp = make_mosaic_plan(tiles, require_aligned=False)
    img = mp.plan.arrays["image"]
    assert img.shape == (63, 67)
    assert img.attrs["transform"]["value"] == [1000.0, 10.0, 0.0, 5000.0, 0.0, -10.0]
    assert mp.plan.placements[("b.tif", "image")] == (0, 37)
    assert mp.plan.placements[("c.tif", "image")] == (40, 5)
    assert mp.gaps == ((0, ((40, 63, 0, 5), (40, 63, 55, 67))),)
    assert mp.summary()["gap_pixels"] == 23 * 5 + 23 * 12
    # overview_1: b starts at image column 37, overview column 18.5: off that level's grid
    assert "overview_1" not in mp.plan.arrays
    assert dict(mp.dropped)["overview_1"].startswith("b.tif: the origin of 'overview_1' is off the pixel grid of a.tif")
    with pytest.raises(PlanError, match=r"a\.tif: 'image' would sit at element \(0, 0\) of the mosaic, ending "
                       r"off its 16x16 block grid"):  # fmt: skip
        make_mosaic_plan(tiles, require_aligned=True)


def test_aligned_tiles_pass_the_alignment_rule_and_keep_nesting_overviews() -> None:
    tiles = [_tile("a.tif", 0, 0, 32, 64, order=0), _tile("b.tif", 32, 0, 32, 32, order=1),
             _tile("c.tif", 0, 64, 64, 20, order=2)]  # fmt: skip
    mp = make_mosaic_plan(tiles)
    assert mp.plan.arrays["image"].shape == (64, 84)
    assert mp.plan.arrays["overview_1"].shape == (32, 42)
    assert mp.plan.placements[("c.tif", "overview_1")] == (0, 32)
    assert mp.plan.arrays["overview_1"].attrs["transform"]["value"][1] == 20.0
    assert mp.gaps == ((0, ((32, 64, 32, 64),)),)
    assert mp.dropped == ()


def test_a_tile_ending_off_the_block_grid_inside_the_mosaic_is_refused_under_the_alignment_rule() -> None:
    # a's last block is padded (cols 20..31) where the mosaic has a gap: that padding must not be read
    # (by default plan/placement.complete_grid gives such a mosaic a rectilinear grid instead)
    tiles = [_tile("a.tif", 0, 0, 32, 20, order=0), _tile("b.tif", 0, 32, 32, 32, order=1)]
    with pytest.raises(PlanError, match=r"a\.tif: 'image' would sit at element \(0, 0\) of the mosaic, ending off"):
        make_mosaic_plan(tiles, prefer=(), require_aligned=True)


def test_overlapping_tiles_are_refused_naming_both() -> None:
    tiles = [_tile("a.tif", 0, 0, 32, 32, order=0), _tile("b.tif", 16, 16, 32, 32, order=1)]
    with pytest.raises(PlanError, match=r"a\.tif and b\.tif overlap \(rows 16:32, cols 16:32 of the mosaic\)"):
        make_mosaic_plan(tiles)


def test_prefer_sets_aside_a_tile_inside_the_one_it_chose() -> None:
    tiles = [_tile("a_v1.tif", 0, 0, 32, 32, order=0, mtime=1), _tile("a_v2.tif", 0, 0, 32, 32, order=1, mtime=2),
             _tile("b.tif", 0, 32, 32, 32, order=2, mtime=1)]  # fmt: skip
    mp = make_mosaic_plan(tiles, prefer=parse_prefer(["newest"]))
    assert [(a.location, a.kept, a.rule) for a in mp.plan.set_aside] == [("a_v1.tif", "a_v2.tif", "newest")]
    assert ("a_v1.tif", "image") not in mp.plan.placements
    assert mp.plan.placements[("a_v2.tif", "image")] == (0, 0)
    mp = make_mosaic_plan(tiles, prefer=parse_prefer(["*_v1.tif"]))
    assert [a.location for a in mp.plan.set_aside] == ["a_v2.tif"]
    # a partial overlap: the loser would lose pixels
    part = [_tile("a.tif", 0, 0, 32, 32, order=0, mtime=2), _tile("b.tif", 16, 0, 32, 32, order=1, mtime=1)]
    with pytest.raises(PlanError, match=r"--prefer newest chose a\.tif, but b\.tif extends beyond it"):
        make_mosaic_plan(part, prefer=parse_prefer(["newest"]))
    with pytest.raises(PlanError, match=r"--prefer \*_z\.tif does not choose"):
        make_mosaic_plan(part, prefer=parse_prefer(["*_z.tif"]))


def test_different_crs_and_nodata_are_refused_naming_both() -> None:
    a = _tile("a.tif", 0, 0, 32, 32, order=0)
    with pytest.raises(PlanError, match=r"b\.tif and a\.tif have different CRS \(EPSG:4326 and EPSG:32633\)"):
        make_mosaic_plan([a, _tile("b.tif", 0, 32, 32, 32, order=1, crs="EPSG:4326")])
    with pytest.raises(PlanError, match=r"b\.tif and a\.tif: 'image' has a different nodata"):
        make_mosaic_plan([a, _tile("b.tif", 0, 32, 32, 32, order=1, nodata=7)])
    lzw = make_mosaic_plan([a, _tile("b.tif", 0, 32, 32, 32, order=1, codecs=({"id": "lzw"},))])
    assert lzw.plan.arrays["image"].cell  # another codec: kept per tile (``plan/slabs.py``), not refused
    bare = SourceSlab("n.tif", 1, {"image": ArrayMeta("image", ("y", "x"), (4, 4), (4, 4), "<u2", 0)})
    with pytest.raises(PlanError, match=r"n\.tif: no georeferencing"):
        make_mosaic_plan([a, bare])
    nc = SourceSlab("x.nc", 1, {"sst": ArrayMeta("sst", ("lat", "lon"), (4, 4), (4, 4), "<f4", 0)})
    with pytest.raises(PlanError, match=r"x\.nc: no 'image' array \(arrays: sst\)"):
        make_mosaic_plan([a, nc])


def test_a_level_some_tiles_lack_is_dropped() -> None:
    tiles = [_tile("a.tif", 0, 0, 32, 32, order=0), _tile("b.tif", 0, 32, 32, 32, order=1, overview=False)]
    mp = make_mosaic_plan(tiles)
    assert set(mp.plan.arrays) == {"image"}
    assert mp.dropped == (("overview_1", "not in every tile (b.tif has none)"),)


def test_mosaic_by_date_stacks_one_grid_and_judges_overlaps_within_a_date() -> None:
    d1, d2 = 1.7e9, 1.7e9 + 86400
    tiles = [_tile("a_d2.tif", 0, 0, 32, 32, order=0, date=d2), _tile("a_d1.tif", 0, 0, 32, 32, order=1, date=d1),
             _tile("b_d1.tif", 0, 32, 32, 32, order=2, date=d1)]  # fmt: skip
    mp = make_mosaic_plan(tiles, "time")
    p = mp.plan
    assert p.order == ("a_d1.tif", "b_d1.tif", "a_d2.tif")
    assert p.arrays["image"].shape == (2, 32, 64)
    assert p.placements[("a_d2.tif", "image")] == (1, 0, 0)
    assert p.placements[("b_d1.tif", "image")] == (0, 0, 32)
    assert p.arrays["time"].shape == (2,)
    assert p.placements[("a_d1.tif", "time")] == (0,)
    assert p.placements[("a_d2.tif", "time")] == (1,)
    assert ("b_d1.tif", "time") not in p.placements
    assert mp.gaps == ((1, ((0, 32, 32, 64),)),)
    dup = [*tiles, _tile("c_d1.tif", 0, 16, 32, 32, order=3, date=d1)]
    with pytest.raises(PlanError, match=r"a_d1\.tif and c_d1\.tif overlap"):
        make_mosaic_plan(dup, "time")


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    cols=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    holes=st.sets(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=6),
    dup=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_make_mosaic_plan_places_a_cut_raster_back(rows, cols, holes, dup, seed) -> None:
    """A raster cut at random edges, some tiles missing, given in random order (plus, with
    ``dup``, a newer copy of one tile): placements, shape, transform and gap pixels equal the cut."""
    re_ = np.concatenate([[0], np.cumsum(rows)])
    ce = np.concatenate([[0], np.cumsum(cols)])
    boxes = [(i, j) for i in range(len(rows)) for j in range(len(cols)) if (i, j) not in holes]
    if not boxes:
        return
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(boxes))
    tiles = [_tile(f"t{i}_{j}.tif", int(re_[i]), int(ce[j]), rows[i], cols[j], order=int(k), overview=False, mtime=1)
             for k, (i, j) in zip(order, boxes, strict=True)]  # fmt: skip
    if dup:
        i, j = boxes[0]
        tiles.append(_tile(f"t{i}_{j}_new.tif", int(re_[i]), int(ce[j]), rows[i], cols[j], order=99, overview=False,
                           mtime=2))  # fmt: skip
    mp = make_mosaic_plan(tiles, prefer=parse_prefer(["newest"]), require_aligned=False)
    canvas = np.zeros((int(re_[-1]), int(ce[-1])), bool)
    for i, j in boxes:
        canvas[re_[i] : re_[i + 1], ce[j] : ce[j + 1]] = True
    r0, c0 = np.argwhere(canvas).min(0)
    r1, c1 = np.argwhere(canvas).max(0) + 1
    canvas = canvas[r0:r1, c0:c1]
    img = mp.plan.arrays["image"]
    assert img.shape == canvas.shape
    assert img.attrs["transform"]["value"] == [1000.0 + c0 * 10.0, 10.0, 0.0, 5000.0 - r0 * 10.0, 0.0, -10.0]
    for i, j in boxes:
        loc = f"t{i}_{j}_new.tif" if dup and (i, j) == boxes[0] else f"t{i}_{j}.tif"
        assert mp.plan.placements[(loc, "image")] == (re_[i] - r0, ce[j] - c0)
    if dup:
        i, j = boxes[0]
        assert [(a.location, a.kept) for a in mp.plan.set_aside] == [(f"t{i}_{j}.tif", f"t{i}_{j}_new.tif")]
    assert mp.summary()["gap_pixels"] == int((~canvas).sum())
