"""GeoTIFF/COG: every IFD read through refstore equals tifffile's ``page.asarray()``."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import tifffile

import refstore
from refstore.fixtures.tiff import write_cases, write_tiff
from refstore.read.verify import tiff_window
from refstore.scan.tiff import time_from_name

from ._oracle import TIFF_WHOLE_MAX, assert_same, tiff_names, tiff_read, tiff_series_read, unix_seconds
from .conftest import SHARED_DATA, shared_files

TIFFS = [p for p in shared_files() if p.suffix == ".tif"]
BIG = TIFF_WHOLE_MAX  # elements: larger arrays are checked by windows (tifffile's zarr store) and sampled verify


def _check(col: str, path: Path) -> refstore.Dataset:
    ds = refstore.open(col)
    snap = ds.snapshot
    with tifffile.TiffFile(path) as tif:
        pages = list(tif.pages)
        names = tiff_names(pages)  # as the README names IFDs
        assert sorted(ds.arrays) == sorted(names)
        for name, page in zip(names, pages, strict=True):
            arr = ds[name]
            assert arr.meta.status == "ok", (name, arr.meta.reason)
            assert arr.shape == page.shape and arr.dtype.newbyteorder("=") == page.dtype.newbyteorder("=")
            rows = snap.rows("chunk", ["offset", "length"], f"array = '{name}'").to_pylist()
            want = {(o, n) for o, n in zip(page.dataoffsets, page.databytecounts, strict=True) if n}
            assert {(r["offset"], r["length"]) for r in rows} == want
            if int(np.prod(page.shape)) > BIG:  # tifffile's zarr store decodes the window's tiles
                for win in ((slice(0, 700), slice(1000, 1600)), tuple(slice(n - 600, n) for n in page.shape[:2])):
                    assert_same(arr[win], tiff_read(path, name, win), f"{name}{win}")
                continue
            if int(np.prod(page.shape)) < 5_000_000:  # verify's windowed reader agrees with asarray
                win = (slice(3, 301), slice(7, 509))[: 2 if len(page.shape) >= 2 else 1]
                assert_same(tiff_window(page, tif.filehandle, win), page.asarray()[win], f"tiff_window {name}")
            assert_same(arr[...], page.asarray(), name)
    return ds


@pytest.mark.skipif(not TIFFS, reason="../shared/data is not present")
@pytest.mark.parametrize("path", TIFFS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_tiff_conforms(path: Path, new_collection) -> None:
    col = new_collection()
    rep = refstore.scan(col, [str(path)])
    assert rep.failed == () and rep.unsupported == ()
    ds = _check(col, path)
    assert refstore.verify(ds.snapshot, sample=60).mismatched == 0


def test_generated_cases(tmp_path: Path, new_collection) -> None:
    cases = write_cases(tmp_path / "tif")
    col = new_collection()
    with pytest.raises(refstore.PlanError, match="scan with --concat-dim"):  # same names, no series
        refstore.scan(col, [str(tmp_path / "tif")])
    for path in cases.values():
        c = new_collection(path.stem)
        refstore.scan(c, [str(path)])
        _check(c, path)
    one = new_collection("nodata")
    refstore.scan(one, [str(cases["int16_nodata"])])
    img = refstore.open(one)["image"]
    assert img.attrs["nodata"] == np.int16(-32768) and img.fill_value == -32768
    assert img.attrs["crs"] == "EPSG:4326"
    assert img.attrs["transform"].tolist() == [100.0, 0.25, 0.0, -10.0, 0.0, -0.25]
    strip = new_collection("strip")
    refstore.scan(strip, [str(cases["short_strip"])])
    assert refstore.open(strip)["image"].chunks == (16, 170, 3)  # 203 rows: the last strip is short


def test_cog_series_along_time(tmp_path: Path, new_collection) -> None:
    series = sorted((SHARED_DATA / "gh-noaa-cdr-seaflux-series").glob("*.tif")) if SHARED_DATA.is_dir() else []
    if not series:
        pytest.skip("../shared/data is not present")
    col = new_collection()
    # the names date these 3-hourly steps by day only: eight files at the same time are refused
    with pytest.raises(refstore.PlanError, match="same 'time' coordinate") as e:
        refstore.scan(col, [str(p) for p in series], concat_dim="time", time_from_name="D%Y%m%d")
    assert series[0].name in str(e.value) and series[1].name in str(e.value)
    steps = tmp_path / "steps"  # copies whose names carry the hour of their step (-0- is 00Z, -1- 03Z...)
    steps.mkdir()
    for i, p in enumerate(series):
        shutil.copyfile(p, steps / f"seaflux_sst_20210831{3 * i:02d}.tif")
    rep = refstore.scan(col, [str(steps)], concat_dim="time", time_from_name="sst_%Y%m%d%H")
    assert rep.new == 8 and rep.failed == ()
    ds = refstore.open(col)
    img = ds["image"]
    assert img.shape == (8, 720, 1440) and img.dims == ("time", "y", "x") and img.chunks == (1, 512, 512)
    expected = np.stack([tifffile.imread(p) for p in series])
    assert_same(img[:, 100:600, 700:1300], expected[:, 100:600, 700:1300], "image")
    assert_same(ds["overview_2"][...], tiff_series_read([str(p) for p in series], [], "overview_2"), "overview_2")
    when = [unix_seconds(datetime(2021, 8, 31, 3 * i)) for i in range(8)]  # each step's hour, from the names
    assert_same(ds["time"][...], np.array(when, "<i8"), "time")
    assert refstore.verify(ds.snapshot, sample=40).mismatched == 0


def test_dated_series_orders_by_date_and_refuses_other_grids(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "s"
    d.mkdir()
    rng = np.random.default_rng(0)
    arrays = {}
    for day in ("20240103", "20240101", "20240102"):
        arrays[day] = rng.normal(size=(64, 80)).astype("f4")
        write_tiff(d / f"sst_{day}.tif", arrays[day], tile=(32, 32), compression="zlib")
    col = new_collection()
    refstore.scan(col, [str(d)], concat_dim="time", time_from_name="sst_%Y%m%d")
    ds = refstore.open(col)
    files = [str(d / f"sst_{k}.tif") for k in sorted(arrays)]
    assert_same(ds["image"][...], np.stack([tifffile.imread(p) for p in files]), "image")
    when = [unix_seconds(datetime(2024, 1, day)) for day in (1, 2, 3)]
    assert_same(ds["time"][...], np.array(when, "<i8"), "time")
    # a file on another grid is refused, naming both files
    write_tiff(d / "sst_20240104.tif", arrays["20240101"], tile=(32, 32), compression="zlib", x0=50.0)
    with pytest.raises(refstore.PlanError, match="different grid") as e:
        refstore.scan(col, [str(d)])
    assert "sst_20240104.tif" in str(e.value)
    # a file without a date in its name fails to scan (reported), the rest is kept
    (d / "sst_20240104.tif").unlink()
    shutil.copy(d / "sst_20240101.tif", d / "undated.tif")
    rep = refstore.scan(col, [str(d)])
    assert [s for s, _ in rep.failed] == [str(d / "undated.tif")]


def test_time_from_name() -> None:
    assert time_from_name("D%Y%m%d", "X_D20210831_C1.tif").isoformat() == "2021-08-31T00:00:00+00:00"
    assert time_from_name("%Y%m-grd-scaled-%d", "tavg-202201-grd-scaled-02.tif").day == 2
    assert time_from_name("D%Y%m%d", "nothing.tif") is None
    assert time_from_name("%Y%m%d", "run98765432_20210831.tif").isoformat()[:10] == "2021-08-31"  # every match
    with pytest.raises(refstore.BadInputError, match="no date code"):
        time_from_name("sst", "sst.tif")


def test_strip_series_flag_short_strips_on_the_y_axis(tmp_path: Path, new_collection) -> None:
    """With the concat dimension in front, ``short_edge`` still tests the image's rows: an
    evenly divided image is not short, a short last strip is, chunky, planar or grey."""
    from ._emit_cases import STRIP_SERIES, write_strip_series

    for name, files in write_strip_series(tmp_path / "tif").items():
        col = new_collection(name)
        refstore.scan(col, [str(p) for p in files], concat_dim="time", time_from_name="%Y%m%d")
        img = refstore.open(col)["image"]
        shape, rows, _kw, short = STRIP_SERIES[name]
        assert img.shape == (2, *shape) and img.meta.short_edge is short, name
        assert img.chunks[2 if "planarconfig" in _kw else 1] == rows, name
        assert_same(img[...], np.stack([tifffile.imread(p) for p in files]), name)
        # a single file of the same kind gets the same flag
        one = new_collection(f"{name}-one")
        refstore.scan(one, [str(files[0])])
        assert refstore.open(one)["image"].meta.short_edge is short, name


def test_one_bit_masks_and_an_unsupported_four_bit_overview(tmp_path: Path, new_collection) -> None:
    """1-bit mask IFDs (bit-packed rows) read as tifffile's booleans; a 4-bit IFD is recorded as
    unsupported with its reason and the rest of the file is scanned."""
    from ._emit_cases import write_onebit_tiff

    p = write_onebit_tiff(tmp_path / "masked.tif")
    col = new_collection()
    rep = refstore.scan(col, [str(p)])
    assert rep.failed == () and rep.unsupported == ((str(p), "overview_1", "4-bit samples are not supported"),)
    ds = refstore.open(col)
    with tifffile.TiffFile(p) as tif:
        assert sorted(ds.arrays) == sorted(tiff_names(list(tif.pages)))
    for name in ("image", "mask", "mask_overview_1"):
        assert_same(ds[name][...], tiff_read(p, name), name)
        assert_same(ds[name][5:40, 3:17], tiff_read(p, name, (slice(5, 40), slice(3, 17))), f"{name} window")
    assert ds["overview_1"].meta.status == "unsupported"


def test_complex_integer_samples_are_refused_by_name(tmp_path: Path, new_collection) -> None:
    """SampleFormat 5 (complex integers, Sentinel-1 SLC's CInt16): tifffile widens the pairs to
    complex floats, so the stored bytes have no numpy dtype; refused by name, never served wrong."""
    import numpy as np

    p = tmp_path / "cint16.tif"
    tifffile.imwrite(p, np.arange(64, dtype="<i4").reshape(8, 8), rowsperstrip=4, compression="zlib")
    with tifffile.TiffFile(p) as tif:
        at = tif.pages.first.tags["SampleFormat"].valueoffset
    with open(p, "r+b") as fh:  # SampleFormat 2 (int) -> 5 (complex int): 2 x int16 per sample
        fh.seek(at)
        fh.write((5).to_bytes(2, "little"))
    with tifffile.TiffFile(p) as tif:
        assert tif.pages.first.sampleformat == 5 and tif.pages.first.dtype == np.complex64
    col = new_collection()
    rep = refstore.scan(col, [str(p)])
    assert rep.failed == ()
    [(_, name, why)] = rep.unsupported
    assert name == "image" and "complex integer samples" in why
