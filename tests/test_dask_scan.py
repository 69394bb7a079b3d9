"""Scans on a Dask cluster (a real LocalCluster of two worker processes): workers write Lance
fragments, one commit publishes them; the table equals a local scan's; a failure commits nothing."""

from __future__ import annotations

import math
import shutil
from datetime import date
from pathlib import Path

import lance
import pytest

import refstore
from refstore.fixtures.oisst import write_day
from refstore.table import diff

from ._oracle import assert_same, series_read
from ._s3 import S3

distributed = pytest.importorskip("distributed")

_SKIP = {"_rowid", "held"}


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _rows(col: str) -> list[tuple[object, ...]]:
    """Every row of the latest version except the head row's random id, in key order."""
    ds = lance.dataset(col)
    cols = [f.name for f in ds.schema if f.name not in _SKIP]
    t = ds.to_table(columns=cols, filter="kind != 'collection'")

    def plain(v: object) -> object:
        return None if isinstance(v, float) and math.isnan(v) else v  # NaN != NaN would fail any row

    return sorted((tuple(plain(r[c]) for c in cols) for r in t.to_pylist()), key=repr)


def _day(folder: Path, d: int, seed: int = 0) -> Path:
    day = date(2024, 1, 1 + d)
    return write_day(folder / f"oisst.{day:%Y%m%d}.nc", day, seed=seed)


def test_dask_scan_equals_local_scan(client, tmp_path: Path, new_collection) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for d in (0, 1, 3, 4, 5):
        _day(data, d)
    local, remote = new_collection("local"), new_collection("dask")
    a = refstore.scan(local, [str(data)], concat_dim="time", workers=1)
    b = refstore.scan(remote, [str(data)], concat_dim="time", client=client)
    assert (b.new, b.committed, b.inserted) == (5, True, a.inserted)
    assert lance.dataset(remote).version == 2  # init + one scan: one version
    # the chunk rows came as fragments written by the workers (one per batch of new sources)
    assert len(lance.dataset(remote).get_fragments()) >= len(lance.dataset(local).get_fragments()) + 4
    assert _rows(remote) == _rows(local)

    # next run: a day lands in the middle (later sources are re-placed), one file is reprocessed
    _day(data, 2)
    _day(data, 4, seed=7)
    a2 = refstore.scan(local, [str(data)], concat_dim="time", workers=1)
    b2 = refstore.scan(remote, [str(data)], concat_dim="time", client=client)
    assert (b2.new, b2.changed, b2.unchanged) == (1, 1, 4)
    assert (b2.inserted, b2.updated, b2.deleted) == (a2.inserted, a2.updated, a2.deleted)
    assert _rows(remote) == _rows(local)
    assert lance.dataset(remote).version == 3
    # the fragments carry row ids and row versions: the fast diff agrees with the full join
    col = refstore.Collection.open(remote)
    fast, full = diff(col, 2, 3), diff(col, 2, 3, exhaustive=True)
    assert fast.to_json() == full.to_json() and fast.differs
    ds = refstore.open(remote)
    files = sorted(str(p) for p in data.glob("*.nc"))  # dated names: in time order
    assert_same(ds["sst"][...], series_read(files, "sst", "time"), "sst scanned by dask workers")
    v = refstore.verify(col.snapshot(), sample=40)
    assert v.mismatched == 0


def test_a_failing_source_with_strict_commits_nothing(client, tmp_path: Path, series, new_collection) -> None:
    files = series(3)
    bad = files[0].parent / "oisst-avhrr-v02r01.20240110.nc"
    bad.write_bytes(files[0].read_bytes()[:3000])  # truncated
    col = new_collection()
    before = lance.dataset(col).version
    with pytest.raises(refstore.ScanError, match="nothing committed"):
        refstore.scan(col, [str(files[0].parent)], concat_dim="time", client=client, strict=True)
    assert lance.dataset(col).version == before
    rep = refstore.scan(col, [str(files[0].parent)], concat_dim="time", client=client)
    assert rep.new == 3 and len(rep.failed) == 1


def test_workers_that_cannot_write_commit_nothing(s3: S3, tmp_path: Path, series) -> None:
    """Workers whose environment does not reach the collection's store (plain HTTP not allowed
    there, a real misconfiguration): their fragment writes fail and the version does not move."""
    files = series(2)
    col = s3.url("cols/c")
    refstore.init(col)
    before = lance.dataset(col).version
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", env={"AWS_ALLOW_HTTP": "false"}
        ) as cluster,
        distributed.Client(cluster) as c,
        pytest.raises(refstore.StorageError, match=r"failed writing fragments.*nothing committed"),
    ):
        refstore.scan(col, [str(files[0].parent)], concat_dim="time", client=c)
    assert lance.dataset(col).version == before
    assert lance.dataset(col).count_rows("kind = 'chunk'") == 0
    shutil.rmtree(files[0].parent)


def test_cli_scan_on_a_dask_scheduler(client, tmp_path: Path, series) -> None:
    import json

    from ._cli import invoke

    files = series(3)
    col = str(tmp_path / "col")
    assert invoke("-C", col, "init").returncode == 0
    address = client.scheduler.address
    r = invoke("-C", col, "scan", str(files[0].parent), "--concat-dim", "time", "--dask", address, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sources"]["new"] == 3
    assert refstore.open(col)["sst"].shape == (3, 1, 45, 90)



@pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="GDAL's tools are not installed")
@pytest.mark.parametrize("layout", ["misaligned", "staggered"])
def test_dask_scan_of_a_mosaic_equals_local_scan(client, tmp_path: Path, new_collection, layout: str) -> None:
    """``scan --mosaic --dask``: tiles off the block grid (a rectilinear grid) or in a brick
    layout (no grid: coarse keys) keyed by the workers exactly as a local scan keys them; the
    mosaic reads as the raster the tiles were cut from (tifffile)."""
    import tifffile

    from refstore.fixtures.mosaic import MISALIGNED, STAGGERED, cut_boxes, cut_tiles, write_raster

    src = write_raster(tmp_path / "original.tif")
    tiles = tmp_path / "tiles"
    if layout == "misaligned":
        cut_tiles(src, tiles, MISALIGNED)
    else:
        cut_boxes(src, tiles, STAGGERED)
    first = tmp_path / "first"  # without the first row of tiles: adding it moves every placement
    first.mkdir()
    for p in tiles.glob("tile_r[!0]*.tif"):
        shutil.copy2(p, first / p.name)
    local, remote = new_collection("local"), new_collection("dask")
    refstore.scan(local, [str(first)], mosaic=True, workers=1)
    refstore.scan(remote, [str(first)], mosaic=True, client=client)
    assert _rows(remote) == _rows(local)
    for p in tiles.glob("tile_r0*.tif"):
        shutil.copy2(p, first / p.name)
    a = refstore.scan(local, [str(first)], workers=1)
    b = refstore.scan(remote, [str(first)], client=client)
    assert (b.new, b.committed, b.inserted, b.updated) == (len(list(tiles.glob("tile_r0*"))), True, a.inserted,
                                                           a.updated)  # fmt: skip
    assert b.updated > 0 and _rows(remote) == _rows(local)
    img = refstore.open(remote)["image"]
    assert img.meta.gridless == (layout == "staggered") and bool(img.meta.edges) == (layout == "misaligned")
    assert_same(img[...], tifffile.imread(src), f"{layout} mosaic scanned by dask workers")


def test_dask_scan_of_tiles_of_different_layouts_equals_local_scan(client, tmp_path: Path, new_collection) -> None:
    """Tiles that keep their own block shapes and codecs (keys counted in the gcd cell,
    ``Plan.steps``) are keyed by the workers exactly as a local scan keys them, before and after
    a rescan adds the missing tile; the mosaic reads as tifffile places the tiles."""
    from .test_mosaic_layouts import HOLE, LAYOUTS, _raster, _tifffile_mosaic, _write

    full = _raster()
    folder = tmp_path / "tiles"
    folder.mkdir()
    paths = [_write(folder, full, ij) for ij in LAYOUTS if ij != HOLE]
    local, remote = new_collection("local"), new_collection("dask")
    refstore.scan(local, [str(folder)], mosaic=True, workers=1)
    refstore.scan(remote, [str(folder)], mosaic=True, client=client)
    assert _rows(remote) == _rows(local)
    assert_same(refstore.open(remote)["image"][...], _tifffile_mosaic(paths)[0], "mixed layouts by dask workers")
    _write(folder, full, HOLE)
    refstore.scan(local, [str(folder)], workers=1)
    b = refstore.scan(remote, [str(folder)], client=client)
    assert b.new == 1 and _rows(remote) == _rows(local)
    assert_same(refstore.open(remote)["image"][...], full, "every tile")
