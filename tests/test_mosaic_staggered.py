"""``scan TILES --mosaic`` of a brick layout (issue 14, any placement): tiles cut by
``gdal_translate -srcwin`` from one tiled GeoTIFF with predictor 2, the middle row shifted by
half a tile, so its tiles straddle the block edges of the rows above and below and no chunk
grid expresses the mosaic (``plan/slabs.py``). Oracles: tifffile reads of the original raster
(the missing tile as its GDAL nodata), the cut boxes and the block size for which chunks a box
touches, GDAL itself for the VRT."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

import refstore
from refstore.errors import UnexpressibleError
from refstore.fixtures.mosaic import BLOCK, NODATA, STAGGERED, cut_boxes, write_raster

from ._cli import invoke
from ._oracle import assert_same

pytestmark = pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="GDAL's tools are not installed")

HOLE = (1, 2)  # the tile left out: rows 100..200, columns 195..325


def _tiles(skip: tuple[int, int] | None = HOLE) -> list[tuple[str, int, int, int, int]]:
    """``(name, row0, row1, col0, col1)`` of each tile that is cut."""
    return [(f"tile_r{i}c{j}.tif", r0, r1, c0, c1) for i, ((r0, r1), cols) in enumerate(STAGGERED)
            for j, (c0, c1) in enumerate(cols) if (i, j) != skip]  # fmt: skip


def _blocks(tiles: list[tuple[str, int, int, int, int]], rows: tuple[int, int] | None = None,
            cols: tuple[int, int] | None = None) -> set[tuple[str, int, int]]:  # fmt: skip
    """``(tile, block row, block col)`` of every block of the tiles (meeting the pixel box
    ``rows`` x ``cols`` when given), from the cut boxes and the block size alone."""
    out = set()
    for name, r0, r1, c0, c1 in tiles:
        for k0 in range(-(-(r1 - r0) // BLOCK)):
            for k1 in range(-(-(c1 - c0) // BLOCK)):
                y0, x0 = r0 + k0 * BLOCK, c0 + k1 * BLOCK
                y1, x1 = min(y0 + BLOCK, r1), min(x0 + BLOCK, c1)
                if rows is None or cols is None or (y0 < rows[1] and y1 > rows[0] and x0 < cols[1] and x1 > cols[0]):
                    out.add((name, k0, k1))
    return out


@pytest.fixture(scope="module")
def brick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("brick")
    src = write_raster(d / "original.tif")
    folder = d / "tiles"
    cut_boxes(src, folder, STAGGERED, skip=[HOLE])
    col = str(d / "col")
    refstore.init(col)
    rep = refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    expected = tifffile.imread(src)
    (r0, r1), cols = STAGGERED[HOLE[0]]
    expected[r0:r1, slice(*cols[HOLE[1]])] = NODATA
    return {"dir": d, "src": src, "folder": folder, "col": col, "report": rep, "expected": expected}


def test_a_brick_layout_is_placed_and_reads_as_the_original(brick) -> None:
    col, expected = brick["col"], brick["expected"]
    assert brick["report"].mosaic["shape"] == [300, 400] and brick["report"].new == 9
    img = refstore.open(col)["image"]
    assert img.meta.gridless
    assert_same(img[...], expected, "brick mosaic")
    assert_same(img[37:251, 13:377], expected[37:251, 13:377], "window across shifted tiles and the hole")
    assert_same(img[5:290:7, 3::11], expected[5:290:7, 3::11], "strided window")
    assert_same(img[150, 60:70], expected[150, 60:70], "one row across a straddled block edge")
    grid = json.loads(invoke("-C", col, "info", "--json").stdout)["arrays"]["image"]["chunk_grid"]
    assert [g["kind"] for g in grid] == ["none", "none"]
    import xarray as xr
    import zarr

    assert_same(xr.open_dataset(col, engine="refstore", mask_and_scale=False)["image"].values, expected, "xarray")
    store = refstore.zarr_store(col)
    assert "image" in store.blocks  # gridless, small blocks: served in blocks of them
    assert_same(zarr.open_group(store, mode="r")["image"][...], expected, "zarr store (decoded)")
    from refstore.read.verify import verify

    v = verify(refstore.open(col).snapshot)
    assert (v.checked, v.mismatched) == (len(_blocks(_tiles())), 0)


def test_forms_that_place_slabs_read_it_and_grid_forms_refuse(brick, tmp_path: Path) -> None:
    from refstore.emit import emit

    from .readers import parquet

    col, expected = brick["col"], brick["expected"]
    emit(refstore.Collection.open(col), "parquet", str(tmp_path / "m.parquet"))
    flat = parquet.open_form(str(tmp_path / "m.parquet"), None)["image"]
    assert_same(flat[...], expected, "flat Parquet (element origins + slabs)")
    assert_same(flat[(slice(90, 210), slice(60, 200))], expected[90:210, 60:200], "flat Parquet window")
    r = invoke("-C", col, "emit", "kerchunk-json", str(tmp_path / "m.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "'image' has no chunk grid" in r.stderr and not (tmp_path / "m.json").exists(), r.stderr
    for fmt in ("icechunk", "sqlite"):
        with pytest.raises(UnexpressibleError, match="'image' has no chunk grid"):
            emit(refstore.Collection.open(col), fmt, str(tmp_path / f"m.{fmt}"))
        assert not (tmp_path / f"m.{fmt}").exists()
    if shutil.which("gdalmdimtranslate") is not None:  # GDAL places each tile's Source at its offset
        import netCDF4

        from .readers.vrt import translate

        emit(refstore.Collection.open(col), "vrt", str(tmp_path / "m.vrt"))
        translate(str(tmp_path / "m.vrt"), str(tmp_path / "m.nc"))
        with netCDF4.Dataset(tmp_path / "m.nc") as nc:
            var = nc["image"]
            var.set_auto_maskandscale(False)
            assert_same(np.asarray(var[...]), expected, "VRT through gdalmdimtranslate")


def test_hold_bbox_holds_exactly_the_blocks_under_it_and_rescan_fills_the_hole(brick, new_collection) -> None:
    from refstore.plan.region import parse_bbox
    from refstore.table.hold import HoldSelection, hold

    folder = brick["dir"] / "grow"
    shutil.copytree(brick["folder"], folder)
    col = new_collection()
    refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    x0, dx, y0, dy = 500000.0, 30.0, 4650000.0, -30.0  # write_raster's grid
    rows, cols = (90, 110), (60, 200)  # across the first row's bottom blocks and the shifted row's
    bbox = f"{x0 + cols[0] * dx},{y0 + rows[1] * dy},{x0 + cols[1] * dx},{y0 + rows[0] * dy}"
    h = hold(refstore.Collection.open(col), HoldSelection(arrays=("image",), bbox=parse_bbox(bbox)))
    want = {(str(folder / n), k0, k1) for n, k0, k1 in _blocks(_tiles(), rows, cols)}
    held = refstore.open(col).snapshot.rows("chunk", ["source", "k0", "k1"], "held_at >= 0").to_pylist()
    assert h.chunks == len(want) and {(r["source"], r["k0"], r["k1"]) for r in held} == want
    # the missing tile arrives: a rescan upserts its blocks only, and the mosaic is whole
    cut_boxes(brick["src"], folder, [((0, 0), ()), STAGGERED[1]], skip=[(1, j) for j in range(4) if j != 2])
    rep = refstore.scan(col, [str(folder)], timeout=None)
    assert (rep.new, rep.unchanged, rep.inserted) == (1, 9, len(_blocks([("h", 100, 200, 195, 325)])))
    assert_same(refstore.open(col)["image"][...], tifffile.imread(brick["src"]), "brick mosaic with every tile")


def test_a_mosaic_going_gridless_and_back_rekeys_its_tiles(brick, new_collection) -> None:
    """Rows 0 and 2 of the brick line up (a rectilinear grid); the shifted middle row makes the
    mosaic gridless (every tile re-keyed to coarse keys); pruning it makes it rectilinear again.
    Each version reads as the original with the missing rows as nodata."""
    folder = brick["dir"] / "transition"
    folder.mkdir()
    for p in brick["folder"].glob("tile_r[02]*.tif"):
        shutil.copy2(p, folder / p.name)
    col = new_collection()
    full = tifffile.imread(brick["src"])
    without = full.copy()
    without[100:200] = NODATA
    refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    img = refstore.open(col)["image"]
    assert not img.meta.gridless and img.meta.edges
    assert_same(img[...], without, "rows 0 and 2: rectilinear")
    for p in brick["folder"].glob("tile_r1*.tif"):
        shutil.copy2(p, folder / p.name)
    rep = refstore.scan(col, [str(folder)], timeout=None)
    assert rep.new == 3 and rep.updated > 0  # the first rows' chunks moved to coarse keys
    img = refstore.open(col)["image"]
    assert img.meta.gridless
    assert_same(img[...], brick["expected"], "brick: gridless")
    for p in folder.glob("tile_r1*.tif"):
        p.unlink()
    rep = refstore.scan(col, [str(folder)], prune=True, timeout=None)
    assert len(rep.removed) == 3 and rep.updated > 0
    img = refstore.open(col)["image"]
    assert not img.meta.gridless and img.meta.edges
    assert_same(img[...], without, "rows 0 and 2 again: rectilinear")


def test_coverage_and_the_html_report_show_the_brick(brick, tmp_path: Path) -> None:
    """The coverage shares come from each block's box (through its tile): referenced = the
    pixels the cut tiles cover, over the raster (from the cut boxes alone)."""
    from refstore.report.coverage import coverage

    cov = coverage(refstore.open(brick["col"]).snapshot, "image")
    covered = sum((r1 - r0) * (c1 - c0) for _, r0, r1, c0, c1 in _tiles())
    shares = cov.totals()
    assert shares["referenced"] == pytest.approx(covered / (300 * 400))
    assert shares["absent"] == pytest.approx(1 - covered / (300 * 400))


def test_the_html_report_shows_the_tiles_chunk_shape(brick, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from refstore.cli import app as cli

    r = CliRunner().invoke(cli.app, ["-C", brick["col"], "report", str(tmp_path / "r.html")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "<td>64 x 64</td>" in (tmp_path / "r.html").read_text()


def test_a_brick_mosaic_per_date_stacked_along_time(brick, tmp_path: Path, new_collection) -> None:
    """Two dates of brick tiles (the second raster another seed, one tile missing on day 1):
    one gridless (time, y, x) array equal to the stacked rasters; hold --time takes the blocks
    of day 2 only (the cut boxes and the block size say how many)."""
    from refstore.plan.region import parse_time_range
    from refstore.table.hold import HoldSelection, hold

    second = write_raster(tmp_path / "second.tif", seed=1)
    folder = tmp_path / "dated"
    for day, src, skip in (("20240101", brick["src"], [HOLE]), ("20240102", second, [])):
        for p in cut_boxes(src, tmp_path / day, STAGGERED, skip=skip):
            folder.mkdir(exist_ok=True)
            shutil.move(p, folder / f"{p.stem}_{day}.tif")
    col = new_collection()
    rep = refstore.scan(col, [str(folder)], mosaic=True, concat_dim="time", time_from_name="%Y%m%d", timeout=None)
    assert rep.mosaic is not None and rep.mosaic["dates"] == 2 and rep.new == 19
    img = refstore.open(col)["image"]
    assert img.meta.gridless and img.shape == (2, 300, 400)
    want = np.stack([brick["expected"], tifffile.imread(second)])
    assert_same(img[...], want, "brick mosaic x time")
    assert_same(img[:, 90:210, 60:200], want[:, 90:210, 60:200], "window across dates and shifted tiles")
    h = hold(refstore.Collection.open(col), HoldSelection(arrays=("image",),
                                                          time=parse_time_range("2024-01-02/2024-01-02")))
    assert h.chunks == len(_blocks(_tiles(skip=None)))
