"""``scan TILES --mosaic``: tiles cut by ``gdal_translate -srcwin`` from one tiled GeoTIFF with
predictor 2 read back as the original raster (the missing tile as GDAL nodata). Oracles: tifffile
reads of the original, ``gdalinfo -json`` for its transform, the cut edges for placements."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

import refstore
from refstore.errors import PlanError
from refstore.fixtures.mosaic import ALIGNED, BLOCK, MISALIGNED, NODATA, cut_tiles, write_raster
from refstore.plan.concat import SourceSlab
from refstore.plan.mosaic import make_mosaic_plan
from refstore.plan.region import parse_bbox
from refstore.scan.tiff import TiffScanner
from refstore.table import diff
from refstore.table.hold import HoldSelection, hold

from ._cli import run
from ._oracle import assert_same

pytestmark = pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="GDAL's tools are not installed")

HOLE = (1, 2)  # the tile left out


def _gdal_transform(path: Path) -> list[float]:
    out = subprocess.run(["gdalinfo", "-json", str(path)], check=True, capture_output=True, text=True).stdout
    return [float(v) for v in json.loads(out)["geoTransform"]]


def _box(edges: tuple[Any, Any], i: int, j: int) -> tuple[slice, slice]:
    return slice(edges[0][i], edges[0][i + 1]), slice(edges[1][j], edges[1][j + 1])


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("mosaic")
    src = write_raster(d / "original.tif")
    aligned = cut_tiles(src, d / "aligned", ALIGNED)
    misaligned = cut_tiles(src, d / "misaligned", MISALIGNED)
    return {"dir": d, "src": src, "aligned": aligned, "misaligned": misaligned}


def _folder(cut: dict[str, Any], tmp_path: Path, kind: str, skip: tuple[int, int] | None = HOLE) -> Path:
    folder = tmp_path / kind
    folder.mkdir()
    for p in cut[kind]:
        if skip is None or p.name != f"tile_r{skip[0]}c{skip[1]}.tif":
            shutil.copy2(p, folder / p.name)
    return folder


def _original(cut: dict[str, Any], edges: tuple[Any, Any] = ALIGNED, hole: tuple[int, int] | None = HOLE) -> Any:
    img = tifffile.imread(cut["src"])
    if hole is not None:
        img[_box(edges, *hole)] = NODATA
    return img


def test_aligned_mosaic_reads_as_the_original_with_the_hole_as_nodata(cut, tmp_path: Path, new_collection) -> None:
    folder = _folder(cut, tmp_path, "aligned")
    col = new_collection()
    r = run("-C", col, "scan", str(folder), "--mosaic", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["sources"]["new"] == 11
    m = rep["mosaic"]
    assert (m["tiles"], m["shape"], m["crs"]) == (11, [300, 400], "EPSG:32633")
    hole = _box(ALIGNED, *HOLE)
    assert m["gap_pixels"] == (hole[0].stop - hole[0].start) * (hole[1].stop - hole[1].start)
    ds = refstore.open(col)
    img = ds["image"]
    expected = _original(cut)
    assert_same(img[...], expected, "mosaic")
    assert_same(img[90:250, 50:333], expected[90:250, 50:333], "window across tiles and the hole")
    assert img.attrs["transform"].tolist() == _gdal_transform(cut["src"])
    assert int(img.attrs["nodata"]) == NODATA
    info = json.loads(run("-C", col, "info", "--json").stdout)
    assert info["arrays"]["image"]["shape"] == [300, 400] and info["arrays"]["image"]["chunks"] == [BLOCK, BLOCK]
    import xarray as xr

    xa = xr.open_dataset(col, engine="refstore", mask_and_scale=False)["image"].values
    assert_same(xa, expected, "xarray engine")
    import zarr

    z = zarr.open_group(refstore.zarr_store(col), mode="r")["image"][...]
    assert_same(z, expected, "zarr store")
    from refstore.read.verify import verify

    v = verify(ds.snapshot)
    assert (v.checked, v.mismatched) == (33, 0)  # 5 x 7 blocks but the hole's 2
    if shutil.which("gdalmdimtranslate") is not None:  # the VRT form: one Source per tile, read by GDAL
        import netCDF4

        from refstore.emit import emit

        from .readers.vrt import translate

        emit(refstore.Collection.open(col), "vrt", str(tmp_path / "m.vrt"))
        translate(str(tmp_path / "m.vrt"), str(tmp_path / "m.nc"))
        with netCDF4.Dataset(tmp_path / "m.nc") as nc:
            var = nc["image"]
            var.set_auto_maskandscale(False)
            assert_same(np.asarray(var[...]), expected, "VRT through gdalmdimtranslate")


def test_rescan_upserts_the_missing_tile_and_hold_bbox_goes_through_the_mosaic_transform(
    cut, tmp_path: Path, new_collection
) -> None:
    folder = _folder(cut, tmp_path, "aligned")
    col = new_collection()
    first = refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    missing = next(p for p in cut["aligned"] if p.name == "tile_r1c2.tif")
    shutil.copy2(missing, folder / missing.name)
    rep = refstore.scan(col, [str(folder)], timeout=None)  # --mosaic is recorded
    assert (rep.new, rep.unchanged, rep.inserted, rep.updated) == (1, 11, 2, 0)
    assert rep.mosaic is not None and rep.mosaic["gap_pixels"] == 0
    assert_same(refstore.open(col)["image"][...], _original(cut, hole=None), "mosaic with every tile")
    d = diff(refstore.Collection.open(col), first.version)
    assert d.sources_added == [str(folder / "tile_r1c2.tif")] and d.arrays["image"]["added"] == 2
    # bbox -> pixels by the original's transform (gdalinfo), then blocks
    x0, dx, _, y0, _, dy = _gdal_transform(cut["src"])
    rows, cols = (10, 100), (70, 140)
    bbox = f"{x0 + cols[0] * dx},{y0 + rows[1] * dy},{x0 + cols[1] * dx},{y0 + rows[0] * dy}"
    h = hold(refstore.Collection.open(col), HoldSelection(arrays=("image",), bbox=parse_bbox(bbox)))
    blocks = {(r // BLOCK, c // BLOCK) for r in range(*rows) for c in range(*cols)}
    assert h.chunks == len(blocks)
    held = refstore.open(col).snapshot.rows("chunk", ["g0", "g1"], "held_at >= 0").to_pylist()
    assert {(x["g0"], x["g1"]) for x in held} == blocks


def test_overlapping_tiles_are_refused_naming_both(cut, tmp_path: Path, new_collection) -> None:
    folder = _folder(cut, tmp_path, "aligned", skip=None)
    # a tile covering rows 64..192, cols 128..320: overlaps r0c2 (rows 0..128, cols 192..320) and others
    cut_tiles(cut["src"], tmp_path / "extra", ((64, 192), (128, 320)), suffix="_shifted")
    shutil.copy2(tmp_path / "extra" / "tile_r0c0_shifted.tif", folder / "zz_shifted.tif")
    col = new_collection()
    r = run("-C", col, "scan", str(folder), "--mosaic")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "overlap" in r.stderr and "zz_shifted.tif" in r.stderr and "tile_r" in r.stderr
    assert refstore.open(col).snapshot.count("source") == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [(["-a_srs", "EPSG:32634"], "have different CRS (EPSG:32634 and EPSG:32633)"),
     (["-outsize", "50%", "50%"], "have different pixel sizes")],
)  # fmt: skip
def test_crs_or_pixel_size_mismatch_is_refused_naming_both(cut, tmp_path: Path, new_collection, options,
                                                           message) -> None:  # fmt: skip
    folder = _folder(cut, tmp_path, "aligned")
    odd = cut_tiles(cut["src"], tmp_path / "odd", ((0, 128), (0, 64)), options=options, suffix="_odd")[0]
    shutil.move(odd, folder / "tile_r1c2.tif")  # in the hole: nothing overlaps
    col = new_collection()
    with pytest.raises(
        PlanError, match=re.escape(f"{folder / 'tile_r1c2.tif'} and {folder / 'tile_r0c0.tif'} {message}")
    ):
        refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    assert refstore.open(col).snapshot.count("source") == 0


def _slabs(paths: list[Path]) -> list[SourceSlab]:
    out = []
    for i, p in enumerate(sorted(paths)):
        res = TiffScanner()(str(p))
        out.append(SourceSlab(str(p), i, {a.name: a for a in res.arrays}))
    return out


def test_misaligned_tiles_are_placed_at_their_srcwin_offsets(cut) -> None:
    slabs = _slabs(cut["misaligned"])
    mp = make_mosaic_plan(slabs, require_aligned=False)
    assert mp.plan.arrays["image"].shape == (300, 400)
    assert mp.plan.arrays["image"].attrs["transform"]["value"] == _gdal_transform(cut["src"])
    for s in slabs:
        i, j = int(Path(s.location).stem[6]), int(Path(s.location).stem[8])
        assert mp.plan.placements[(s.location, "image")] == (MISALIGNED[0][i], MISALIGNED[1][j])
    assert mp.gaps == ()
    with pytest.raises(PlanError, match="off its 64x64 block grid"):
        make_mosaic_plan(slabs, require_aligned=True)


def test_misaligned_mosaic_reads_as_the_original(cut, tmp_path: Path, new_collection) -> None:
    folder = _folder(cut, tmp_path, "misaligned")
    col = new_collection()
    refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    expected = _original(cut, MISALIGNED)
    ds = refstore.open(col)
    assert_same(ds["image"][...], expected, "misaligned mosaic")
    assert_same(ds["image"][37:251, 13:377], expected[37:251, 13:377], "window across misaligned tiles")
    grid = json.loads(run("-C", col, "info", "--json").stdout)["arrays"]["image"]["chunk_grid"]
    assert "rectilinear" in json.dumps(grid)
    import xarray as xr
    import zarr

    from refstore.read.verify import verify

    assert_same(xr.open_dataset(col, engine="refstore", mask_and_scale=False)["image"].values, expected, "xarray")
    assert_same(zarr.open_group(refstore.zarr_store(col), mode="r")["image"][...], expected, "zarr store")
    v = verify(ds.snapshot)
    assert v.checked > 0 and v.mismatched == 0
    r = run("-C", col, "emit", "kerchunk-json", str(tmp_path / "m.json"))
    assert r.returncode == 2 and "image" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    if shutil.which("gdalmdimtranslate") is not None:
        import netCDF4

        from refstore.emit import emit

        from .readers.vrt import translate

        emit(refstore.Collection.open(col), "vrt", str(tmp_path / "m.vrt"))
        translate(str(tmp_path / "m.vrt"), str(tmp_path / "m.nc"))
        with netCDF4.Dataset(tmp_path / "m.nc") as nc:
            var = nc["image"]
            var.set_auto_maskandscale(False)
            assert_same(np.asarray(var[...]), expected, "VRT through gdalmdimtranslate")


def test_mosaic_per_date_stacked_along_time(cut, tmp_path: Path, new_collection) -> None:
    second = write_raster(tmp_path / "second.tif", seed=1)
    folder = tmp_path / "dated"
    folder.mkdir()
    for p in cut["aligned"]:  # day 1: the module's tiles, renamed
        if p.name != f"tile_r{HOLE[0]}c{HOLE[1]}.tif":
            shutil.copy2(p, folder / f"{p.stem}_20240101.tif")
    cut_tiles(second, folder, ALIGNED, skip=[(0, 0)], suffix="_20240102")
    col = new_collection()
    rep = refstore.scan(col, [str(folder)], mosaic=True, concat_dim="time", time_from_name="%Y%m%d", timeout=None)
    assert rep.mosaic is not None and rep.mosaic["dates"] == 2 and rep.new == 22
    day2 = tifffile.imread(second)
    day2[_box(ALIGNED, 0, 0)] = NODATA
    ds = refstore.open(col)
    assert_same(ds["image"][...], np.stack([_original(cut), day2]), "mosaic x time")
    assert ds["time"][...].tolist() == [1704067200, 1704153600]
    from refstore.plan.region import parse_time_range

    h = hold(
        refstore.Collection.open(col), HoldSelection(arrays=("image",), time=parse_time_range("2024-01-02/2024-01-02"))
    )
    assert h.chunks == 5 * 7 - 2  # day 2 lacks tile (0, 0): rows 0..128, cols 0..64
    assert ds["image"].attrs["transform"].tolist() == _gdal_transform(cut["src"])


def test_tiles_added_west_and_north_move_every_placement(cut, tmp_path: Path, new_collection) -> None:
    folder = tmp_path / "grow"
    folder.mkdir()
    first = [p for p in cut["aligned"] if "r0" not in p.name and "c0" not in p.name]
    for p in first:
        shutil.copy2(p, folder / p.name)
    col = new_collection()
    refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    expected = tifffile.imread(cut["src"])
    assert_same(refstore.open(col)["image"][...], expected[ALIGNED[0][1] :, ALIGNED[1][1] :], "south-east part")
    for p in cut["aligned"]:
        shutil.copy2(p, folder / p.name)
    rep = refstore.scan(col, [str(folder)], timeout=None)
    assert (rep.new, rep.unchanged) == (6, 6)
    # the first tiles' blocks (rows 128..300, cols 64..400: 3 x 6) are re-keyed: the origin moved
    assert (rep.updated, rep.inserted) == (3 * 6, 5 * 7 - 3 * 6)
    img = refstore.open(col)["image"]
    assert_same(img[...], expected, "whole raster")
    assert img.attrs["transform"].tolist() == _gdal_transform(cut["src"])
    other = new_collection("plain")
    refstore.scan(other, [str(first[0])], timeout=None)
    with pytest.raises(PlanError, match="built without --mosaic"):
        refstore.scan(other, [str(first[1])], mosaic=True, timeout=None)


@pytest.fixture(scope="module")
def levels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Tiles written with tifffile (an overview and a GDAL mask each, no GDAL_NODATA; tile (1, 1)
    missing) scanned with --mosaic; ``expected`` is cut from the numpy raster the tiles came from."""
    from refstore.fixtures.mosaic import projected_geotags

    d = tmp_path_factory.mktemp("levels")
    rng = np.random.default_rng(5)
    truth = rng.integers(1, 60000, (128, 192)).astype("<u2")
    mask = rng.random((128, 192)) > 0.2
    folder = d / "tiles"
    folder.mkdir()
    for i in range(2):
        for j in range(3):
            if (i, j) == (1, 1):
                continue  # the hole
            box = (slice(64 * i, 64 * i + 64), slice(64 * j, 64 * j + 64))
            tags = projected_geotags(300000.0 + 64 * j * 10, 5000000.0 - 64 * i * 10, 10.0, 32633)
            with tifffile.TiffWriter(folder / f"t{i}{j}.tif") as w:
                w.write(truth[box], tile=(32, 32), compression="zlib", predictor=2, extratags=tags, metadata=None)
                w.write(truth[box][::2, ::2], tile=(32, 32), compression="zlib", predictor=2, subfiletype=1,
                        metadata=None)  # fmt: skip
                w.write(mask[box], tile=(32, 32), compression="zlib", subfiletype=4, metadata=None)
    col = str(d / "col")
    refstore.init(col)
    rep = refstore.scan(col, [str(folder)], mosaic=True, timeout=None)
    image = truth.copy()
    image[64:128, 64:128] = 0
    over = truth[::2, ::2].copy()
    over[32:64, 32:64] = 0
    m = mask.copy()
    m[64:128, 64:128] = False
    return {"col": col, "report": rep, "expected": {"image": image, "overview_1": over, "mask": m}}


def test_overview_and_mask_levels_are_mosaicked_and_gaps_read_0_without_nodata(levels) -> None:
    rep = levels["report"]
    assert rep.mosaic is not None and rep.mosaic["dropped"] == []
    ds = refstore.open(levels["col"])
    assert sorted(ds.arrays) == ["image", "mask", "overview_1"]
    for name, expected in levels["expected"].items():
        assert_same(ds[name][...], expected, name)
    assert ds["overview_1"].attrs["transform"].tolist() == [300000.0, 20.0, 0.0, 5000000.0, 0.0, -20.0]


def _forms() -> list[str]:
    from .test_emit_roundtrip import READERS

    return sorted(READERS)


@pytest.mark.parametrize("fmt", _forms())
def test_every_form_reads_the_mosaic(levels, fmt: str, tmp_path: Path) -> None:
    """Each published form of the mosaic, reopened by its own reader (tests/readers/), equals the
    raster; arrays a form refuses (the 1-bit mask's bitunpack in zarr forms) are refused by name."""
    from refstore.emit import emit

    from ._emit_cases import Case
    from .test_emit_roundtrip import READERS

    out = str(tmp_path / f"mosaic.{fmt}")
    rep = emit(refstore.Collection.open(levels["col"]), fmt, out, skip_unexpressible=True)
    assert "image" not in rep.skipped and "overview_1" not in rep.skipped
    arrays = READERS[fmt].open_form(out, Case("mosaic", levels["col"]))
    for name, expected in levels["expected"].items():
        if name in rep.skipped:
            continue
        assert_same(arrays[name][...], expected, f"{fmt} {name}")


def _albers_tile(path: Path, x0: float, parallel: float) -> Path:
    """A tile in a user-defined Albers CRS (ProjectedCSTypeGeoKey 32767 on a WGS 84 datum, as
    LCMAP's COGs have it): its GeographicTypeGeoKey 4326 is only the datum."""
    keys = [1, 1, 0, 9, 1024, 0, 1, 1, 1025, 0, 1, 1, 2048, 0, 1, 4326, 3072, 0, 1, 32767, 3074, 0, 1, 32767,
            3075, 0, 1, 11, 3078, 34736, 1, 0, 3079, 34736, 1, 1, 3088, 34736, 1, 2]  # fmt: skip
    tags = [(33550, "d", 3, (30.0, 30.0, 0.0), True), (33922, "d", 6, (0.0, 0.0, 0.0, x0, 2700405.0, 0.0), True),
            (34735, "H", len(keys), tuple(keys), True), (34736, "d", 3, (parallel, 45.5, -96.0), True)]  # fmt: skip
    tifffile.imwrite(path, np.ones((32, 32), "<u2"), tile=(32, 32), compression="zlib", extratags=tags, metadata=None)
    return path


def test_a_user_defined_crs_is_told_apart_by_its_geokeys(tmp_path: Path) -> None:
    a = _albers_tile(tmp_path / "a.tif", -1801185.0, 29.5)
    wkt = json.loads(subprocess.run(["gdalinfo", "-json", str(a)], capture_output=True, text=True).stdout)
    assert "Albers" in wkt["coordinateSystem"]["wkt"]  # GDAL: projected, not EPSG:4326
    attrs = TiffScanner()(str(a)).arrays[0].attrs
    assert "crs" not in attrs and "ProjStdParallel1GeoKey=29.5" in attrs["crs_geokeys"]["value"]
    same = _albers_tile(tmp_path / "b.tif", -1801185.0 + 32 * 30.0, 29.5)
    other = _albers_tile(tmp_path / "c.tif", -1801185.0 + 32 * 30.0, 30.5)
    mp = make_mosaic_plan(_slabs([a, same]))
    assert mp.plan.arrays["image"].shape == (32, 64)
    with pytest.raises(PlanError, match=r"c\.tif and .*a\.tif have different CRS"):
        make_mosaic_plan(_slabs([a, other]))


def test_pixel_is_point_tiles_join_pixel_is_area_ones_on_gdals_grid(tmp_path: Path) -> None:
    """A PixelIsPoint tile's tiepoint is a pixel centre; GDAL (the oracle, ``gdalinfo -json``)
    reports its corner origin, and the mosaic places it there."""
    from refstore.fixtures.mosaic import projected_geotags

    def write(path: Path, x0: float, y0: float, point: bool) -> Path:
        tags = projected_geotags(x0, y0, 30.0, 32633)
        if point:  # GTRasterTypeGeoKey (1025) = 2: RasterPixelIsPoint
            keys = list(tags[2][3])
            keys[keys.index(1025) + 3] = 2
            tags[2] = (34735, "H", len(keys), tuple(keys), True)
        tifffile.imwrite(path, np.ones((32, 32), "<u2"), tile=(32, 32), extratags=tags, metadata=None)
        return path

    a = write(tmp_path / "area.tif", 500000.0, 4650000.0, point=False)
    b = write(tmp_path / "point.tif", 500000.0 + 32 * 30.0 + 15.0, 4650000.0 - 15.0, point=True)
    x0_b, _, _, y0_b, _, _ = _gdal_transform(b)
    mp = make_mosaic_plan(_slabs([a, b]))
    want = (round((4650000.0 - y0_b) / 30.0), round((x0_b - 500000.0) / 30.0))
    assert mp.plan.placements[(str(b), "image")] == want == (0, 32)
