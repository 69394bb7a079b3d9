"""``scan --mosaic`` of tiles cut from one raster but written with different internal layouts
(issue 28, item 6): tiled 256 with deflate, striped, tiled 128 with LZW and a predictor, tiled 64,
deflate strips; the tile left out is added on a rescan as packbits tiles of 32 x 48. Every tile
keeps its own chunks and codecs (``plan/slabs.py``). Oracles: tifffile per tile, placed by the
tile's own ModelTiepoint/ModelPixelScale as tifffile reads them, and GDAL mosaicking the tiles by
their geotransforms (rasterio's ``merge``; ``gdalbuildvrt`` too where installed)."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

import refstore
from refstore.errors import PlanError, UnexpressibleError
from refstore.fixtures.mosaic import NODATA, projected_geotags

from ._cli import invoke
from ._oracle import assert_same

ROWS, COLS = (0, 110, 300), (0, 190, 333, 520)
"""Tile edges: 2 x 3 tiles of a 300 x 520 raster, none on a multiple of any block size."""
LAYOUTS: dict[tuple[int, int], dict[str, Any]] = {
    (0, 0): {"tile": (256, 256), "compression": "zlib"},
    (0, 1): {"rowsperstrip": 7},
    (0, 2): {"tile": (128, 128), "compression": "lzw", "predictor": 2},
    (1, 0): {"tile": (64, 64), "compression": "zlib", "predictor": 2},
    (1, 1): {"tile": (32, 48), "compression": "packbits"},
    (1, 2): {"rowsperstrip": 16, "compression": "zlib"},
}
HOLE = (1, 1)
PIXEL, X0, Y0 = 30.0, 500000.0, 4650000.0


def _raster() -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(28)
    yy, xx = np.mgrid[0 : ROWS[-1], 0 : COLS[-1]]
    data = (1000 + 7 * yy + 3 * xx + rng.integers(0, 50, yy.shape)).astype("<u2")
    data[rng.integers(0, ROWS[-1], 20), rng.integers(0, COLS[-1], 20)] = NODATA
    return data


def _write(folder: Path, full: np.ndarray[Any, Any], ij: tuple[int, int]) -> Path:
    i, j = ij
    r0, r1, c0, c1 = ROWS[i], ROWS[i + 1], COLS[j], COLS[j + 1]
    tags = [*projected_geotags(X0 + c0 * PIXEL, Y0 - r0 * PIXEL, PIXEL, 32633), (42113, "s", 0, str(NODATA), True)]
    path = folder / f"tile_r{i}c{j}.tif"
    tifffile.imwrite(path, full[r0:r1, c0:c1], extratags=tags, metadata=None, **LAYOUTS[ij])
    return path


def _tifffile_mosaic(paths: list[Path]) -> tuple[np.ndarray[Any, Any], tuple[float, float]]:
    """Each tile read by tifffile, painted at the pixel its ModelTiepoint gives (pixel size from
    its ModelPixelScale) on a canvas of nodata spanning the tiles; the canvas's top-left corner."""
    tiles = []
    for p in paths:
        with tifffile.TiffFile(p) as tif:
            page = tif.pages.first
            _, _, _, x, y, _ = page.tags["ModelTiepointTag"].value
            sx, sy, _ = page.tags["ModelPixelScaleTag"].value
            tiles.append((page.asarray(), x, y, sx, sy))
    left, top = min(t[1] for t in tiles), max(t[2] for t in tiles)
    boxes = [(round((top - y) / sy), round((x - left) / sx), a) for a, x, y, sx, sy in tiles]
    h = max(r + a.shape[0] for r, _, a in boxes)
    w = max(c + a.shape[1] for _, c, a in boxes)
    out = np.full((h, w), NODATA, "<u2")
    for r, c, a in boxes:
        out[r : r + a.shape[0], c : c + a.shape[1]] = a
    return out, (left, top)


def _chunks(paths: list[Path]) -> dict[str, tuple[tuple[int, int], tuple[int, int], tuple[int, int]]]:
    """tifffile's view of each tile: ``(pixel offset, shape, chunk shape)``."""
    out = {}
    for p in paths:
        with tifffile.TiffFile(p) as tif:
            page = tif.pages.first
            _, _, _, x, y, _ = page.tags["ModelTiepointTag"].value
            out[str(p)] = ((round((Y0 - y) / PIXEL), round((x - X0) / PIXEL)), page.shape[:2], page.chunks[:2])
    return out


def _blocks_under(tiles: dict[str, Any], rows: tuple[int, int], cols: tuple[int, int]) -> int:
    n = 0
    for (r, c), (h, w), (bh, bw) in tiles.values():
        for k0, k1 in itertools.product(range(-(-h // bh)), range(-(-w // bw))):
            y0, x0 = r + k0 * bh, c + k1 * bw
            y1, x1 = min(y0 + bh, r + h), min(x0 + bw, c + w)
            n += y0 < rows[1] and y1 > rows[0] and x0 < cols[1] and x1 > cols[0]
    return n


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("layouts")
    full = _raster()
    folder = d / "tiles"
    folder.mkdir()
    paths = [_write(folder, full, ij) for ij in LAYOUTS if ij != HOLE]
    col = str(d / "col")
    refstore.init(col)
    rep = refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    expected, corner = _tifffile_mosaic(paths)
    return {"dir": d, "full": full, "folder": folder, "paths": paths, "col": col, "report": rep,
            "expected": expected, "corner": corner}  # fmt: skip


def test_the_tiles_really_differ_in_layout(mixed) -> None:
    layouts = set()
    for p in mixed["paths"]:
        with tifffile.TiffFile(p) as tif:
            page = tif.pages.first
            layouts.add((page.is_tiled, page.chunks, int(page.compression), int(page.predictor)))
    assert len(layouts) == len(mixed["paths"])


def test_tiles_of_different_layouts_read_as_tifffile_places_them(mixed) -> None:
    col, expected = mixed["col"], mixed["expected"]
    assert mixed["report"].mosaic["shape"] == [300, 520] and mixed["report"].new == 5
    hole = (ROWS[2] - ROWS[1]) * (COLS[2] - COLS[1])
    assert mixed["report"].mosaic["gap_pixels"] == hole
    img = refstore.open(col)["image"]
    assert img.meta.gridless and img.meta.cell == (1, 1)  # gcd of 256, 7, 128, 64, 16 and 256, 190, ...
    assert img.attrs["transform"].tolist() == [mixed["corner"][0], PIXEL, 0.0, mixed["corner"][1], 0.0, -PIXEL]
    assert_same(img[...], expected, "mosaic")
    assert_same(img[37:251, 13:477], expected[37:251, 13:477], "window across every layout and the hole")
    assert_same(img[5:290:7, 3::11], expected[5:290:7, 3::11], "strided window")
    assert_same(img[109:111, 180:200], expected[109:111, 180:200], "a tile corner where four layouts meet")
    import xarray as xr
    import zarr

    xa = xr.open_dataset(col, engine="refstore", mask_and_scale=False)["image"].values
    assert_same(xa, expected, "xarray engine")
    assert_same(zarr.open_group(refstore.zarr_store(col), mode="r")["image"][...], expected, "zarr store")
    from refstore.read.verify import verify

    v = verify(refstore.open(col).snapshot)
    total = 0
    for p in mixed["paths"]:
        with tifffile.TiffFile(p) as tif:
            total += len(tif.pages.first.dataoffsets)
    assert (v.checked, v.mismatched) == (total, 0)


def test_gdal_mosaics_the_tiles_the_same(mixed, tmp_path: Path) -> None:
    """GDAL reads every tile with its own driver and places it by its geotransform: rasterio's
    ``merge`` (and ``gdalbuildvrt`` where installed) give the same pixels and transform."""
    rasterio = pytest.importorskip("rasterio")
    from rasterio.merge import merge

    img = refstore.open(mixed["col"])["image"]
    got = img[...]
    srcs = [rasterio.open(p) for p in mixed["paths"]]
    try:
        data, transform = merge(srcs, nodata=NODATA)
    finally:
        for s in srcs:
            s.close()
    assert_same(got, data[0], "rasterio.merge")
    assert img.attrs["transform"].tolist() == list(transform.to_gdal())
    if shutil.which("gdalbuildvrt") is not None:
        vrt = tmp_path / "tiles.vrt"
        subprocess.run(["gdalbuildvrt", "-q", str(vrt), *map(str, mixed["paths"])], check=True)
        with rasterio.open(vrt) as ds:
            assert_same(got, ds.read(1), "gdalbuildvrt")


def test_chunk_keys_count_cells_of_the_gcd_of_the_tiles_blocks(mixed) -> None:
    """Each chunk row's global key is the cell (``ArrayMeta.cell``) holding its origin, which is
    the tile's offset plus its key times the tile's own block shape (tifffile)."""
    tiles = _chunks(mixed["paths"])
    snap = refstore.open(mixed["col"]).snapshot
    cell = snap.array("image").cell
    rows = snap.rows("chunk", ["source", "k0", "k1", "g0", "g1"], "array = 'image'").to_pylist()
    assert len(rows) == sum(math.prod(-(-n // b) for n, b in zip(t[1], t[2], strict=True)) for t in tiles.values())
    for r in rows:
        (oy, ox), _, (bh, bw) = tiles[r["source"]]
        assert (r["g0"], r["g1"]) == ((oy + r["k0"] * bh) // cell[0], (ox + r["k1"] * bw) // cell[1])


def test_hold_bbox_holds_exactly_the_blocks_under_it(mixed, tmp_path: Path) -> None:
    from refstore.plan.region import parse_bbox
    from refstore.table.hold import HoldSelection, hold

    col = str(tmp_path / "col")
    shutil.copytree(mixed["col"], col)
    rows, cols = (60, 170), (150, 400)
    bbox = f"{X0 + cols[0] * PIXEL},{Y0 - rows[1] * PIXEL},{X0 + cols[1] * PIXEL},{Y0 - rows[0] * PIXEL}"
    h = hold(refstore.Collection.open(col), HoldSelection(arrays=("image",), bbox=parse_bbox(bbox)))
    assert h.chunks == _blocks_under(_chunks(mixed["paths"]), rows, cols)
    moved = tmp_path / "away"
    shutil.move(str(mixed["folder"]), moved)
    try:  # the held blocks read with the tiles gone
        got = refstore.open(col)["image"][rows[0] : rows[1], cols[0] : cols[1]]
    finally:
        shutil.move(str(moved), mixed["folder"])
    assert_same(got, mixed["expected"][rows[0] : rows[1], cols[0] : cols[1]], "held window")


def test_rescan_adds_a_tile_of_yet_another_layout(mixed, tmp_path: Path) -> None:
    col = str(tmp_path / "col")
    refstore.init(col)
    folder = tmp_path / "tiles"
    shutil.copytree(mixed["folder"], folder)
    refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    _write(folder, mixed["full"], HOLE)
    rep = refstore.scan(col, [str(folder)], timeout=None)
    assert rep.new == 1 and rep.mosaic is not None and rep.mosaic["gap_pixels"] == 0
    assert_same(refstore.open(col)["image"][...], mixed["full"], "every tile: the original raster")


def test_forms_with_one_codec_refuse_by_name_and_the_vrt_places_each_tile(mixed, tmp_path: Path) -> None:
    from refstore.emit import emit

    col = mixed["col"]
    r = invoke("-C", col, "emit", "kerchunk-json", str(tmp_path / "m.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "array 'image': its tiles differ in layout" in r.stderr and not (tmp_path / "m.json").exists()
    for fmt in ("kerchunk-parquet", "icechunk", "sqlite", "parquet"):
        with pytest.raises(UnexpressibleError, match="array 'image': its tiles differ in layout"):
            emit(refstore.Collection.open(col), fmt, str(tmp_path / f"m.{fmt}"))
        assert not (tmp_path / f"m.{fmt}").exists()
    emit(refstore.Collection.open(col), "vrt", str(tmp_path / "m.vrt"))
    import xml.etree.ElementTree as ET

    sources = ET.parse(tmp_path / "m.vrt").getroot().iter("Source")
    names = sorted(Path(str(s.findtext("SourceFilename"))).name for s in sources)
    assert names == sorted(p.name for p in mixed["paths"])
    if shutil.which("gdalmdimtranslate") is not None:  # GDAL decodes each tile with its own driver
        import netCDF4

        from .readers.vrt import translate

        translate(str(tmp_path / "m.vrt"), str(tmp_path / "m.nc"))
        with netCDF4.Dataset(tmp_path / "m.nc") as nc:
            var = nc["image"]
            var.set_auto_maskandscale(False)
            assert_same(np.asarray(var[...]), mixed["expected"], "VRT through gdalmdimtranslate")


def test_info_says_the_tiles_keep_their_layouts(mixed) -> None:
    r = invoke("-C", mixed["col"], "info", "--json")
    grid = json.loads(r.stdout)["arrays"]["image"]["chunk_grid"]
    assert [g["kind"] for g in grid] == ["none", "none"] and all(g.get("per_tile") for g in grid)
    assert "differ in chunk shape or codecs" in invoke("-C", mixed["col"], "info").stdout


def test_a_different_dtype_or_crs_is_still_refused_by_name(mixed, tmp_path: Path) -> None:
    folder = tmp_path / "tiles"
    shutil.copytree(mixed["folder"], folder)
    odd = folder / "tile_r1c1.tif"
    tags = [*projected_geotags(X0 + COLS[1] * PIXEL, Y0 - ROWS[1] * PIXEL, PIXEL, 32633),
            (42113, "s", 0, str(NODATA), True)]  # fmt: skip
    tifffile.imwrite(odd, np.ones((190, 143), "<i4"), extratags=tags, metadata=None, tile=(32, 32))
    r = invoke("-C", str(tmp_path / "c1"), "init")
    r = invoke("-C", str(tmp_path / "c1"), "scan", str(folder), "--mosaic")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "tile_r1c1.tif and " in r.stderr and "'image' has a different dtype" in r.stderr
    tifffile.imwrite(odd, np.ones((190, 143), "<u2"), metadata=None, tile=(32, 32),
                     extratags=[*projected_geotags(X0 + COLS[1] * PIXEL, Y0 - ROWS[1] * PIXEL, PIXEL, 32634),
                                (42113, "s", 0, str(NODATA), True)])  # fmt: skip
    from refstore.plan.concat import SourceSlab
    from refstore.plan.mosaic import make_mosaic_plan
    from refstore.scan.tiff import TiffScanner

    slabs = [SourceSlab(str(p), i, {a.name: a for a in TiffScanner()(str(p)).arrays})
             for i, p in enumerate(sorted(folder.iterdir()))]  # fmt: skip
    with pytest.raises(PlanError, match=r"tile_r1c1\.tif and .*have different CRS \(EPSG:32634 and EPSG:32633\)"):
        make_mosaic_plan(slabs)


def test_a_tile_of_another_layout_rekeys_a_uniform_mosaic_and_pruning_it_rekeys_back(tmp_path: Path) -> None:
    """Five tiles tiled 64 x 64 (one layout: coarse keys not needed), then the missing tile as
    32 x 48 PackBits tiles: every tile's keys are now counted in the 32 x 16 cell, the top-left
    tile's too although its key base stays (0, 0); removing the odd tile again (``--prune``)
    returns to one layout. Each state reads as tifffile places the tiles."""
    full = _raster()
    folder = tmp_path / "tiles"
    folder.mkdir()
    plain = {"tile": (64, 64), "compression": "zlib", "predictor": 2}
    paths = []
    for ij in LAYOUTS:
        if ij != HOLE:
            saved, LAYOUTS[ij] = LAYOUTS[ij], plain
            try:
                paths.append(_write(folder, full, ij))
            finally:
                LAYOUTS[ij] = saved
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    one = refstore.open(col)["image"]
    assert not one.meta.cell
    assert_same(one[...], _tifffile_mosaic(paths)[0], "one layout")
    odd = _write(folder, full, HOLE)
    rep = refstore.scan(col, [str(folder)], timeout=None)
    img = refstore.open(col)["image"]
    assert img.meta.cell == (32, 16) and rep.updated > 0
    assert_same(img[...], full, "the odd tile added")
    assert_same(img[3:70, 5:90], full[3:70, 5:90], "inside the top-left tile")
    assert_same(img[0:64, 100:150], full[0:64, 100:150], "the top-left tile's second block column alone")
    tiles = _chunks([*paths, odd])
    for r in img._snap.rows("chunk", ["source", "k0", "k1", "g0", "g1"], "array = 'image'").to_pylist():
        (oy, ox), _, (bh, bw) = tiles[r["source"]]
        assert (r["g0"], r["g1"]) == ((oy + r["k0"] * bh) // 32, (ox + r["k1"] * bw) // 16), r
    odd.unlink()
    refstore.scan(col, [str(folder)], timeout=None, prune=True)
    back = refstore.open(col)["image"]
    assert not back.meta.cell
    assert_same(back[...], _tifffile_mosaic(paths)[0], "back to one layout")


def test_a_mosaic_per_date_of_tiles_of_different_layouts(tmp_path: Path) -> None:
    """Two dates, each a mosaic of the five layouts (the second date's tiles in the other order),
    stacked along ``time``; each date reads as tifffile places that date's tiles."""
    folder = tmp_path / "dated"
    folder.mkdir()
    full = _raster()
    later = (full.astype(np.int64) * 3 % 60000).astype("<u2")
    order = [ij for ij in LAYOUTS if ij != HOLE]
    days: list[list[Path]] = [[], []]
    for day, data, layouts in ((0, full, order), (1, later, order[::-1])):
        sub = tmp_path / f"d{day}"
        sub.mkdir()
        for ij, lay in zip(order, layouts, strict=True):
            saved, LAYOUTS[ij] = LAYOUTS[ij], LAYOUTS[lay]
            try:
                p = _write(sub, data, ij)
            finally:
                LAYOUTS[ij] = saved
            days[day].append(p.rename(folder / f"{p.stem}_2024010{day + 1}.tif"))
    col = str(tmp_path / "col")
    refstore.init(col)
    rep = refstore.scan(col, [str(folder)], mosaic=True, concat_dim="time", time_from_name="%Y%m%d", timeout=None)
    assert rep.mosaic is not None and rep.mosaic["dates"] == 2
    img = refstore.open(col)["image"]
    assert img.meta.cell and img.meta.dims == ("time", "y", "x")
    want = np.stack([_tifffile_mosaic(days[0])[0], _tifffile_mosaic(days[1])[0]])
    assert_same(img[...], want, "mosaic x time")
    assert_same(img[1, 100:200, 150:400], want[1, 100:200, 150:400], "a window of the second date")


def test_coverage_counts_each_tile_by_its_own_blocks_and_the_report_says_they_differ(mixed, tmp_path: Path) -> None:
    """Coverage shares from each block's box through its own tile's block shape: referenced =
    the pixels the tiles cover; the html report shows the first tile's block shape and says the
    tiles differ."""
    from refstore.report.coverage import coverage

    cov = coverage(refstore.open(mixed["col"]).snapshot, "image")
    covered = sum(h * w for _, (h, w), _ in _chunks(mixed["paths"]).values())
    shares = cov.totals()
    assert shares["referenced"] == pytest.approx(covered / (300 * 520))
    assert shares["absent"] == pytest.approx(1 - covered / (300 * 520))
    cuts: tuple[set[int], set[int]] = ({0, 300}, {0, 520})  # every tile's block edges (tifffile)
    for (r, c), (h, w), (bh, bw) in _chunks(mixed["paths"]).values():
        cuts[0].update([*range(r, r + h, bh), r + h])
        cuts[1].update([*range(c, c + w, bw), c + w])
    assert cov.y.edges.tolist() == sorted(cuts[0]) and cov.x.edges.tolist() == sorted(cuts[1])
    pytest.importorskip("matplotlib")
    r = invoke("-C", mixed["col"], "report", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert "<td>256 x 256 (the first tile&#x27;s: tiles differ in layout)</td>" in (tmp_path / "r.html").read_text()


def test_a_real_geotiff_cut_by_gdal_into_tiles_of_four_layouts(shared_data: Path, tmp_path: Path) -> None:
    """``debian-rgdal/cea.tif`` (uint8, strips of 15 rows, a user-defined Cylindrical Equal Area
    CRS) cut by GDAL (rasterio's) into 2 x 2 tiles written as strips, tiled 256 deflate, tiled
    128 LZW with predictor 2 and tiled 64 ZSTD: the mosaic reads as tifffile reads the original
    and as GDAL mosaics the tiles."""
    rasterio = pytest.importorskip("rasterio")
    from rasterio.merge import merge
    from rasterio.windows import Window

    src = shared_data / "zoo" / "debian-rgdal" / "cea.tif"
    if not src.exists():
        pytest.skip(f"{src} is not present")
    layouts = [{}, {"tiled": True, "blockxsize": 256, "blockysize": 256, "compress": "deflate"},
               {"tiled": True, "blockxsize": 128, "blockysize": 128, "compress": "lzw", "predictor": 2},
               {"tiled": True, "blockxsize": 64, "blockysize": 64, "compress": "zstd"}]  # fmt: skip
    rows, cols = (0, 200, 515), (0, 300, 514)
    folder = tmp_path / "tiles"
    folder.mkdir()
    paths = []
    with rasterio.open(src) as s:
        for k, (i, j) in enumerate(itertools.product(range(2), range(2))):
            win = Window(cols[j], rows[i], cols[j + 1] - cols[j], rows[i + 1] - rows[i])
            prof = {**s.profile, "width": win.width, "height": win.height, "transform": s.window_transform(win)}
            for key in ("tiled", "blockxsize", "blockysize", "compress", "predictor", "interleave"):
                prof.pop(key, None)
            paths.append(folder / f"cea_{i}{j}.tif")
            with rasterio.open(paths[-1], "w", **{**prof, **layouts[k]}) as d:
                d.write(s.read(window=win))
    col = str(tmp_path / "col")
    refstore.init(col)
    rep = refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    assert rep.new == 4 and rep.mosaic is not None and rep.mosaic["gap_pixels"] == 0
    img = refstore.open(col)["image"]
    assert img.meta.cell
    assert_same(img[...], tifffile.imread(src), "cea.tif")
    srcs = [rasterio.open(p) for p in paths]
    try:
        data, transform = merge(srcs)
    finally:
        for s in srcs:
            s.close()
    assert_same(img[...], data[0], "rasterio.merge")
    assert img.attrs["transform"].tolist() == list(transform.to_gdal())
