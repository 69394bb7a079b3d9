"""Placement -> chunk selection on any grid (issue 14), at the pure planning level.

Random slabs (extents along the concat axis that are not multiples of the chunk, sources that
lack the array) are planned by ``make_plan``; every source chunk is decoded *padded* to the full
chunk shape (as HDF5 stores a partial chunk: padded with the fill value), keyed ``k + base``
(``Plan.keys``), and a window is assembled the way the readers do it (``EraLayout.parts``,
``Grid.chunk_ranges``, ``Grid.boxes``, ``box_slices``). It must equal the same window of the
array assembled with numpy from the slabs (fill where no source holds the array). A padded
chunk that is not cropped to its global box writes its padding over the next slab's values, and
a chunk placed on a wrong box moves values: both fail the comparison.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refstore.plan import Plan, Selection, SourceSlab, make_plan
from refstore.plan.eras import EraLayout
from refstore.plan.grid import Grid, rle_decode, rle_encode, slab_lengths
from refstore.plan.placement import complete_grid
from refstore.plan.select import box_slices
from refstore.plan.slabs import SlabLayout
from refstore.scan._types import ArrayMeta

FILL = -7


def _read(meta: ArrayMeta, decoded: dict[tuple[int, tuple[int, ...]], np.ndarray[Any, Any]],
          sel: Selection) -> np.ndarray[Any, Any]:  # fmt: skip
    """The window from decoded (padded) chunks keyed ``(era, global key)``."""
    out = np.full(sel.shape, FILL, np.int32)
    layout = EraLayout.of(meta)
    parts = [(p.era, p.out, p.local) for p in layout.parts(sel)] if layout is not None else [(0, slice(None), sel)]
    for era, where, local in parts:
        if era is None:
            continue
        grid = Grid.of_era(meta, era)
        ranges = grid.chunk_ranges(local)
        if ranges is None:
            continue
        inside = [k for (e, k) in decoded if e == era and all(a <= x <= b for x, (a, b) in zip(k, ranges, strict=True))]
        keys = np.array(inside, np.int64)
        if not len(keys):
            continue
        origin, size = grid.boxes(keys)
        assert (size <= np.asarray(grid.chunks)).all()
        s_lo, s_hi, d_lo, d_hi = box_slices(origin, size, local)
        part = out[(where, slice(None))]
        for i, k in enumerate(keys.tolist()):
            chunk = decoded[(era, tuple(k))]
            src = tuple(map(slice, s_lo[i], s_hi[i], local.step))
            dst = tuple(map(slice, d_lo[i], d_hi[i]))
            part[dst] = chunk[src]
    return out


slabs_st = st.lists(st.tuples(st.integers(1, 13), st.booleans(), st.booleans()), min_size=1, max_size=6)
"""Per source: extent along time, whether it holds the array, whether its chunk is one longer
(a new era: chunk shape changes along the concat dimension)."""


@settings(max_examples=150, deadline=None)
@given(slabs=slabs_st, c0=st.integers(1, 5), c1=st.integers(1, 3), width=st.integers(1, 4),
       window=st.tuples(st.integers(0, 80), st.integers(0, 80), st.integers(1, 4)),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_any_placement_reads_its_window(slabs: list[tuple[int, bool, bool]], c0: int, c1: int, width: int,
                                        window: tuple[int, int, int], seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    sources, data = [], []
    chunk0 = []
    for i, (n, has, longer) in enumerate(slabs):
        arrays = {"t": ArrayMeta("t", ("time",), (n,), (1,), "<f8", None)}
        chunk0.append(c0 + int(longer))
        if has:
            arrays["x"] = ArrayMeta("x", ("time", "y"), (n, width), (chunk0[i], c1), "<i4", FILL)
        sources.append(SourceSlab(f"s{i}", i, arrays, sort_value=float(i), sort_units="u"))
        data.append(rng.integers(0, 1000, (n, width)).astype(np.int32) if has else None)
    if not any(has for _, has, _ in slabs):
        return
    plan = make_plan(sources, "time")
    meta = plan.arrays["x"]
    whole = np.concatenate([d if d is not None else np.full((n, width), FILL, np.int32)
                            for d, (n, _, _) in zip(data, slabs, strict=True)])  # fmt: skip
    assert meta.shape == whole.shape

    decoded: dict[tuple[int, tuple[int, ...]], np.ndarray[Any, Any]] = {}
    for i, d in enumerate(data):
        if d is None:
            continue
        era, base = plan.keys[(f"s{i}", "x")]
        n, c = d.shape[0], chunk0[i]
        for k0 in range(-(-n // c)):
            for k1 in range(-(-width // c1)):
                chunk = np.full((c, c1), FILL, np.int32)  # padded as HDF5 stores a partial chunk
                piece = d[k0 * c : (k0 + 1) * c, k1 * c1 : (k1 + 1) * c1]
                chunk[: piece.shape[0], : piece.shape[1]] = piece
                key = (k0 + base[0], k1 + base[1])
                assert (era, key) not in decoded, "two source chunks on one global chunk"
                decoded[(era, key)] = chunk

    a, b, step = window
    a, b = min(a, whole.shape[0]), min(max(a, b), whole.shape[0])
    sel = Selection((a, 0), (b, width), (step, 1), ())
    got = _read(meta, decoded, sel)
    np.testing.assert_array_equal(got, whole[a:b:step])


@given(st.lists(st.integers(1, 20), max_size=30))
def test_run_length_encoding_round_trips(lengths: list[int]) -> None:
    assert rle_decode(rle_encode(lengths)) == tuple(lengths)


@given(extent=st.integers(0, 100), chunk=st.integers(1, 12))
def test_slab_lengths_cover_the_extent_with_full_chunks_then_one_short(extent: int, chunk: int) -> None:
    ls = slab_lengths(extent, chunk)
    assert sum(ls) == extent and all(n == chunk for n in ls[:-1]) and all(0 < n <= chunk for n in ls)


def test_grid_index_and_boxes_on_a_rectilinear_dimension() -> None:
    g = Grid((31, 5), (10, 2), ((10, 10, 10, 1), None))
    assert g.index(0, np.array([0, 9, 10, 29, 30])).tolist() == [0, 0, 1, 2, 3]
    origin, size = g.boxes(np.array([[3, 2], [1, 0]]))
    assert origin.tolist() == [[30, 4], [10, 0]] and size.tolist() == [[1, 1], [10, 2]]
    assert g.chunk_ranges(Selection((29, 0), (31, 5), (1, 1), ())) == [(2, 3), (0, 2)]
    assert g.describe()[0] == {"kind": "regular", "chunk": 10}  # full chunks, the last one cut by the extent
    h = Grid((31,), (10,), ((10, 1, 10, 10),))
    assert h.describe() == [{"kind": "rectilinear", "count": 4, "chunks": [10, 1, [10, 2]]}]
    assert h.index(0, np.array([10, 11])).tolist() == [1, 2]


# --------------------------------------------------------------------------- N-D placements (mosaics)
def _mosaic_plan(tiles: dict[str, tuple[tuple[int, int], np.ndarray[Any, Any]]], shape: tuple[int, int],
                 chunks: tuple[int, int]) -> tuple[Plan, list[SourceSlab]]:  # fmt: skip
    """A plan as ``plan/mosaic.py`` builds one: placements and view only, no keys."""
    g = ArrayMeta("image", ("y", "x"), shape, chunks, "<i4", FILL)
    plan = Plan(concat_dim=None, order=tuple(tiles), arrays={"image": g})
    slabs = []
    for i, (loc, (off, data)) in enumerate(tiles.items()):
        slabs.append(SourceSlab(loc, i, {"image": ArrayMeta("image", ("y", "x"), data.shape, chunks, "<i4", FILL)}))
        plan.placements[(loc, "image")] = off
        plan.view[(loc, "image")] = (0, off)
    return plan, slabs


@settings(max_examples=150, deadline=None)
@given(heights=st.lists(st.integers(1, 9), min_size=1, max_size=3), widths=st.lists(st.integers(1, 9), min_size=1,
       max_size=3), gap=st.integers(0, 3), c0=st.integers(1, 4), c1=st.integers(1, 4),
       present=st.lists(st.booleans(), min_size=9, max_size=9), window=st.tuples(*[st.integers(0, 40)] * 4),
       seed=st.integers(0, 2**16))  # fmt: skip
@example(heights=[3, 3], widths=[2], gap=1, c0=2, c1=2, present=[True] * 9, window=(0, 40, 0, 40), seed=1)
def test_tiles_in_rows_and_columns_read_their_window(heights: list[int], widths: list[int], gap: int, c0: int,
                                                      c1: int, present: list[bool], window: tuple[int, ...],
                                                      seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    ys = np.concatenate([[0], np.cumsum([h + gap for h in heights])]).tolist()
    xs = np.concatenate([[0], np.cumsum([w + gap for w in widths])]).tolist()
    shape = (ys[-1] - gap, xs[-1] - gap)
    canvas = np.full(shape, FILL, np.int32)
    tiles = {}
    for r, h in enumerate(heights):
        for c, w in enumerate(widths):
            if not present[r * 3 + c]:
                continue
            data = rng.integers(0, 1000, (h, w)).astype(np.int32)
            tiles[f"t{r}{c}"] = ((ys[r], xs[c]), data)
            canvas[ys[r] : ys[r] + h, xs[c] : xs[c] + w] = data
    if not tiles:
        return
    plan, slabs = _mosaic_plan(tiles, shape, (c0, c1))
    complete_grid(plan, slabs)
    meta = plan.arrays["image"]
    decoded: dict[tuple[int, tuple[int, ...]], np.ndarray[Any, Any]] = {}
    for loc, (_off, data) in tiles.items():
        era, base = plan.keys[(loc, "image")]
        for k0 in range(-(-data.shape[0] // c0)):
            for k1 in range(-(-data.shape[1] // c1)):
                chunk = np.full((c0, c1), -99, np.int32)  # a TIFF edge tile's padding is not the nodata value
                piece = data[k0 * c0 : (k0 + 1) * c0, k1 * c1 : (k1 + 1) * c1]
                chunk[: piece.shape[0], : piece.shape[1]] = piece
                key = (k0 + base[0], k1 + base[1])
                assert (era, key) not in decoded, "two source chunks on one global chunk"
                decoded[(era, key)] = chunk
    y0, y1, x0, x1 = window
    y0, y1 = min(y0, shape[0]), min(max(y0, y1), shape[0])
    x0, x1 = min(x0, shape[1]), min(max(x0, x1), shape[1])
    sel = Selection((y0, x0), (y1, x1), (1, 1), ())
    np.testing.assert_array_equal(_read(meta, decoded, sel), canvas[y0:y1, x0:x1])


def test_aligned_tiles_keep_a_regular_grid() -> None:
    tiles = {f"t{i}": ((0, 4 * i), np.zeros((4, 4), np.int32)) for i in range(3)}
    plan, slabs = _mosaic_plan(tiles, (4, 12), (2, 2))
    complete_grid(plan, slabs)
    assert plan.arrays["image"].edges == () and plan.keys[("t2", "image")] == (0, (0, 4))


def test_tiles_whose_chunks_cross_have_no_grid_and_coarse_keys() -> None:
    # t1 starts at row 1 beside t0: t0's chunk rows [0, 2) would span t1's edge at 1
    tiles = {"t0.tif": ((0, 0), np.zeros((4, 2), np.int32)), "t1.tif": ((1, 2), np.zeros((3, 2), np.int32))}
    plan, slabs = _mosaic_plan(tiles, (4, 4), (2, 2))
    complete_grid(plan, slabs)
    meta = plan.arrays["image"]
    assert meta.gridless and meta.edges == ()
    assert plan.keys[("t1.tif", "image")] == (0, (0, 1))  # origin (1, 2) lies in cell (1 // 2, 2 // 2)
    assert ArrayMeta.from_json(meta.to_json()).gridless


def _paint_gridless(plan: Plan, tiles: dict[str, tuple[tuple[int, int], np.ndarray[Any, Any]]],
                    chunks: tuple[int, int], sel: Selection) -> np.ndarray[Any, Any]:  # fmt: skip
    """A window of a gridless array the way the readers assemble it: the rows whose coarse keys
    (``k + base``, the plan's keys) fall in ``SlabLayout.key_ranges`` (the table's pushdown),
    placed by ``SlabLayout.boxes``, the margin's rows dropped by ``touching``, cropped by
    ``box_slices``. Chunks are padded with -99 (a tile's padding is not the nodata value)."""
    meta = plan.arrays["image"]
    lay = SlabLayout.of(meta.shape, chunks, [(loc, off, d.shape) for loc, (off, d) in tiles.items()])
    out = np.full(sel.shape, FILL, np.int32)
    ranges = lay.key_ranges(sel.start, sel.stop)
    if ranges is None:
        return out
    slab, keys, coarse, data = [], [], [], []
    for loc, (_off, d) in tiles.items():
        _era, base = plan.keys[(loc, "image")]
        for k0 in range(-(-d.shape[0] // chunks[0])):
            for k1 in range(-(-d.shape[1] // chunks[1])):
                chunk = np.full(chunks, -99, np.int32)
                piece = d[k0 * chunks[0] : (k0 + 1) * chunks[0], k1 * chunks[1] : (k1 + 1) * chunks[1]]
                chunk[: piece.shape[0], : piece.shape[1]] = piece
                slab.append(lay.sources.index(loc))
                keys.append((k0, k1))
                coarse.append((k0 + base[0], k1 + base[1]))
                data.append(chunk)
    g = np.asarray(coarse, np.int64)
    rows = np.flatnonzero(np.all([(g[:, d] >= a) & (g[:, d] <= b) for d, (a, b) in enumerate(ranges)], axis=0))
    if not len(rows):
        return out
    origin, size = lay.boxes(np.asarray(slab)[rows], np.asarray(keys, np.int64)[rows])
    assert (size <= np.asarray(chunks)).all() and (size > 0).all()
    keep = SlabLayout.touching(origin, size, sel)
    s_lo, s_hi, d_lo, d_hi = box_slices(origin[keep], size[keep], sel)
    for i, row in enumerate(rows[keep].tolist()):
        out[tuple(map(slice, d_lo[i], d_hi[i]))] = data[row][tuple(map(slice, s_lo[i], s_hi[i], sel.step))]
    return out


rects_st = st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24), st.integers(1, 11), st.integers(1, 11)),
                    min_size=1, max_size=8)  # fmt: skip
"""Candidate tiles ``(row, col, height, width)``; those overlapping an earlier one are dropped."""


@settings(max_examples=200, deadline=None)
@given(rects=rects_st, c0=st.integers(1, 5), c1=st.integers(1, 5), margin=st.integers(0, 3),
       window=st.tuples(*[st.integers(0, 40)] * 4, st.integers(1, 3), st.integers(1, 3)),
       seed=st.integers(0, 2**16))  # fmt: skip
@example(rects=[(0, 0, 4, 6), (0, 6, 4, 6), (4, 3, 4, 6), (4, 9, 4, 3), (4, 0, 4, 3)], c0=4, c1=4, margin=0,
         window=(0, 40, 0, 40, 1, 1), seed=3)  # a brick layout: the second row shifted by half a tile
@example(rects=[(0, 0, 4, 3), (0, 3, 4, 6), (4, 0, 4, 6)], c0=4, c1=4, margin=0, window=(0, 8, 5, 9, 1, 1),
         seed=0)  # the chunk at column 3 (coarse key 0) holds columns 5-6: found only through the margin
def test_slabs_placed_anywhere_read_their_window(rects: list[tuple[int, int, int, int]], c0: int, c1: int,
                                                 margin: int, window: tuple[int, ...], seed: int) -> None:  # fmt: skip
    """Any 2-D placement without overlaps, any chunk shape: a window read through the plan's
    keys and grid (regular, rectilinear, or none: ``SlabLayout``) equals the painted canvas."""
    rng = np.random.default_rng(seed)
    placed: list[tuple[int, int, int, int]] = []
    for y, x, h, w in rects:
        if all(y + h <= b or b + d <= y or x + w <= a or a + e <= x for b, a, d, e in placed):
            placed.append((y, x, h, w))
    shape = (max(y + h for y, _, h, _ in placed) + margin, max(x + w for _, x, _, w in placed) + margin)
    canvas = np.full(shape, FILL, np.int32)
    tiles = {}
    for i, (y, x, h, w) in enumerate(placed):
        data = rng.integers(0, 1000, (h, w)).astype(np.int32)
        tiles[f"t{i}"] = ((y, x), data)
        canvas[y : y + h, x : x + w] = data
    plan, slabs = _mosaic_plan(tiles, shape, (c0, c1))
    complete_grid(plan, slabs)
    meta = plan.arrays["image"]
    y0, y1, x0, x1, sy, sx = window
    y0, y1 = min(y0, shape[0]), min(max(y0, y1), shape[0])
    x0, x1 = min(x0, shape[1]), min(max(x0, x1), shape[1])
    sel = Selection((y0, x0), (y1, x1), (sy, sx), ())
    if meta.gridless:
        for loc, ((y, x), _) in tiles.items():
            assert plan.keys[(loc, "image")] == (0, (y // c0, x // c1))
        got = _paint_gridless(plan, tiles, (c0, c1), sel)
    else:
        decoded: dict[tuple[int, tuple[int, ...]], np.ndarray[Any, Any]] = {}
        for loc, (_off, data) in tiles.items():
            era, base = plan.keys[(loc, "image")]
            for k0 in range(-(-data.shape[0] // c0)):
                for k1 in range(-(-data.shape[1] // c1)):
                    chunk = np.full((c0, c1), -99, np.int32)
                    piece = data[k0 * c0 : (k0 + 1) * c0, k1 * c1 : (k1 + 1) * c1]
                    chunk[: piece.shape[0], : piece.shape[1]] = piece
                    key = (k0 + base[0], k1 + base[1])
                    assert (era, key) not in decoded, "two source chunks on one global chunk"
                    decoded[(era, key)] = chunk
        got = _read_strided(meta, decoded, sel)
    np.testing.assert_array_equal(got, canvas[y0:y1:sy, x0:x1:sx])


def _read_strided(meta: ArrayMeta, decoded: dict[tuple[int, tuple[int, ...]], np.ndarray[Any, Any]],
                  sel: Selection) -> np.ndarray[Any, Any]:  # fmt: skip
    """``_read`` with steps: chunks holding no selected element are skipped as the reader does."""
    grid = Grid.of(meta)
    out = np.full(sel.shape, FILL, np.int32)
    ranges = grid.chunk_ranges(sel)
    if ranges is None:
        return out
    inside = [k for (_e, k) in decoded if all(a <= x <= b for x, (a, b) in zip(k, ranges, strict=True))]
    if not inside:
        return out
    keys = np.array(inside, np.int64)
    origin, size = grid.boxes(keys)
    s_lo, s_hi, d_lo, d_hi = box_slices(origin, size, sel)
    for i, k in enumerate(keys.tolist()):
        if (d_hi[i] > d_lo[i]).all():
            src = tuple(map(slice, s_lo[i], s_hi[i], sel.step))
            out[tuple(map(slice, d_lo[i], d_hi[i]))] = decoded[(0, tuple(k))][src]
    return out


def test_grid_boxes_of_a_scalar_array() -> None:
    origin, size = Grid((), ()).boxes(np.zeros((3, 0), np.int64))
    assert origin.shape == size.shape == (3, 0)


def test_whole_grid_of_an_array_with_eras_joins_their_grids() -> None:
    m = lambda n, c: ArrayMeta("x", ("time",), (n,), (c,), "<i4", FILL)
    t = lambda n: ArrayMeta("t", ("time",), (n,), (1,), "<f8", None)
    # 3 elements on chunks of 2, then (new era: chunk 3) 4 and 2 elements: the second era is misaligned
    slabs = [SourceSlab(f"s{i}", i, {"x": m(n, c), "t": t(n)}, sort_value=float(i), sort_units="u")
             for i, (n, c) in enumerate([(3, 2), (4, 3), (2, 3)])]  # fmt: skip
    meta = make_plan(slabs, "time").arrays["x"]
    assert [e["start"] for e in meta.eras] == [0, 3] and "edges" in meta.eras[1] and "edges" not in meta.eras[0]
    assert Grid.of_era(meta, 1).dim_lengths(0) == (3, 1, 2)
    whole = Grid.whole(meta)
    assert whole.dim_lengths(0) == (2, 1, 3, 1, 2) and whole.describe()[0]["kind"] == "rectilinear"
