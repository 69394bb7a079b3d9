"""The chunk-grid model (``plan/grid.py``), the placement grid (``plan/placement.py``) and the
slab layout of gridless arrays (``plan/slabs.py``) against brute-force models: every element
painted with the index of the chunk holding it, every source chunk's box compared with the
global chunk it becomes, every slab chunk tested against a box element by element. Written for
the mutation run (``./dev mutate plan-new``); pure and fast.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.plan import Selection
from refstore.plan.grid import Grid, edges_from_json, edges_to_json, rle_encode, slab_lengths
from refstore.plan.placement import dimension_edges
from refstore.plan.slabs import SlabLayout, coarse_base


# --------------------------------------------------------------------------- the model
def _paint(lengths: list[int]) -> np.ndarray[Any, Any]:
    """Each element's chunk index, one element at a time."""
    out: list[int] = []
    for i, n in enumerate(lengths):
        out += [i] * n
    return np.asarray(out, np.int64)


dim_st = st.one_of(
    st.tuples(st.integers(0, 30), st.integers(1, 7), st.none()),
    st.tuples(st.just(0), st.integers(1, 7), st.lists(st.integers(1, 7), min_size=1, max_size=8)),
)
"""One dimension: (extent, chunk, None) regular, or (ignored, chunk, lengths) rectilinear (each
length at most the chunk: lengths are clipped below)."""


def _grid(dims: list[tuple[int, int, list[int] | None]]) -> tuple[Grid, list[list[int]]]:
    shape, chunks, lengths, model = [], [], [], []
    for n, c, ls in dims:
        if ls is None:
            shape.append(n)
            lengths.append(None)
            full = [c] * (n // c) + ([n % c] if n % c else [])
            model.append(full)
        else:
            ls = [min(x, c) for x in ls]
            shape.append(sum(ls))
            lengths.append(tuple(ls))
            model.append(ls)
        chunks.append(c)
    return Grid(tuple(shape), tuple(chunks), tuple(lengths)), model


@settings(max_examples=120, deadline=None)
@given(dims=st.lists(dim_st, min_size=1, max_size=3), data=st.data())
def test_grid_answers_as_the_painted_elements(dims: list[tuple[int, int, list[int] | None]], data: Any) -> None:
    grid, model = _grid(dims)
    painted = [_paint(m) for m in model]
    assert grid.ndim == len(dims)
    assert grid.regular == all(ls is None for _, _, ls in dims)
    for d, m in enumerate(model):
        assert grid.nchunks(d) == len(m)
        assert grid.dim_lengths(d) == tuple(m)
        assert grid.rectilinear(d) == (dims[d][2] is not None)
        n = grid.shape[d]
        if n:
            pos = np.arange(n)
            assert grid.index(d, pos).tolist() == painted[d].tolist()
            p = data.draw(st.integers(0, n - 1))
            assert grid.index_of(d, p) == int(painted[d][p])
            assert isinstance(grid.index_of(d, p), int)
        # the chunk describes itself as regular exactly when its lengths are full chunks then one short
        desc = grid.describe()[d]
        if dims[d][2] is None:
            assert desc == {"kind": "regular", "chunk": grid.chunks[d]}
        elif list(m) == slab_lengths(sum(m), m[0]):
            assert desc == {"kind": "regular", "chunk": m[0]}
        else:
            assert desc == {"kind": "rectilinear", "count": len(m), "chunks": rle_encode(m)}
    # boxes of every chunk: where its painted elements are
    keys = np.array(list(np.ndindex(*[len(m) for m in model])), np.int64).reshape(-1, grid.ndim)
    origin, size = grid.boxes(keys)
    for i, key in enumerate(keys.tolist()):
        for d, k in enumerate(key):
            where = np.flatnonzero(painted[d] == k)
            assert origin[i, d] == where[0] and size[i, d] == len(where)
            assert size[i, d] <= grid.chunks[d]
    # a box and a stepped selection: the chunks holding its elements
    lo = [data.draw(st.integers(0, max(0, n))) for n in grid.shape]
    hi = [data.draw(st.integers(a, n)) if a <= n else a for a, n in zip(lo, grid.shape, strict=True)]
    step = [data.draw(st.integers(1, 4)) for _ in grid.shape]
    ranges = grid.box_ranges(lo, hi)
    if any(b <= a for a, b in zip(lo, hi, strict=True)):
        assert ranges is None
        return
    assert ranges == [(int(p[a]), int(p[b - 1])) for p, a, b in zip(painted, lo, hi, strict=True)]
    sel = Selection(tuple(lo), tuple(hi), tuple(step), ())
    assert grid.chunk_ranges(sel) == ranges
    needed = grid.needed(sel)
    for d, (a, b, s) in enumerate(zip(lo, hi, step, strict=True)):
        assert needed[d].tolist() == sorted({int(painted[d][x]) for x in range(a, b, s)})


def test_grid_of_zero_chunks_and_its_refusals() -> None:
    g = Grid((0, 4), (0, 2))
    assert g.nchunks(0) == 0 and g.nchunks(1) == 2 and g.dim_lengths(0) == ()
    assert g.describe() == [{"kind": "regular", "chunk": 0}, {"kind": "regular", "chunk": 2}]
    assert g.box_ranges((0, 0), (0, 4)) is None
    assert Grid((3,), (3,), ((3,),)).describe() == [{"kind": "regular", "chunk": 3}]
    assert Grid((5,), (3,), ((3, 2),)).describe() == [{"kind": "regular", "chunk": 3}]
    assert Grid((5,), (3,), ((2, 3),)).describe()[0]["kind"] == "rectilinear"
    assert Grid((6,), (3,), ((3, 1, 2),)).describe()[0]["kind"] == "rectilinear"
    for lengths in [(3, 3), (4, 1), (5, 0), (6, -1)]:  # a sum other than the extent, a length over the chunk, <= 0
        msg = f"dimension 0: chunk lengths {list(lengths)} do not fit extent 5"
        with pytest.raises(ValueError, match=re.escape(msg)):
            Grid((5,), (3 if lengths == (4, 1) else 6,), (lengths,))
    with pytest.raises(ValueError, match=r"dimension 1: chunk lengths \[1, 1, 1, 1, 1, 1, 1, 1\] do not fit"):
        Grid((2, 10), (2, 1), (None, (1,) * 9))  # the message shows the first 8


def test_edges_json_round_trips() -> None:
    edges = ((10, 10, 1), None, (2,))
    assert edges_to_json(edges) == [[[10, 2], 1], None, [2]]
    assert edges_from_json(edges_to_json(edges)) == edges
    assert edges_from_json(None) == () and edges_from_json([]) == ()
    assert edges_from_json([None, [[3, 2]]]) == (None, (3, 3))


# --------------------------------------------------------------------------- placement grid
slabs_st = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 12)), min_size=1, max_size=5)
"""Slabs along one dimension: (gap before it, extent)."""


@settings(max_examples=200, deadline=None)
@given(slabs=slabs_st, chunk=st.integers(1, 5), tail=st.integers(0, 4))
def test_dimension_edges_give_each_source_chunk_one_global_chunk(
    slabs: list[tuple[int, int]], chunk: int, tail: int
) -> None:
    placed, at = [], 0
    for gap, n in slabs:
        placed.append((at + gap, n))
        at += gap + n
    extent = at + tail
    lengths, bases = dimension_edges(placed, extent, chunk)
    aligned = all(o % chunk == 0 and ((o + n) % chunk == 0 or o + n == extent) for o, n in placed)
    assert (lengths is None) == aligned
    grid = Grid((extent,), (chunk,), () if lengths is None else (lengths,))
    if lengths is not None:
        assert sum(lengths) == extent and all(0 < x <= chunk for x in lengths)
    covered = np.zeros(extent, bool)
    for (o, n), base in zip(placed, bases, strict=True):
        covered[o : o + n] = True
        for k in range(-(-n // chunk)):  # source chunk k of the slab is global chunk base + k
            box = (o + k * chunk, min(chunk, n - k * chunk))
            origin, size = grid.boxes(np.array([[base + k]]))
            assert (int(origin[0, 0]), int(size[0, 0])) == box
    # a stretch no slab covers is cut into chunks of ``chunk`` from its start
    if lengths is not None:
        starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        for a, b in itertools.pairwise(starts):
            if not covered[a]:
                run = a
                while run > 0 and not covered[run - 1]:
                    run -= 1
                assert (a - run) % chunk == 0 and (b - a == chunk or b == extent or covered[b])


# --------------------------------------------------------------------------- slab layout
def _layout() -> SlabLayout:
    # chunks (3, 4); three slabs at arbitrary offsets (a brick layout), given out of order
    return SlabLayout.of((12, 20), (3, 4), [("c.tif", (6, 9), (5, 11)), ("a.tif", (0, 0), (6, 10)),
                                            ("b.tif", (1, 10), (4, 7))])  # fmt: skip


def test_slab_layout_orders_and_checks_its_slabs() -> None:
    lay = _layout()
    assert lay.sources == ("a.tif", "b.tif", "c.tif") and lay.ndim == 2
    assert lay.offset.tolist() == [[0, 0], [1, 10], [6, 9]] and lay.extent.tolist() == [[6, 10], [4, 7], [5, 11]]
    assert lay.offset.dtype == np.int64 and lay.extent.dtype == np.int64
    with pytest.raises(ValueError, match=re.escape("slab placements must be (2, 2), not (2, 1)")):
        SlabLayout((4, 4), (2, 2), ("a", "b"), np.zeros((2, 1), np.int64), np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match=re.escape("slab placements must be (2, 2), not (1, 2)")):
        SlabLayout((4, 4), (2, 2), ("a", "b"), np.zeros((2, 2), np.int64), np.zeros((1, 2), np.int64))
    with pytest.raises(ValueError, match=r"^slab sources must be sorted$"):
        SlabLayout((4, 4), (2, 2), ("b", "a"), np.zeros((2, 2), np.int64), np.zeros((2, 2), np.int64))
    assert coarse_base((7, 9, 5), (3, 4, 0)) == (2, 2, 0)
    empty = SlabLayout.of((4,), (2,), [])
    assert empty.offset.shape == (0, 1) and empty.sources == ()


def test_slab_of_rows_by_source_column() -> None:
    lay = _layout()
    col = pa.array(["c.tif", "a.tif", "zzz", "a.tif", "b.tif"])
    assert lay.slab_of(col).tolist() == [2, 0, -1, 0, 1]
    assert lay.slab_of(pa.chunked_array([col[:2], col[2:]])).tolist() == [2, 0, -1, 0, 1]
    assert lay.slab_of(col.dictionary_encode()).tolist() == [2, 0, -1, 0, 1]
    none = lay.slab_of(pa.array([], pa.string()))
    assert none.tolist() == [] and none.dtype == np.int64  # indices into the placements
    rows = pa.table({"source": col[:2], "k0": pa.array([1, 0], pa.int32()), "k1": pa.array([2, 1], pa.int32())})
    origin, size = lay.rows_boxes(rows)
    # c.tif chunk (1, 2): origin (6 + 3, 9 + 8), size (min(3, 5 - 3), min(4, 11 - 8)); a.tif (0, 1)
    assert origin.tolist() == [[9, 17], [0, 4]] and size.tolist() == [[2, 3], [3, 4]]
    with pytest.raises(ValueError, match=r"^a chunk row of a source with no placement$"):
        lay.boxes(np.array([0, -1]), np.array([[0, 0], [0, 0]]))
    scalar = SlabLayout.of((), (), [("a", (), ())])
    o, s = scalar.rows_boxes(pa.table({"source": ["a", "a"]}))
    assert o.shape == s.shape == (2, 0)


@settings(max_examples=100, deadline=None)
@given(box=st.tuples(*[st.integers(0, 21)] * 4), step=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_slab_chunks_touching_a_box_are_within_its_key_ranges(box: tuple[int, ...], step: tuple[int, int]) -> None:
    lay = _layout()
    y0, y1, x0, x1 = box
    lo, hi = (min(y0, 12), min(x0, 20)), (min(max(y0, y1), 12), min(max(x0, x1), 20))
    ranges = lay.key_ranges(lo, hi)
    if hi[0] <= lo[0] or hi[1] <= lo[1]:
        assert ranges is None
        return
    assert ranges is not None
    slab, ks, gs = [], [], []
    for i in range(len(lay.sources)):
        for k0 in range(-(-int(lay.extent[i, 0]) // 3)):
            for k1 in range(-(-int(lay.extent[i, 1]) // 4)):
                slab.append(i)
                ks.append((k0, k1))
                gs.append(coarse_base(lay.offset[i].tolist(), lay.chunks))
    origin, size = lay.boxes(np.asarray(slab), np.asarray(ks))
    sel = Selection(lo, hi, step, ())
    touch = lay.touching(origin, size, sel)
    for j in range(len(slab)):
        cells = [range(origin[j, d], origin[j, d] + size[j, d]) for d in range(2)]
        picked = [[x for x in c if lo[d] <= x < hi[d] and (x - lo[d]) % step[d] == 0] for d, c in enumerate(cells)]
        assert bool(touch[j]) == all(picked), (j, cells)
        inside_box = all(any(lo[d] <= x < hi[d] for x in c) for d, c in enumerate(cells))
        if inside_box:  # every chunk meeting the box has its coarse key in the ranges
            g = [gs[j][d] + ks[j][d] for d in range(2)]
            assert all(a <= x <= b for x, (a, b) in zip(g, ranges, strict=True)), (g, ranges)
    for d, (a, b) in enumerate(ranges):
        c = lay.chunks[d]
        assert a == max(0, lo[d] // c - 1) and b == (hi[d] - 1) // c


# --------------------------------------------------------------------------- mosaic placement against GDAL
_TILES = {  # name: (row, col, rows, cols) on a 30 m grid; c.tif leaves gaps around it
    "a.tif": (0, 0, 20, 30),
    "b.tif": (0, 30, 20, 17),
    "c.tif": (25, 7, 10, 12),
    "d.tif": (-3, 47, 9, 5),
}


@pytest.fixture(scope="module")
def gdal_tiles(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], dict[str, Any]]:
    """Four GeoTIFF tiles (tifffile, GeoTIFF tags), scanned, and GDAL's mosaic of them
    (``gdalbuildvrt``: the VRT's GeoTransform, size and each source's DstRect)."""
    import shutil
    import subprocess
    import xml.etree.ElementTree as ET

    import tifffile

    from refstore.fixtures.mosaic import projected_geotags
    from refstore.plan.concat import SourceSlab
    from refstore.scan.tiff import TiffScanner

    if shutil.which("gdalbuildvrt") is None:
        pytest.skip("GDAL's tools are not installed")
    d = tmp_path_factory.mktemp("gdal_tiles")
    paths = []
    for name, (r, c, h, w) in _TILES.items():
        p = d / name
        tags = projected_geotags(500000.0 + c * 30.0, 4650000.0 - r * 30.0, 30.0, 32633)
        tifffile.imwrite(p, np.ones((h, w), "<u2"), tile=(16, 16), extratags=tags, metadata=None)
        paths.append(p)
    vrt = d / "m.vrt"
    subprocess.run(["gdalbuildvrt", "-q", str(vrt), *map(str, paths)], check=True, capture_output=True)
    root = ET.parse(vrt).getroot()
    gdal: dict[str, Any] = {
        "transform": [float(v) for v in (root.findtext("GeoTransform") or "").split(",")],
        "shape": (int(root.get("rasterYSize", 0)), int(root.get("rasterXSize", 0))),
        "offsets": {},
    }
    for src in root.iter("SimpleSource"):
        rect = src.find("DstRect")
        assert rect is not None
        name = (src.findtext("SourceFilename") or "").rsplit("/", 1)[-1]
        gdal["offsets"][name] = (int(float(rect.get("yOff", 0))), int(float(rect.get("xOff", 0))))
    slabs = [SourceSlab(p.name, i, {a.name: a for a in TiffScanner()(str(p)).arrays}) for i, p in enumerate(paths)]
    return slabs, gdal


def test_mosaic_places_tiles_where_gdal_does(gdal_tiles: tuple[list[Any], dict[str, Any]]) -> None:
    from refstore.plan.mosaic import make_mosaic_plan

    slabs, gdal = gdal_tiles
    mp = make_mosaic_plan(slabs)
    grid = mp.grids["image"]
    assert list(grid.transform) == pytest.approx(gdal["transform"], rel=1e-12)
    assert grid.shape == gdal["shape"] and mp.plan.arrays["image"].shape == gdal["shape"]
    assert dict(grid.offsets) == gdal["offsets"]
    assert {loc: off for (loc, name), off in mp.plan.placements.items() if name == "image"} == gdal["offsets"]
    assert mp.plan.arrays["image"].attrs["transform"]["value"] == pytest.approx(gdal["transform"], rel=1e-12)
    covered = np.zeros(gdal["shape"], bool)
    for name, (r, c) in gdal["offsets"].items():
        covered[r : r + _TILES[name][2], c : c + _TILES[name][3]] = True
    painted = np.zeros(gdal["shape"], np.int64)
    for _date, boxes in mp.gaps:
        for a, b, c, e in boxes:
            painted[a:b, c:e] += 1
    np.testing.assert_array_equal(painted, (~covered).astype(np.int64))
    s = mp.summary()
    assert s == {"tiles": 4, "shape": list(gdal["shape"]), "transform": list(grid.transform), "crs": "EPSG:32633",
                 "dates": 0, "gap_pixels": int((~covered).sum()), "dropped": []}  # fmt: skip
    assert mp.plan.order == tuple(sorted(_TILES)) and mp.dates == () and mp.plan.concat_dim is None


# --------------------------------------------------------------------------- mosaic refusals and levels
def _img(name: str, t: Any, rows: int = 8, cols: int = 8, **attrs: Any) -> Any:
    from refstore.scan._types import ArrayMeta

    sfx = "" if name == "image" else "_" + name
    a = {"transform": {"type": "<f8", "value": list(t), "shape": [len(t)]}, **attrs}
    return ArrayMeta(name, (f"y{sfx}", f"x{sfx}"), (rows, cols), (4, 4), "<u2", 0, (), a)


def _slab(loc: str, order: int, *arrays: Any, date: float | None = None) -> Any:
    from refstore.plan.concat import SourceSlab

    return SourceSlab(loc, order, {a.name: a for a in arrays}, sort_value=date)


def test_mosaic_refusals_name_the_files() -> None:
    import dataclasses

    from refstore.errors import PlanError
    from refstore.plan.mosaic import Footprint, common_grid, make_mosaic_plan

    with pytest.raises(PlanError, match=r"^a mosaic of 'overview_1' needs at least one tile$"):
        common_grid([], level="overview_1")
    flat = Footprint("f.tif", (0.0, 1.0, 2.0, 0.0, 0.5, 1.0), 2, 2)  # det 1*1 - 2*0.5 = 0
    msg = "f.tif: 'image' has a degenerate transform [0.0, 1.0, 2.0, 0.0, 0.5, 1.0]"
    with pytest.raises(PlanError, match=re.escape(msg)):
        common_grid([flat])
    with pytest.raises(PlanError, match=re.escape("z.tif: 'image' has a degenerate transform")):
        common_grid([Footprint("z.tif", (0.0, 0.0, 0.0, 0.0, 0.0, 0.0), 2, 2)])
    t = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    a = _slab("a.tif", 0, _img("image", t))
    empty = make_mosaic_plan([])
    assert empty.plan.order == () and empty.grids == {} and empty.crs is None and empty.summary()["tiles"] == 0
    bad = _img("image", t)
    with pytest.raises(PlanError, match=r"^b\.tif: its image cannot join a mosaic: no decoder$"):
        make_mosaic_plan([a, _slab("b.tif", 1, dataclasses.replace(bad, status="unsupported", reason="no decoder"))])
    with pytest.raises(PlanError, match=r"^b\.tif: no georeferencing"):
        make_mosaic_plan([a, _slab("b.tif", 1, _img("image", t[:5]))])
    with pytest.raises(PlanError, match=r"^b\.tif: no 'image' array \(arrays: none\)"):
        make_mosaic_plan([a, _slab("b.tif", 1)])
    with pytest.raises(PlanError, match=r"^a\.tif: no 'time' value \(date\) to stack its mosaic by$"):
        make_mosaic_plan([a], "time")
    odd = _img("image", t)
    with pytest.raises(PlanError, match=r"^b\.tif: no georeferencing"):  # two y axes: no raster
        make_mosaic_plan([a, _slab("b.tif", 1, dataclasses.replace(odd, dims=("y", "y_2")))])


def test_mosaic_crs_identity_and_shown_name() -> None:
    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)

    def pair(a: dict[str, Any], b: dict[str, Any]) -> Any:
        return make_mosaic_plan([_slab("a.tif", 0, _img("image", t0, **a)), _slab("b.tif", 1, _img("image", t1, **b))])

    def two(**attrs: Any) -> Any:
        return pair(attrs, attrs)

    def s(v: str) -> dict[str, str]:
        return {"type": "str", "value": v}

    assert two().crs is None
    assert two(crs=s("EPSG:3031")).crs == "EPSG:3031"
    assert two(crs_geokeys=s("K=1"), crs_citation=s("Albers")).crs == "Albers"
    assert two(crs_geokeys=s("K=1")).crs == "user-defined"
    assert two(crs_citation=s("My grid [x]")).crs == "My grid"
    msg = "b.tif and a.tif have different CRS (Albers [K=2] and Albers [K=1])"
    albers = s("Albers")
    with pytest.raises(PlanError, match=re.escape(msg)):
        pair({"crs_geokeys": s("K=1"), "crs_citation": albers}, {"crs_geokeys": s("K=2"), "crs_citation": albers})
    with pytest.raises(PlanError, match=re.escape("b.tif and a.tif have different CRS (citation:X and none)")):
        pair({}, {"crs_citation": s("X")})


def test_mosaic_levels_dropped_or_kept_with_the_reason() -> None:
    import dataclasses

    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.scan._types import ArrayMeta

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    o0, o1 = (0.0, 2.0, 0.0, 0.0, 0.0, -2.0), (8.0, 2.0, 0.0, 0.0, 0.0, -2.0)
    wide = (6.0, 2.0, 0.0, 0.0, 0.0, -2.0)  # b's overview starting inside a's: its pixels do not nest
    mask = _img("mask", t0)
    tiles = [
        _slab("a.tif", 0, _img("image", t0), _img("overview_1", o0, 4, 4), _img("overview_2", o0, 4, 4),
              dataclasses.replace(mask, attrs={}), _img("overview_3", o0, 4, 4),
              ArrayMeta("band", ("band",), (1,), (1,), "<i4", None)),
        _slab("b.tif", 1, _img("image", t1), _img("overview_1", o1, 4, 4), _img("overview_2", wide, 4, 4),
              dataclasses.replace(mask, attrs={}), dataclasses.replace(_img("overview_3", o1, 4, 4), status="failed",
                                                                       reason="unreadable"),
              ArrayMeta("band", ("band",), (1,), (1,), "<i4", None)),
    ]  # fmt: skip
    mp = make_mosaic_plan(tiles)
    assert mp.plan.arrays["overview_1"].shape == (4, 8)
    assert mp.plan.placements[("b.tif", "overview_1")] == (0, 4)
    assert mp.plan.view[("b.tif", "overview_1")] == (0, (0, 4))
    assert dict(mp.dropped) == {"overview_2": "a.tif and b.tif overlap in 'overview_2' (its pixels do not nest in the "
                                              "image's)", "mask": "a.tif: 'mask' has no transform"}  # fmt: skip
    assert mp.plan.arrays["overview_3"].status == "failed"
    assert ("a.tif", "overview_3") not in mp.plan.placements
    # not a raster: taken once from the first tile
    assert mp.plan.placements[("a.tif", "band")] == (0,) and ("b.tif", "band") not in mp.plan.placements
    assert mp.plan.view[("a.tif", "band")] == (0, (0,))
    assert [a for a, _ in mp.dropped] == ["mask", "overview_2"]  # in name order, after the image
    assert mp.summary()["dropped"] == [{"array": a, "reason": r} for a, r in mp.dropped]


# --------------------------------------------------------------------------- the whole grid of an array with eras
def test_whole_grid_joins_fill_before_the_first_era_and_each_eras_chunks() -> None:
    """A 2-d array missing from the first file (3 records), then on chunks of 2 (4 records), then
    of 3 (2 records): the whole grid along time is the fill stretch on the first era's chunk
    size, then each era's chunks (by hand: 2, 1 | 2, 2 | 2), the codec shape the largest chunk;
    the other dimension stays regular. Without eras it is the array's own grid."""
    from refstore.plan import SourceSlab, make_plan
    from refstore.scan._types import ArrayMeta

    def x(n: int, c: int) -> ArrayMeta:
        return ArrayMeta("x", ("time", "y"), (n, 5), (c, 2), "<i4", -1)

    def t(n: int) -> ArrayMeta:
        return ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)

    slabs = [SourceSlab("s0", 0, {"time": t(3)}, sort_value=0.0, sort_units="u"),
             SourceSlab("s1", 1, {"time": t(4), "x": x(4, 2)}, sort_value=1.0, sort_units="u"),
             SourceSlab("s2", 2, {"time": t(2), "x": x(2, 3)}, sort_value=2.0, sort_units="u")]  # fmt: skip
    meta = make_plan(slabs, "time").arrays["x"]
    assert [(e["start"], e["stop"]) for e in meta.eras] == [(3, 7), (7, 9)]
    whole = Grid.whole(meta)
    assert whole.dim_lengths(0) == (2, 1, 2, 2, 2) and whole.chunks == (3, 2)
    assert not whole.rectilinear(1) and whole.dim_lengths(1) == (2, 2, 1)
    one = make_plan(slabs[:2], "time").arrays["x"]
    assert [(e["start"], e["stop"]) for e in one.eras] == [(3, 7)]
    assert Grid.whole(one).dim_lengths(0) == (2, 1, 2, 2)
    plain = x(6, 4)
    assert Grid.whole(plain) == Grid.of(plain) == Grid((6, 5), (4, 2))


# --------------------------------------------------------------------------- more mosaic rules
def test_mosaic_pixel_sizes_named_in_the_refusal() -> None:
    from refstore.errors import PlanError
    from refstore.plan.mosaic import Footprint, common_grid

    a = Footprint("a.tif", (0.0, 10.0, 0.0, 0.0, 0.0, -10.0), 4, 4)
    b = Footprint("b.tif", (40.0, 10.5, 0.0, 0.0, 0.0, -10.0), 4, 4)
    with pytest.raises(PlanError) as e:
        common_grid([a, b])
    assert str(e.value) == ("b.tif and a.tif have different pixel sizes for 'image' (10.5 x -10 and 10 x -10); a "
                            "mosaic needs one pixel grid")  # fmt: skip
    r = Footprint("r.tif", (0.0, 1.0, 0.25, 0.0, 0.5, -1.0), 4, 4)
    for bad, shown in [((0.0, 1.0, 0.25, 0.0, 0.0, -1.0), "[1, 0.25, 0, -1]"),
                       ((0.0, 1.0, 0.0, 0.0, 0.5, -1.0), "[1, 0, 0.5, -1]"),
                       ((0.0, 2.0, 0.25, 0.0, 0.5, -3.0), "[2, 0.25, 0.5, -3]")]:  # fmt: skip
        with pytest.raises(PlanError) as e:
            common_grid([r, Footprint("s.tif", bad, 4, 4)])
        assert f"for 'image' ({shown} and [1, 0.25, 0.5, -1])" in str(e.value)


def test_mosaic_structure_differences_are_named() -> None:
    import dataclasses

    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    a = _img("image", t0)
    b = _img("image", t1)
    agree = "tiles of one mosaic must agree in dtype, bands and nodata"
    for what, other in [("dtype", dataclasses.replace(b, dtype="<i2")),
                        ("dimensions", dataclasses.replace(b, dims=("y", "x_1"))),
                        ("nodata", dataclasses.replace(b, fill_value=7))]:  # fmt: skip
        with pytest.raises(PlanError) as e:
            make_mosaic_plan([_slab("a.tif", 0, a), _slab("b.tif", 1, other)])
        assert str(e.value) == f"b.tif and a.tif: 'image' has a different {what}; {agree}"
    # a different layout is kept per tile: the key cell is the gcd of the block shapes
    for other, cell in [(dataclasses.replace(b, chunks=(6, 4)), (2, 4)),
                        (dataclasses.replace(b, short_edge=True), a.chunks),
                        (dataclasses.replace(b, codecs=({"id": "zlib"},)), a.chunks)]:  # fmt: skip
        g = make_mosaic_plan([_slab("a.tif", 0, a), _slab("b.tif", 1, other)]).plan.arrays["image"]
        assert g.cell == cell and g.chunks == a.chunks, other
    assert make_mosaic_plan([_slab("a.tif", 0, a), _slab("b.tif", 1, b)]).plan.arrays["image"].cell == ()
    banded = [dataclasses.replace(m, dims=("band", *m.dims), shape=(n, *m.shape), chunks=(1, *m.chunks))
              for m, n in ((a, 3), (b, 4))]  # fmt: skip
    with pytest.raises(PlanError, match=r"^b\.tif and a\.tif: 'image' has a different bands; "):
        make_mosaic_plan([_slab("a.tif", 0, banded[0]), _slab("b.tif", 1, banded[1])])
    # an overview that differs: that level is dropped with the reason
    o0, o1 = (0.0, 2.0, 0.0, 0.0, 0.0, -2.0), (8.0, 2.0, 0.0, 0.0, 0.0, -2.0)
    ov_b = dataclasses.replace(_img("overview_1", o1, 4, 4), dtype="<f4")
    mp = make_mosaic_plan([_slab("a.tif", 0, a, _img("overview_1", o0, 4, 4)), _slab("b.tif", 1, b, ov_b)])
    assert mp.dropped == (("overview_1", f"b.tif and a.tif: 'overview_1' has a different dtype; {agree}"),)


@pytest.mark.parametrize(("loser", "winner"), [((16, 0), (0, 0)), ((0, 16), (0, 0)), ((0, 0), (16, 0)),
                                                ((0, 0), (0, 16))])  # fmt: skip
def test_prefer_refuses_a_loser_reaching_beyond_the_winner_on_any_side(
    loser: tuple[int, int], winner: tuple[int, int]
) -> None:
    """A partial overlap is refused whichever side the losing tile sticks out of the chosen one."""
    from refstore.errors import PlanError
    from refstore.plan.concat import SourceSlab
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.plan.series_order import parse_prefer

    def tile(loc: str, rc: tuple[int, int], order: int, mtime: int) -> SourceSlab:
        t = (float(rc[1]), 1.0, 0.0, -float(rc[0]), 0.0, -1.0)
        return SourceSlab(loc, order, {"image": _img("image", t, 32, 32)}, mtime_ns=mtime)

    with pytest.raises(PlanError, match=r"--prefer newest chose w\.tif, but l\.tif extends beyond it"):
        make_mosaic_plan([tile("l.tif", loser, 0, 1), tile("w.tif", winner, 1, 2)], prefer=parse_prefer(["newest"]))
    inside = make_mosaic_plan([tile("l.tif", (0, 0), 0, 1), tile("w.tif", (0, 0), 1, 2)],
                              prefer=parse_prefer(["newest"]))  # fmt: skip
    assert [a.location for a in inside.plan.set_aside] == ["l.tif"]


def test_mosaic_places_arrays_without_rows_and_columns_once_per_date() -> None:
    """Arrays that are not rasters: with a concat dimension, the date coordinate (and any array
    along it) from the first tile of each date holding it (dates without one: none); others, and
    everything without a concat dimension, once from the first tile."""
    import dataclasses

    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.scan._types import ArrayMeta

    t = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0)

    def lead(m: ArrayMeta) -> ArrayMeta:
        return dataclasses.replace(m, dims=("time", *m.dims), shape=(1, *m.shape), chunks=(1, *m.chunks))

    stamp = ArrayMeta("stamp", ("time", "k"), (1, 3), (1, 3), "<i4", None)
    band = ArrayMeta("band", ("band",), (2,), (2,), "<i4", None)
    mine = dataclasses.replace(band, attrs={"n": {"type": "str", "value": "first"}})
    tiles = [_slab("d1.tif", 0, lead(_img("image", t)), mine, date=1.0),
             _slab("d2.tif", 1, lead(_img("image", t)), stamp, band, date=2.0),
             _slab("d3.tif", 2, lead(_img("image", t)), stamp, band, date=3.0)]  # fmt: skip
    mp = make_mosaic_plan(tiles, "time")
    p = mp.plan
    assert p.arrays["stamp"].shape == (3, 3) and p.arrays["stamp"].dims == ("time", "k")
    assert ("d1.tif", "stamp") not in p.placements  # the first date has none
    assert p.placements[("d2.tif", "stamp")] == (1, 0) and p.placements[("d3.tif", "stamp")] == (2, 0)
    assert p.view[("d2.tif", "stamp")] == (0, (1, 0)) and p.view[("d3.tif", "stamp")] == (0, (2, 0))
    assert p.arrays["band"] is mine  # no time dimension: from the first tile, once
    assert p.placements[("d1.tif", "band")] == (0,) and p.view[("d1.tif", "band")] == (0, (0,))
    assert ("d2.tif", "band") not in p.placements
    flat = make_mosaic_plan([_slab("a.tif", 0, _img("image", t), mine),
                             _slab("b.tif", 1, _img("image", (8.0, *t[1:])), band)])  # fmt: skip
    assert flat.plan.arrays["band"] is mine and flat.plan.placements[("a.tif", "band")] == (0,)


# --------------------------------------------------------------------------- edge cases the run found untested
def test_grid_edge_cases() -> None:
    g = Grid((4, 5), (2, 2), ((2, 2),))  # lengths for the first dimension only
    assert g.rectilinear(0) and not g.rectilinear(1) and not g.rectilinear(2)
    assert Grid((10,), (4,), ((3, 3, 4),)).describe()[0]["kind"] == "rectilinear"  # equal, then a longer last
    assert Grid((0,), (2,), ((),)).describe() == [{"kind": "regular", "chunk": 2}]  # no chunk at all


def test_touching_of_scalar_chunks() -> None:
    got = SlabLayout.touching(np.zeros((2, 0), np.int64), np.zeros((2, 0), np.int64), Selection((), (), (), ()))
    assert got.tolist() == [True, True] and got.dtype == np.bool_


def test_mosaic_alignment_rule_on_non_square_blocks() -> None:
    """``require_aligned``: every tile starts on its level's block grid, and ends on it or at the
    mosaic's edge (the rows checked against the mosaic's rows, the columns against its
    columns); blocks of 4 rows by 8 columns."""
    import dataclasses

    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan

    def tile(loc: str, r: int, c: int, rows: int, cols: int, order: int) -> Any:
        m = dataclasses.replace(_img("image", (float(c), 1.0, 0.0, -float(r), 0.0, -1.0), rows, cols), chunks=(4, 8))
        return _slab(loc, order, m)

    # 2 x 2 tiles on a 10-row, 20-column mosaic: the last row and column of tiles end at its edges
    ok = [tile("a", 0, 0, 8, 16, 0), tile("b", 0, 16, 8, 4, 1), tile("c", 8, 0, 2, 16, 2), tile("d", 8, 16, 2, 4, 3)]
    mp = make_mosaic_plan(ok, require_aligned=True)
    assert mp.plan.arrays["image"].shape == (10, 20) and mp.plan.placements[("d", "image")] == (8, 16)
    start = [tile("a", 0, 0, 4, 16, 0), tile("b", 4, 4, 4, 12, 1)]  # b starts on a row block, not a column block
    with pytest.raises(PlanError) as e:
        make_mosaic_plan(start, require_aligned=True)
    assert str(e.value) == ("b: 'image' would sit at element (4, 4) of the mosaic, starting off its 4x8 block grid; "
                            "placements off the block grid are refused with require_aligned")  # fmt: skip
    rows = [tile("a", 0, 0, 6, 8, 0), tile("b", 0, 8, 8, 8, 1)]  # a ends at row 6 of 8: off the 4-row grid
    with pytest.raises(PlanError, match=r"^a: 'image' would sit at element \(0, 0\) of the mosaic, ending off its 4x8"):
        make_mosaic_plan(rows, require_aligned=True)
    cols = [tile("a", 0, 0, 4, 12, 0), tile("b", 4, 0, 4, 16, 1)]  # a ends at column 12 of 16: off the 8-column grid
    with pytest.raises(PlanError, match=r"^a: 'image' would sit at element \(0, 0\) of the mosaic, ending off"):
        make_mosaic_plan(cols, require_aligned=True)
    assert make_mosaic_plan(cols).plan.arrays["image"].shape == (8, 16)  # without the rule: placed


def test_mosaic_level_tolerance_is_the_callers() -> None:
    from refstore.plan.mosaic import make_mosaic_plan

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    o0, o1 = (0.0, 2.0, 0.0, 0.0, 0.0, -2.0), (8.0 + 0.4, 2.0, 0.0, 0.0, 0.0, -2.0)  # 0.2 overview pixels off
    tiles = [_slab("a", 0, _img("image", t0), _img("overview_1", o0, 4, 4)),
             _slab("b", 1, _img("image", t1), _img("overview_1", o1, 4, 4))]  # fmt: skip
    assert "overview_1" in dict(make_mosaic_plan(tiles).dropped)
    loose = make_mosaic_plan(tiles, tolerance=0.3)
    assert "overview_1" in loose.plan.arrays and loose.plan.placements[("b", "overview_1")] == (0, 4)


def test_complete_grid_keys_every_array_of_a_plan() -> None:
    """Arrays that are not ok get zero keys; a dimension of chunk 0 keeps base 0 and the next
    dimension is still gridded; after a gridless array the next one is still keyed."""
    import dataclasses

    from refstore.plan.concat import Plan, SourceSlab
    from refstore.plan.placement import complete_grid
    from refstore.scan._types import ArrayMeta

    def meta(name: str, shape: tuple[int, ...], chunks: tuple[int, ...], **kw: Any) -> ArrayMeta:
        return ArrayMeta(name, tuple(f"d{i}" for i in range(len(shape))), shape, chunks, "<i4", 0, **kw)

    slabs, plan = [], Plan(concat_dim=None, order=("p", "q"))
    plan.arrays["a_brick"] = meta("a_brick", (8, 8), (4, 4))
    plan.arrays["b_zero"] = meta("b_zero", (0, 10), (0, 4))
    plan.arrays["c_bad"] = dataclasses.replace(meta("c_bad", (4, 4), (2, 2)), status="failed", reason="x")
    offsets = {"a_brick": ((0, 0), (2, 4)), "b_zero": ((0, 0), (0, 5)), "c_bad": ((0, 0), (2, 2))}
    shapes = {"a_brick": ((4, 4), (4, 4)), "b_zero": ((0, 5), (0, 5)), "c_bad": ((2, 2), (2, 2))}
    for i, loc in enumerate(("p", "q")):
        slabs.append(SourceSlab(loc, i, {n: meta(n, shapes[n][i], plan.arrays[n].chunks) for n in offsets}))
        for n, offs in offsets.items():
            plan.placements[(loc, n)] = offs[i]
            plan.view[(loc, n)] = (0, offs[i])
    complete_grid(plan, slabs)
    assert plan.arrays["a_brick"].gridless and plan.arrays["a_brick"].edges == ()
    assert plan.keys[("q", "a_brick")] == (0, (0, 1))  # coarse: (2 // 4, 4 // 4)
    assert plan.keys[("p", "c_bad")] == (0, (0, 0)) and plan.keys[("q", "c_bad")] == (0, (0, 0))
    zero = plan.arrays["b_zero"]
    assert plan.keys[("p", "b_zero")] == (0, (0, 0)) and plan.keys[("q", "b_zero")] == (0, (0, 2))
    assert zero.edges == (None, (4, 1, 4, 1)) and not zero.gridless


# --------------------------------------------------------------------------- the plan-new survivors of make_mosaic_plan
def _at(loc: str, rc: tuple[int, int], size: int, order: int, mtime: int = -1, date: float | None = None,
        *extra: Any) -> Any:  # fmt: skip
    """A tile whose top-left pixel is (row, col) of a 1-unit grid, ``size`` pixels square."""
    from refstore.plan.concat import SourceSlab

    t = (float(rc[1]), 1.0, 0.0, -float(rc[0]), 0.0, -1.0)
    arrays = {"image": _img("image", t, size, size), **{a.name: a for a in extra}}
    return SourceSlab(loc, order, arrays, sort_value=date, mtime_ns=mtime)


def _shared(a: tuple[int, int, int], b: tuple[int, int, int]) -> str:
    """The rows and columns two tiles ``(row, col, size)`` share, painted on a numpy canvas."""
    canvas = np.zeros((2, 64, 64), bool)
    for k, (r, c, n) in enumerate((a, b)):
        canvas[k, r : r + n, c : c + n] = True
    rows, cols = np.nonzero(canvas[0] & canvas[1])
    return f"rows {rows.min()}:{rows.max() + 1}, cols {cols.min()}:{cols.max() + 1} of the mosaic"


def test_overlap_refusals_are_whole_lines_naming_the_shared_pixels() -> None:
    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.plan.series_order import parse_prefer

    # the first tile in order starts lower and further right than the second
    a, b = _at("a.tif", (4, 6), 8, 0, 1), _at("b.tif", (0, 0), 8, 1, 2)
    where = _shared((4, 6, 8), (0, 0, 8))
    assert where == "rows 4:8, cols 6:8 of the mosaic"
    msg = (f"a.tif and b.tif overlap ({where}); a mosaic places each pixel from one tile: remove one, or scan "
           "with --prefer newest / --prefer GLOB when one lies inside the other")  # fmt: skip
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan([a, b])
    msg = (f"a.tif and b.tif overlap ({where}) and --prefer newest chose b.tif, but a.tif extends beyond it: "
           "setting it aside would lose pixels, and a tile cannot be placed in part")  # fmt: skip
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan([a, b], prefer=parse_prefer(["newest"]))
    # a rule keeping none or both does not decide: the next one is tried
    small, big = _at("s.tif", (0, 0), 8, 0, 1), _at("t.tif", (0, 0), 16, 1, 2)
    for rules in (["zzz*", "newest"], ["*.tif", "newest"], ["!*.tif", "newest"]):
        mp = make_mosaic_plan([small, big], prefer=parse_prefer(rules))
        assert [(x.location, x.kept, x.rule) for x in mp.plan.set_aside] == [("s.tif", "t.tif", "newest")], rules
        assert mp.plan.order == ("t.tif",)
    msg = (f"s.tif and t.tif overlap ({_shared((0, 0, 8), (0, 0, 16))}) and --prefer *.tif --prefer zzz* does not "
           "choose between them")  # fmt: skip
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan([small, big], prefer=parse_prefer(["*.tif", "zzz*"]))


def test_mosaic_by_date_sets_aside_on_every_date_and_records_the_dates() -> None:
    """Tiles stacked by date (an image without the concat dimension: placed by row and column);
    an overlap resolved on each date is recorded for each; the plan records the concat dimension,
    its ordering by coordinate and the dates."""
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.plan.series_order import parse_prefer

    tiles = [_at("d1-old.tif", (0, 0), 8, 0, 1, 1.0), _at("d1.tif", (0, 0), 16, 1, 2, 1.0),
             _at("d2-old.tif", (8, 8), 8, 2, 1, 2.0), _at("d2.tif", (0, 0), 16, 3, 2, 2.0)]  # fmt: skip
    mp = make_mosaic_plan(tiles, "time", prefer=parse_prefer(["newest"]))
    assert [(x.location, x.kept) for x in mp.plan.set_aside] == [("d1-old.tif", "d1.tif"), ("d2-old.tif", "d2.tif")]
    assert mp.plan.order == ("d1.tif", "d2.tif") and mp.dates == (1.0, 2.0)
    assert mp.plan.concat_dim == "time" and mp.plan.ordered_by == "coordinate"
    assert mp.plan.arrays["image"].shape == (16, 16)
    assert mp.plan.placements[("d1.tif", "image")] == (0, 0) == mp.plan.placements[("d2.tif", "image")]
    flat = make_mosaic_plan([_at("a.tif", (0, 0), 8, 0), _at("b.tif", (0, 8), 8, 1)])
    assert flat.plan.concat_dim is None and flat.plan.ordered_by is None and flat.dates == ()
    empty = make_mosaic_plan([], "time")
    assert empty.plan.concat_dim == "time" and empty.plan.order == ()


def test_mosaic_transform_attribute_and_band_axis() -> None:
    """The mosaic's ``transform`` attribute has the scanner's encoded form (``<f8``, shape 6) and
    the top-left-most corner (numpy's minimum over the tiles' corners); a band axis is placed at 0."""
    import dataclasses

    from refstore.plan.mosaic import make_mosaic_plan

    corners = [(3.0, 1.0, 0.0, -2.0, 0.0, -1.0), (11.0, 1.0, 0.0, -10.0, 0.0, -1.0)]
    tiles = []
    for i, t in enumerate(corners):
        m = _img("image", t)
        m = dataclasses.replace(m, dims=("band", "y", "x"), shape=(3, 8, 8), chunks=(3, 4, 4))
        tiles.append(_slab(f"{i}.tif", i, m))
    mp = make_mosaic_plan(tiles)
    x0 = float(np.min([c[0] for c in corners]))
    y0 = float(np.max([c[3] for c in corners]))
    img = mp.plan.arrays["image"]
    assert img.attrs["transform"] == {"type": "<f8", "value": [x0, 1.0, 0.0, y0, 0.0, -1.0], "shape": [6]}
    assert img.shape == (3, 16, 16)
    assert mp.plan.placements[("0.tif", "image")] == (0, 0, 0)
    assert mp.plan.placements[("1.tif", "image")] == (0, 8, 8)


def test_mosaic_keeps_going_after_a_non_raster_or_dropped_level() -> None:
    """Levels after a non-raster array or a dropped level (sorted by name after ``image``) are
    still mosaicked; an array with a ``y`` but no ``x`` axis is no raster."""
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.scan._types import ArrayMeta

    def ov(t: tuple[float, ...]) -> Any:
        return _img("overview_1", (t[0], 2.0, 0.0, t[3], 0.0, -2.0), 4, 4)

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    info = ArrayMeta("info", ("k",), (2,), (2,), "<i4", None)
    ycoord = ArrayMeta("lat", ("y",), (8,), (8,), "<f8", None)
    mask = _img("mask", t0)
    tiles = [_slab("a.tif", 0, _img("image", t0), info, ycoord, mask, ov(t0)),
             _slab("b.tif", 1, _img("image", t1), info, ycoord, ov(t1))]  # fmt: skip
    mp = make_mosaic_plan(tiles)
    assert sorted(mp.grids) == ["image", "overview_1"]
    assert mp.plan.placements[("b.tif", "overview_1")] == (0, 4)
    assert mp.dropped == (("mask", "not in every tile (b.tif has none)"),)
    assert mp.plan.arrays["info"] is info and mp.plan.arrays["lat"] is ycoord
    assert mp.plan.placements[("a.tif", "lat")] == (0,) and ("b.tif", "lat") not in mp.plan.placements


def test_mosaic_image_codecs_compare_by_content_and_tolerance_is_the_callers() -> None:
    import dataclasses

    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    a = dataclasses.replace(_img("image", t0), codecs=({"id": "zlib", "level": 6},))
    b = dataclasses.replace(_img("image", t1), codecs=({"level": 6, "id": "zlib"},))
    mp = make_mosaic_plan([_slab("a.tif", 0, a), _slab("b.tif", 1, b)])
    assert mp.plan.arrays["image"].shape == (8, 16)
    off = (8.2, 1.0, 0.0, 0.0, 0.0, -1.0)  # 0.2 pixel off the grid
    tiles = [_slab("a.tif", 0, _img("image", t0)), _slab("b.tif", 1, _img("image", off))]
    msg = (r"^b\.tif: the origin of 'image' is off the pixel grid of a\.tif by \([+-]0, \+0\.2\) pixels \(row, col\); "
           r"a mosaic needs tiles on one grid$")  # fmt: skip
    with pytest.raises(PlanError, match=msg):
        make_mosaic_plan(tiles)
    loose = make_mosaic_plan(tiles, tolerance=0.3)
    assert loose.grids["image"].offsets == {"a.tif": (0, 0), "b.tif": (0, 8)}


def test_mosaic_refusal_lines_in_full_and_image_planned_first() -> None:
    """Refusals are whole lines; the plan lists ``image`` first, then the other arrays by name."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.scan._types import ArrayMeta

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    a = _slab("a.tif", 0, _img("image", t0))
    msg = ("b.tif: no 'image' array (arrays: mask, overview_1); only GeoTIFF tiles with one full-resolution image "
           "form a mosaic")  # fmt: skip
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan([a, _slab("b.tif", 1, _img("mask", t1), _img("overview_1", t1))])
    msg = ("b.tif: no georeferencing (ModelTransformation, or ModelPixelScale and ModelTiepoint); a mosaic places "
           "tiles by their transforms")  # fmt: skip
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan([a, _slab("b.tif", 1, _img("image", t1[:5]))])
    cited = _slab("a.tif", 0, _img("image", t0, crs_citation={"type": "str", "value": "X"}))
    msg = "b.tif and a.tif have different CRS (none and citation:X); a mosaic needs one CRS"
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan([cited, _slab("b.tif", 1, _img("image", t1))])
    band = ArrayMeta("band", ("band",), (2,), (2,), "<i4", None)

    def ov(t: tuple[float, ...]) -> Any:
        return _img("overview_1", (t[0], 2.0, 0.0, t[3], 0.0, -2.0), 4, 4)

    mp = make_mosaic_plan([_slab("a.tif", 0, ov(t0), band, _img("image", t0)),
                           _slab("b.tif", 1, band, ov(t1), _img("image", t1))])  # fmt: skip
    assert list(mp.plan.arrays) == ["image", "band", "overview_1"]


def test_alignment_refusal_says_ending_for_a_tile_starting_on_the_block_grid() -> None:
    """``require_aligned``: a tile starting on a block boundary past the first (col 8, blocks of 4)
    and ending off it (col 14, not the mosaic's edge) is refused as "ending" off the grid."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan

    tiles = [_slab("a.tif", 0, _img("image", (0.0, 1.0, 0.0, 0.0, 0.0, -1.0))),
             _slab("b.tif", 1, _img("image", (8.0, 1.0, 0.0, 0.0, 0.0, -1.0), 8, 6)),
             _slab("c.tif", 2, _img("image", (16.0, 1.0, 0.0, 0.0, 0.0, -1.0)))]  # fmt: skip
    msg = ("b.tif: 'image' would sit at element (0, 8) of the mosaic, ending off its 4x4 block grid; placements off "
           "the block grid are refused with require_aligned")  # fmt: skip
    with pytest.raises(PlanError, match=f"^{re.escape(msg)}$"):
        make_mosaic_plan(tiles, require_aligned=True)


def test_dimension_edges_bases_are_ints_on_the_regular_grid() -> None:
    from refstore.plan.placement import dimension_edges

    lengths, bases = dimension_edges([(0, 8), (8, 8), (16, 5)], 21, 4)
    assert lengths is None and bases == [0, 2, 4] and all(type(b) is int for b in bases)


def test_grid_boxes_of_int32_keys_are_int64_elements() -> None:
    """Keys as Arrow gives them (int32) on a grid past 2^31 elements: origins computed in int64
    (Python's integers as the oracle)."""
    big = Grid((2**33, 10), (2**30, 4), (None, (4, 4, 2)))
    keys = np.asarray([[3, 2], [7, 0]], np.int32)
    origin, size = big.boxes(keys)
    assert origin.dtype == np.int64 and size.dtype == np.int64
    assert origin.tolist() == [[3 * 2**30, 8], [7 * 2**30, 0]] and size.tolist() == [[2**30, 2], [2**30, 4]]


def test_levels_and_arrays_after_a_failed_one_are_still_planned() -> None:
    """A level not ok in some tile is kept as that failure and the next level is still mosaicked;
    complete_grid keys an array sorted after a failed one."""
    import dataclasses

    from refstore.plan.concat import Plan, SourceSlab
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.plan.placement import complete_grid
    from refstore.scan._types import ArrayMeta

    t0, t1 = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0), (8.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    bad = dataclasses.replace(_img("mask", t1), status="unsupported", reason="no decoder")

    def ov(t: tuple[float, ...]) -> Any:
        return _img("overview_1", (t[0], 2.0, 0.0, t[3], 0.0, -2.0), 4, 4)

    mp = make_mosaic_plan([_slab("a.tif", 0, _img("image", t0), _img("mask", t0), ov(t0)),
                           _slab("b.tif", 1, _img("image", t1), bad, ov(t1))])  # fmt: skip
    assert mp.plan.arrays["mask"] is bad and sorted(mp.grids) == ["image", "overview_1"]
    assert mp.plan.placements[("b.tif", "overview_1")] == (0, 4)

    def meta(name: str, **kw: Any) -> ArrayMeta:
        return ArrayMeta(name, ("d0",), (8,), (4,), "<i4", 0, **kw)

    plan = Plan(concat_dim=None, order=("p", "q"))
    plan.arrays["a_bad"] = meta("a_bad", status="failed", reason="x")
    plan.arrays["b_ok"] = meta("b_ok")
    slabs = [SourceSlab(loc, i, {"a_bad": meta("a_bad"), "b_ok": dataclasses.replace(meta("b_ok"), shape=(4,))})
             for i, loc in enumerate(("p", "q"))]  # fmt: skip
    for loc, off in (("p", (0,)), ("q", (4,))):
        for n in ("a_bad", "b_ok"):
            plan.placements[(loc, n)] = off
            plan.view[(loc, n)] = (0, off)
    complete_grid(plan, slabs)
    assert plan.keys[("q", "a_bad")] == (0, (0,)) and plan.keys[("q", "b_ok")] == (0, (1,))


def test_off_grid_refusal_gives_the_row_residual() -> None:
    """A tile 3.2 rows below the first: refused with the residual 0.2 (3.2 less the nearest row)."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import make_mosaic_plan

    tiles = [_slab("a.tif", 0, _img("image", (0.0, 1.0, 0.0, 0.0, 0.0, -1.0))),
             _slab("b.tif", 1, _img("image", (8.0, 1.0, 0.0, -3.2, 0.0, -1.0)))]  # fmt: skip
    residual = 3.2 - round(3.2)
    msg = (rf"^b\.tif: the origin of 'image' is off the pixel grid of a\.tif by \({residual:+.4g}, [+-]0\) pixels "
           r"\(row, col\); a mosaic needs tiles on one grid$")  # fmt: skip
    with pytest.raises(PlanError, match=msg.replace("+0.2", r"\+0\.2")):
        make_mosaic_plan(tiles)


# --------------------------------------------------------------------------- common_grid's tolerances, overlaps, gaps
def _fp(loc: str, t: tuple[float, ...], rows: int = 4, cols: int = 4) -> Any:
    from refstore.plan.mosaic import Footprint

    return Footprint(loc, t, rows, cols)  # type: ignore[arg-type]


@pytest.mark.parametrize("big", [1, 2, 4, 5])
def test_pixel_sizes_agree_within_1e9_of_the_largest_pixel_term(big: int) -> None:
    """Two tiles share a pixel matrix when each term differs by at most 1e-9 (the documented
    ``PIXEL_RTOL``) of the first tile's largest term, whichever of dx, rx, ry, dy that is, and
    the difference at exactly that bound included. ``big`` is the index (GDAL order) of the term
    1024 times the others (a shear when it is rx or ry)."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import PIXEL_RTOL, common_grid

    assert PIXEL_RTOL == 1e-9
    t = [0.0, 1.0, 0.0, 0.0, 0.0, -1.0]
    t[big] = 1024.0  # x0, dx, rx, y0, ry, dy: terms 1, 2, 4, 5
    bound = 1e-9 * 1024.0  # a power of two times 1e-9: exact in binary
    # the tile's own terms may differ from the first's by up to the bound (here dx and dy): same grid
    ok = list(t)
    ok[1] += bound * 0.5
    ok[5] -= bound * 0.5
    grid = common_grid([_fp("a", tuple(t)), _fp("b", tuple(ok))])
    assert grid.offsets["b"] == (0, 0) and grid.shape == (4, 4)
    # a term 0 in the first tile and exactly the bound in the second: still the same grid
    at = list(t)
    zero = next(i for i in (2, 4) if t[i] == 0.0)
    at[zero] = bound
    assert common_grid([_fp("a", tuple(t)), _fp("b", tuple(at))]).offsets["b"] == (0, 0)
    # just past it (the next double after the bound): refused, both named
    past = list(t)
    past[zero] = float(np.nextafter(bound, np.inf))
    with pytest.raises(PlanError, match=r"^b and a have different pixel sizes for 'image'"):
        common_grid([_fp("a", tuple(t)), _fp("b", tuple(past))])


def test_pixel_size_tolerance_scales_with_the_pixel() -> None:
    """30 m pixels written as 30.000000001 by one tile (1/30 of the 1e-9 relative bound off) share
    the grid; 1e-5-degree pixels differing by 1e-13 (1e-8 relative) do not."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import common_grid

    a = (500000.0, 30.0, 0.0, 4650000.0, 0.0, -30.0)
    b = (500000.0 + 4 * 30.0, 30.000000001, 0.0, 4650000.0, 0.0, -30.000000001)
    assert common_grid([_fp("a", a), _fp("b", b)]).offsets["b"] == (0, 4)
    c = (10.0, 1e-5, 0.0, 45.0, 0.0, -1e-5)
    d = (10.0, 1e-5 + 1e-13, 0.0, 45.0, 0.0, -1e-5)
    with pytest.raises(PlanError, match=r"^b and a have different pixel sizes"):
        common_grid([_fp("a", c), _fp("b", d)])


def test_degenerate_transforms_are_refused_and_small_pixels_are_not() -> None:
    """Degenerate: the pixel matrix's determinant at most 1e-9 times the square of its largest
    term (or not finite). 1e-5-degree pixels (determinant 1e-10) are a real grid."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import common_grid

    small = (10.0, 1e-5, 0.0, 45.0, 0.0, -1e-5)
    nxt = (10.0 + 4e-5, 1e-5, 0.0, 45.0, 0.0, -1e-5)
    grid = common_grid([_fp("a", small), _fp("b", nxt)])
    assert grid.offsets["b"] == (0, 4) and grid.shape == (4, 8)
    # 1000 by 1e-7: determinant 1e-4, at most 1e-9 * 1000**2 = 1e-3: degenerate
    # 1 by 1e-9: determinant 1e-9, exactly 1e-9 * 1**2: degenerate (the bound included)
    # a NaN term: no determinant at all; a zero matrix
    for t in ((0.0, 1000.0, 0.0, 0.0, 0.0, -1e-7), (0.0, 1.0, 0.0, 0.0, 0.0, 1e-9),
              (0.0, float("nan"), 0.0, 0.0, 0.0, -1.0), (0.0, 1.0, 0.0, 0.0, 0.0, float("nan")),
              (0.0, 0.0, 0.0, 0.0, 0.0, 0.0), (0.0, 1.0, 1.0, 0.0, 1.0, 1.0)):  # fmt: skip
        with pytest.raises(PlanError) as e:
            common_grid([_fp("a", t)], level="overview_1")
        assert str(e.value) == f"a: 'overview_1' has a degenerate transform {list(t)}"
    # just above the bound: a grid
    assert common_grid([_fp("a", (0.0, 1.0, 0.0, 0.0, 0.0, 2e-9))]).shape == (4, 4)


@pytest.mark.parametrize("axis", ["row", "col"])
def test_origin_tolerance_includes_its_bound(axis: str) -> None:
    """An origin exactly ``tolerance`` pixels off a whole pixel is on the grid (0.25 and 0 here,
    exact in binary); 2**-40 pixels past it is not."""
    from refstore.errors import PlanError
    from refstore.plan.mosaic import common_grid

    a = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0)

    def tile(off: float) -> tuple[float, ...]:
        return (8.0 + off, 1.0, 0.0, 0.0, 0.0, -1.0) if axis == "col" else (0.0, 1.0, 0.0, -8.0 - off, 0.0, -1.0)

    want = (0, 8) if axis == "col" else (8, 0)
    assert common_grid([_fp("a", a), _fp("b", tile(0.25))], tolerance=0.25).offsets["b"] == want
    assert common_grid([_fp("a", a), _fp("b", tile(0.0))], tolerance=0.0).offsets["b"] == want
    with pytest.raises(PlanError, match=r"^b: the origin of 'image' is off the pixel grid of a by"):
        common_grid([_fp("a", a), _fp("b", tile(0.25 + 2.0**-40))], tolerance=0.25)


def _unit_prints(boxes: list[tuple[int, int, int, int]]) -> list[Any]:
    """Footprints ``(row, col, rows, cols)`` on a 1-unit grid."""
    return [_fp(f"t{i}", (float(c), 1.0, 0.0, -float(r), 0.0, -1.0), h, w) for i, (r, c, h, w) in enumerate(boxes)]


def _painted(boxes: list[tuple[int, int, int, int]]) -> np.ndarray[Any, Any]:
    h = max(r + n for r, _, n, _ in boxes)
    w = max(c + n for _, c, _, n in boxes)
    masks = np.zeros((len(boxes), h, w), bool)
    for i, (r, c, bh, bw) in enumerate(boxes):
        masks[i, r : r + bh, c : c + bw] = True
    return masks


def test_overlaps_when_row_ends_are_not_in_row_start_order() -> None:
    """A tall tile, a short one inside its rows ending first, one lower: sorted by where they
    end, the short one would come first and the pair it makes with the tall one be missed."""
    from refstore.plan.mosaic import common_grid, overlaps

    boxes = [(0, 0, 10, 5), (1, 0, 2, 5), (5, 0, 1, 5), (20, 0, 3, 5)]
    prints = _unit_prints(boxes)
    masks = _painted(boxes)
    n = len(boxes)
    want = [(i, j) for i in range(n) for j in range(i + 1, n) if (masks[i] & masks[j]).any()]
    assert want == [(0, 1), (0, 2)]
    assert overlaps(common_grid(prints), prints) == want
    rev = prints[::-1]  # the same tiles in the other order: the indices follow the list
    assert overlaps(common_grid(rev), rev) == sorted((n - 1 - j, n - 1 - i) for i, j in want)


def _bands(boxes: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """The documented gaps, by hand: row bands between consecutive row edges (0, the mosaic's
    height, every tile's first and end row), in each band the maximal runs of pixels no tile
    covers, left to right."""
    covered = _painted(boxes).any(0)
    h = covered.shape[0]
    edges = sorted({0, h, *(r for r, _, _, _ in boxes), *(r + n for r, _, n, _ in boxes)})
    out = []
    for a, z in itertools.pairwise(edges):
        row = covered[a]
        c = 0
        while c < row.size:
            if row[c]:
                c += 1
                continue
            e = c
            while e < row.size and not row[e]:
                e += 1
            out.append((a, z, c, e))
            c = e
    return out


def test_gaps_merge_adjacent_empty_cells_of_a_band() -> None:
    """Three tiles on a diagonal: the column edges of the lower ones cut the first band's empty
    stretch into cells, which come back as one box per run."""
    from refstore.plan.mosaic import common_grid, gaps

    boxes = [(0, 0, 1, 1), (1, 2, 1, 1), (2, 4, 1, 1)]
    prints = _unit_prints(boxes)
    want = _bands(boxes)
    assert want == [(0, 1, 1, 5), (1, 2, 0, 2), (1, 2, 3, 5), (2, 3, 0, 4)]
    assert list(gaps(common_grid(prints), prints)) == want


def test_key_ranges_of_one_element_chunks_hold_every_chunk_meeting_the_box() -> None:
    """Chunks of one row by four columns: the coarse key of a chunk holding row r is r, so a box
    over rows 10..11 needs keys 10 and 11 (one cell wider: from 9)."""
    lay = SlabLayout.of((16, 8), (1, 4), [("a.tif", (0, 0), (16, 8))])
    assert lay.key_ranges((10, 1), (12, 5)) == [(9, 11), (0, 1)]
    assert lay.key_ranges((0, 0), (1, 8)) == [(0, 0), (0, 1)]


def test_rle_encode_is_the_extensions_run_length_form() -> None:
    """Written by hand from the extension's form ([value, count] for runs, bare values alone):
    a run is continued by its value, never by a value equal to its count."""
    assert rle_encode([5, 5, 5, 5, 1]) == [[5, 4], 1]
    assert rle_encode([4, 4, 2]) == [[4, 2], 2]
    assert rle_encode([3, 3, 3, 2, 2]) == [[3, 3], [2, 2]]
    assert rle_encode([]) == [] and rle_encode([7]) == [7]
