"""The TIFF scanner against tifffile (IFDs, segment offsets and byte counts, shapes, dtypes) and
GDAL's gdalinfo (geotransform, CRS, nodata), in-process and without a collection: the mutation
run's fast test list for ``scan/tiff.py`` and ``scan/_tiff_guard.py`` (``./dev mutate tiff``).
Codec expectations follow the README's table (compression tag -> codec, predictor 2 -> delta,
3 -> floatpred along the x axis of a chunk, 1-bit samples -> bitunpack).
"""

from __future__ import annotations

import base64
import json
import math
import re
import shutil
import struct
import subprocess
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import tifffile

from refstore._keys import MAX_DIMS, NO_DIM
from refstore._values import decode_attr, decode_fill
from refstore.errors import BadInputError, ScanError
from refstore.fixtures.tiff import geotags, write_cases
from refstore.scan._tiff_guard import MAX_IFDS, MAX_SEGMENTS, check_tiff_counts
from refstore.scan.tiff import TiffScanner, time_from_name

from ._oracle import cached, tiff_names

if TYPE_CHECKING:
    from pathlib import Path

    from refstore.scan._types import ScanResult

_CODEC = {1: None, 5: "lzw", 8: "zlib", 32946: "zlib", 50000: "zstd", 32773: "packbits", 34887: "lerc", 7: "jpeg"}


def _geokeys(pairs: list[tuple[int, int, int, int]]) -> tuple[int, ...]:
    return (1, 1, 0, len(pairs), *[v for p in pairs for v in p])


def _warm() -> None:
    """The scanner's first call imports and sets up what it needs lazily (~0.6 s a process): done
    here, at import, so the mutation run's mutants (forked from a process that imported this
    module) start warm."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        for path in write_cases(Path(d)).values():
            TiffScanner()(str(path))


_warm()


@pytest.fixture(scope="module")
def tiffs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tif")
    out = write_cases(d)
    rng = np.random.default_rng(11)
    img = rng.integers(0, 200, (40, 50)).astype("u1")
    # a COG-like file: full image, overviews, an internal mask and its overview
    p = out["masked"] = d / "masked.tif"
    with tifffile.TiffWriter(p) as w:
        w.write(img, tile=(16, 16), compression="zlib", extratags=geotags(), metadata=None)
        w.write(img[::2, ::2], tile=(16, 16), subfiletype=1, metadata=None)
        w.write(img[::4, ::4], tile=(16, 16), subfiletype=1, metadata=None)
        w.write(img > 50, tile=(16, 16), subfiletype=4, compression="zlib", metadata=None)
        w.write(img[::2, ::2] > 50, tile=(16, 16), subfiletype=5, metadata=None)
    p = out["two_images"] = d / "two_images.tif"
    with tifffile.TiffWriter(p, bigtiff=True) as w:
        w.write(img, rowsperstrip=7, metadata=None)
        w.write(img.astype("<f8"), rowsperstrip=40, predictor=3, compression="zlib", metadata=None)
        w.write(img > 9, rowsperstrip=9, subfiletype=4, metadata=None)
        w.write(img > 9, rowsperstrip=9, subfiletype=4, metadata=None)
    # PixelIsPoint, projected EPSG, a rotated ModelTransformation, a citation-only CRS
    point = _geokeys([(1024, 0, 1, 1), (1025, 0, 1, 2), (3072, 0, 1, 32633)])
    tifffile.imwrite(p := d / "point.tif", img, metadata=None, extratags=[
        (33550, "d", 3, (30.0, 20.0, 0.0), True), (33922, "d", 6, (0, 0, 0, 500000.0, 4000000.0, 0), True),
        (34735, "H", len(point), point, True), (42113, "s", 0, "7", True)])  # fmt: skip
    out["point"] = p
    rot = _geokeys([(1024, 0, 1, 2), (1025, 0, 1, 1), (2048, 0, 1, 4326)])
    m = (0.5, 0.1, 0.0, 10.0, 0.05, -0.5, 0.0, 50.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    tifffile.imwrite(p := d / "rotated.tif", img.astype("<f4"), metadata=None, extratags=[
        (34264, "d", 16, m, True), (34735, "H", len(rot), rot, True), (42113, "s", 0, "nan", True)])  # fmt: skip
    out["rotated"] = p
    cit = _geokeys([(1024, 0, 1, 1), (1025, 0, 1, 1), (1026, 34737, 12, 0), (2054, 0, 1, 9102)])
    tifffile.imwrite(p := d / "citation.tif", img.astype("<i2"), metadata=None, extratags=[
        (33550, "d", 3, (1.0, 1.0, 0.0), True), (33922, "d", 6, (0, 0, 0, 0.0, 0.0, 0), True),
        (34735, "H", len(cit), cit, True), (34737, "s", 0, "my local cs|", True),
        (42113, "s", 0, "1e40", True)])  # fmt: skip
    out["citation"] = p
    tie = _geokeys([(1024, 0, 1, 2), (1025, 0, 1, 1), (2048, 0, 1, 4326)])
    tifffile.imwrite(p := d / "tiepoint.tif", img, metadata=None, extratags=[
        (33550, "d", 3, (0.5, 0.25, 0.0), True), (33922, "d", 6, (10.0, 5.0, 0.0, 30.0, 60.0, 0.0), True),
        (34735, "H", len(tie), tie, True)])  # fmt: skip
    out["tiepoint"] = p
    tifffile.imwrite(p := d / "scale_only.tif", img, metadata=None, extratags=[
        (33550, "d", 3, (0.5, 0.25, 0.0), True), (34735, "H", len(tie), tie, True)])  # fmt: skip
    out["scale_only"] = p
    tifffile.imwrite(p := d / "bilevel.tif", np.eye(10, 13, dtype=bool), rowsperstrip=3, metadata=None)
    out["bilevel"] = p
    tifffile.imwrite(p := d / "b12.tif", np.arange(64, dtype="u2").reshape(8, 8), bitspersample=12, metadata=None,
                     extratags=geotags())  # fmt: skip
    out["b12"] = p
    tifffile.imwrite(p := d / "lzma.tif", np.arange(64, dtype="u2").reshape(8, 8), compression="lzma", metadata=None)
    out["lzma"] = p
    tifffile.imwrite(p := d / "dated.tif", img, tile=(16, 32), datetime="2021:03:04 05:06:07", metadata=None,
                     extratags=[(42113, "s", 0, "3.5", True)])  # fmt: skip
    out["dated"] = p
    tifffile.imwrite(p := d / "badnodata.tif", img.astype("<f4"), metadata=None,
                     extratags=[(42113, "s", 0, "abc", True), (306, "s", 0, "not a date", True)])  # fmt: skip
    out["badnodata"] = p
    # GeoKey layouts written by hand, each read by GDAL (gdalinfo, gdalsrsinfo) in the test below
    scale = [(33550, "d", 3, (0.5, 0.5, 0.0), True), (33922, "d", 6, (0, 0, 0, 10.0, 50.0, 0), True)]
    keyed: dict[str, list[tuple[int, int, int, int]]] = {
        "geog_citation": [(1024, 0, 1, 2), (1025, 0, 1, 1), (2049, 34737, 9, 0)],  # GeogCitationGeoKey only
        "float_citation": [(1024, 0, 1, 2), (1025, 0, 1, 1), (1026, 34736, 1, 0)],  # a citation that is no text
        "geographic_with_pcs": [(1024, 0, 1, 2), (1025, 0, 1, 1), (2048, 0, 1, 4326), (3072, 0, 1, 32633)],
        "no_model_pcs": [(1025, 0, 1, 1), (3072, 0, 1, 32633)],
        "no_model_gcs": [(1025, 0, 1, 1), (2048, 0, 1, 4326)],
        "user_defined_pcs": [(1024, 0, 1, 1), (1025, 0, 1, 1), (2048, 0, 1, 4326), (3072, 0, 1, 32767)],
        "pcs_not_in_tifffile": [(1024, 0, 1, 1), (1025, 0, 1, 1), (3072, 0, 1, 3857)],  # a plain int, no enum
        "double_gcs": [(1024, 0, 1, 2), (1025, 0, 1, 1), (2048, 34736, 1, 1)],  # 4326.5 among the doubles
        "no_raster_type": [(1024, 0, 1, 2), (2048, 0, 1, 4326)],
        "raster_type_0": [(1024, 0, 1, 2), (1025, 0, 1, 0), (2048, 0, 1, 4326)],
    }
    for key, pairs in keyed.items():
        gk = _geokeys(pairs)
        extra = [(34735, "H", len(gk), gk, True), (34737, "s", 0, "my datum|", True),
                 (34736, "d", 2, (5.0, 4326.5), True)]  # fmt: skip
        tifffile.imwrite(p := d / f"{key}.tif", img, metadata=None, extratags=scale + extra)
        out[key] = p
    for key, dtype, text in (("u1_max_nodata", "u1", "255"), ("f4_nodata", "<f4", "-9999.5"),
                             ("nodata_12X", "u1", "12X")):  # fmt: skip
        tifffile.imwrite(p := d / f"{key}.tif", img.astype(dtype), metadata=None,
                         extratags=[*scale, (42113, "s", 0, text, True)])  # fmt: skip
        out[key] = p
    # PixelIsPoint with a rotated ModelTransformation, and overviews of it
    pt = _geokeys([(1024, 0, 1, 2), (1025, 0, 1, 2), (2048, 0, 1, 4326)])
    with tifffile.TiffWriter(p := d / "rotated_point.tif") as w:
        w.write(img, tile=(16, 16), metadata=None,
                extratags=[(34264, "d", 16, m, True), (34735, "H", len(pt), pt, True)])  # fmt: skip
        w.write(img[::2, ::2], tile=(16, 16), subfiletype=1, metadata=None)
        w.write(img[::4, ::3], tile=(16, 16), subfiletype=1, metadata=None)
    out["rotated_point"] = p
    # an image whose SubfileType is 2 (a page of a multi-page image), then its overview
    with tifffile.TiffWriter(p := d / "subfiletype_2.tif") as w:
        w.write(img, tile=(16, 16), subfiletype=2, metadata=None, extratags=geotags())
        w.write(img[::2, ::2], tile=(16, 16), subfiletype=1, metadata=None)
    out["subfiletype_2"] = p
    tifffile.imwrite(p := d / "only_overview.tif", img, subfiletype=1, metadata=None, extratags=geotags())
    out["only_overview"] = p
    with tifffile.TiffWriter(p := d / "lzma_then_zlib.tif") as w:  # an unsupported page, then a supported one
        w.write(img, compression="lzma", metadata=None)
        w.write(img, compression="zlib", rowsperstrip=16, metadata=None)
    out["lzma_then_zlib"] = p
    tifffile.imwrite(p := d / "jpeg_rgb.tif", rng.integers(0, 255, (32, 48, 3)).astype("u1"), photometric="rgb",
                     compression="jpeg", tile=(16, 16), metadata=None)  # fmt: skip
    out["jpeg_rgb"] = p
    tifffile.imwrite(p := d / "planar_strips.tif", rng.integers(0, 9, (3, 21, 30)).astype("<u2"), rowsperstrip=7,
                     planarconfig="separate", photometric="rgb", metadata=None)  # fmt: skip
    out["planar_strips"] = p
    vol = np.arange(4 * 32 * 32 * 3, dtype="u1").reshape(4, 32, 32, 3)
    with tifffile.TiffWriter(p := d / "volumetric.tif") as w:  # volumetric tiles: tifffile's 4-d and 3-d pages
        w.write(vol, volumetric=True, tile=(2, 16, 16), photometric="rgb", planarconfig="contig", metadata=None)
        w.write(vol[..., 0], volumetric=True, tile=(2, 16, 16), photometric="minisblack", metadata=None)
        w.write(img, metadata=None)
    out["volumetric"] = p
    if shutil.which("gdal_translate"):  # GDAL's JPEG tiles share one JPEGTables tag
        opts = ["-co", "COMPRESS=JPEG", "-co", "TILED=YES", "-co", "BLOCKXSIZE=16", "-co", "BLOCKYSIZE=16"]
        subprocess.run(["gdal_translate", "-q", *opts, str(out["dated"]), str(p := d / "gdal_jpeg.tif")], check=True)
        out["gdal_jpeg"] = p
    tifffile.imwrite(p := d / "rgb_chunky_pred.tif", rng.integers(0, 9, (20, 30, 3)).astype("<u2"), tile=(16, 16),
                     photometric="rgb", predictor=2, compression="zlib", metadata=None)  # fmt: skip
    out["rgb_chunky_pred"] = p
    tifffile.imwrite(p := d / "planar_pred.tif", rng.normal(size=(2, 20, 30)).astype("<f4"), tile=(16, 16),
                     planarconfig="separate", photometric="minisblack", predictor=3, compression="zlib",
                     metadata=None)  # fmt: skip
    out["planar_pred"] = p
    return out


def _gdal(path: Path) -> dict[str, Any] | None:
    """gdalinfo's JSON of ``path`` (None without gdalinfo), once per file content (``cached``)."""
    exe = shutil.which("gdalinfo")
    if exe is None:
        return None

    def run() -> dict[str, Any]:
        return json.loads(subprocess.run([exe, "-json", str(path)], capture_output=True, check=True, text=True).stdout)  # type: ignore[no-any-return]

    return cached("gdalinfo", path, run)


def _pages(path: Path) -> dict[str, Any]:
    """What tifffile reads of every IFD of ``path``, as plain values, once per file content."""

    def read() -> dict[str, Any]:
        from tifffile.tifffile import jpeg_decode_colorspace

        with tifffile.TiffFile(path) as tif:
            pages = list(tif.pages)
            out: list[dict[str, Any]] = []
            for page in pages:
                tags = page.tags
                nodata = tags.get("GDAL_NODATA")
                out.append({
                    "dtype": np.dtype(page.dtype).str, "shape": tuple(page.shape),
                    "planarconfig": int(page.planarconfig), "samplesperpixel": int(page.samplesperpixel),
                    "is_tiled": bool(page.is_tiled), "tilelength": int(page.tilelength),
                    "tilewidth": int(page.tilewidth), "rowsperstrip": int(page.rowsperstrip or 0),
                    "imagelength": int(page.imagelength), "imagewidth": int(page.imagewidth),
                    "compression": int(page.compression), "bitspersample": int(page.bitspersample),
                    "predictor": int(page.predictor), "dataoffsets": tuple(int(o) for o in page.dataoffsets),
                    "databytecounts": tuple(int(n) for n in page.databytecounts),
                    "georef": "ModelPixelScaleTag" in tags or "ModelTransformationTag" in tags,
                    "nodata_text": None if nodata is None else str(nodata.value),
                    "jpeg": None if int(page.compression) != 7 else {
                        "colorspace": jpeg_decode_colorspace(page.photometric, page.planarconfig, page.extrasamples,
                                                             page.is_jfif),
                        "tables": None if not page.jpegtables else bytes(page.jpegtables)},
                })  # fmt: skip
            return {"byteorder": tif.byteorder, "names": tiff_names(pages), "pages": out}

    return cached("tifffile-pages", path, read)


def _check(path: Path, res: ScanResult, lead: str | None = None) -> dict[str, Any]:
    """Every IFD of ``path`` against tifffile; returns the metas by name."""
    metas = {m.name: m for m in res.arrays}
    rows = res.chunks.to_pylist()
    facts = _pages(path)
    names = facts["names"]
    assert [n for n in metas if n != lead] == names
    assert res.layout == {"ifds": {n: i for i, n in enumerate(names)}}
    for name, page in zip(names, facts["pages"], strict=True):
        m = metas[name]
        dt = np.dtype(page["dtype"])
        if dt.itemsize > 1:
            dt = dt.newbyteorder(facts["byteorder"])
        shape = tuple(page["shape"])
        assert m.dtype == dt.str, name
        separate = page["planarconfig"] == 2 and page["samplesperpixel"] > 1
        rows_per = page["tilelength"] if page["is_tiled"] else min(page["rowsperstrip"] or page["imagelength"],
                                                                   page["imagelength"])  # fmt: skip
        cols = page["tilewidth"] if page["is_tiled"] else page["imagewidth"]
        chunk = (1, rows_per, cols) if separate else ((rows_per, cols, page["samplesperpixel"]) if len(shape) == 3
                                                      else (rows_per, cols))  # fmt: skip
        if lead:
            assert m.shape == (1, *shape) and m.chunks == (1, *chunk) and m.dims[0] == lead, name
        else:
            assert m.shape == shape and m.chunks == chunk, name
        comp = page["compression"]
        if comp not in _CODEC or page["bitspersample"] not in (1, 8, 16, 32, 64):
            assert m.status == "unsupported" and not [r for r in rows if r["array"] == name], name
            continue
        assert m.status == "ok", (name, m.reason)
        sfx = "" if name in ("image", "mask") else "_" + name.removeprefix("mask_")
        y, x = f"y{sfx}", f"x{sfx}"
        dims = (y, x) if len(shape) == 2 else (("band", y, x) if separate else (y, x, "band"))
        assert m.dims == ((lead, *dims) if lead else dims), name
        want: list[dict[str, Any]] = [{"id": "bitunpack"}] if page["bitspersample"] == 1 else []
        axis = -2 if len(chunk) == 3 and page["planarconfig"] == 1 else -1
        if page["predictor"] == 2:
            want.append({"id": "delta", "axis": axis})
        elif page["predictor"] == 3:
            want.append({"id": "floatpred", "axis": axis})
        if _CODEC[comp] not in (None, "jpeg"):
            want.append({"id": _CODEC[comp]})
        if _CODEC[comp] == "jpeg":  # tifffile's colour spaces for its jpeg_decode, and its JPEGTables
            cs, ocs = page["jpeg"]["colorspace"]
            cfg: dict[str, Any] = {"id": "jpeg", "colorspace": cs, "outcolorspace": ocs}
            if page["jpeg"]["tables"]:
                cfg["tables"] = base64.b64encode(page["jpeg"]["tables"]).decode("ascii")
            want.append(cfg)
        assert list(m.codecs) == want, name
        assert m.short_edge == (not page["is_tiled"] and shape[1 if separate else 0] % rows_per != 0), name
        mine = [r for r in rows if r["array"] == name]
        grid = [math.ceil(s / c) for s, c in zip(shape, chunk, strict=True)]
        expect = {}
        for i, (o, n) in enumerate(zip(page["dataoffsets"], page["databytecounts"], strict=True)):
            if n and o:
                key = tuple(int(k) for k in np.unravel_index(i, grid))
                expect[((0, *key) if lead else key)] = (o, n)
        got = {tuple(r[f"k{j}"] for j in range(len(m.shape))): (r["offset"], r["length"]) for r in mine}
        assert got == expect, name
    return metas


def test_generated_tiffs_against_tifffile(tiffs: dict[str, Path]) -> None:
    for key, path in tiffs.items():
        if key != "volumetric":  # refused pages: test_pages_refused_by_shape_or_segment_count
            _check(path, TiffScanner()(str(path)))


def test_unsupported_segments_are_named(tiffs: dict[str, Path]) -> None:
    m = {a.name: a for a in TiffScanner()(str(tiffs["b12"])).arrays}["image"]
    assert m.reason == "12-bit samples are not supported" and m.status == "unsupported"
    info = _gdal(tiffs["b12"])
    if info is not None:  # the page's georeferencing is recorded all the same
        assert np.allclose(decode_attr(m.attrs["transform"]), info["geoTransform"], rtol=0, atol=1e-9)
    assert m.fill_value is not None and decode_fill(m.fill_value, np.dtype("<u2")) == 0
    m = {a.name: a for a in TiffScanner()(str(tiffs["lzma"])).arrays}["image"]
    assert m.reason == "TIFF compression LZMA (34925) has no decoder here"
    assert decode_fill(m.fill_value, np.dtype("<u2")) == 0
    m = {a.name: a for a in TiffScanner()(str(tiffs["bilevel"])).arrays}["image"]
    assert m.codecs == ({"id": "bitunpack"},) and m.short_edge and m.chunks == (3, 13)


_GEO_KEYS = ["int16_nodata", "point", "rotated", "citation", "masked", "dated", "badnodata", "tiepoint",
             "geog_citation", "float_citation", "geographic_with_pcs", "no_model_pcs", "no_model_gcs",
             "user_defined_pcs", "pcs_not_in_tifffile", "double_gcs", "no_raster_type", "raster_type_0",
             "u1_max_nodata", "f4_nodata", "nodata_12X", "rotated_point", "subfiletype_2"]  # fmt: skip
_CITATIONS = {"citation": "my local cs", "geog_citation": "my datum"}
"""The citations written (GTCitationGeoKey, else GeogCitationGeoKey): the CRS text where no EPSG code is."""


def _gdal_epsg(path: Path) -> int | None:
    """The EPSG code GDAL identifies the file's CRS as exactly (``gdalsrsinfo -e``; a guess it
    reports with a confidence, or -1, is none), once per file content."""

    def run() -> int | None:
        out = subprocess.run(["gdalsrsinfo", "-e", str(path)], capture_output=True, text=True).stdout
        if "Confidence" in out:
            return None
        codes = [int(ln.split(":", 1)[1]) for ln in out.splitlines() if ln.startswith("EPSG:")]
        return codes[0] if codes and codes[0] > 0 else None

    return cached("gdalsrsinfo", path, run)


@pytest.mark.parametrize("key", _GEO_KEYS)
def test_georeference_and_nodata_against_gdal(tiffs: dict[str, Path], key: str) -> None:
    info = _gdal(tiffs[key])
    if info is None:
        pytest.skip("gdalinfo is not installed")
    res = TiffScanner()(str(tiffs[key]))
    metas = {m.name: m for m in res.arrays}
    img = metas["image"]
    dt = np.dtype(img.dtype)
    gt = info.get("geoTransform")
    first = _pages(tiffs[key])["pages"][0]
    georef, text = first["georef"], first["nodata_text"]
    if georef:
        assert np.allclose(decode_attr(img.attrs["transform"]), gt, rtol=0, atol=1e-9), (key, gt)
        assert decode_attr(img.attrs["transform"]).dtype == np.dtype("<f8")
        size = info["size"]  # overviews: same extent, pixels coarser by the size ratio
        for name, m in metas.items():
            if name.startswith("overview_"):
                sx, sy = size[0] / m.shape[1], size[1] / m.shape[0]
                want = [gt[0], gt[1] * sx, gt[2] * sy, gt[3], gt[4] * sx, gt[5] * sy]
                assert np.allclose(decode_attr(m.attrs["transform"]), want, rtol=0, atol=1e-9), name
    else:
        assert "transform" not in img.attrs
    epsg = _gdal_epsg(tiffs[key]) if shutil.which("gdalsrsinfo") else None
    if epsg is not None:
        assert decode_attr(img.attrs["crs"]) == f"EPSG:{epsg}", key
    else:
        assert "crs" not in img.attrs, key
    if key in _CITATIONS:
        assert decode_attr(img.attrs["crs_citation"]) == _CITATIONS[key]
    else:
        assert "crs_citation" not in img.attrs, key
    nd = info["bands"][0].get("noDataValue")
    try:
        float(text) if text is not None else None
    except ValueError:
        nd = None  # GDAL reads text that is no number as 0; refstore takes no nodata from it
    exact = nd is not None and (dt.kind == "f" or (float(nd) == int(nd) and np.iinfo(dt).min <= nd <= np.iinfo(dt).max))
    if exact:
        want = np.asarray(float("nan") if nd == "NaN" else nd).astype(dt)
        got = decode_fill(img.fill_value, dt)
        assert np.asarray(got, dt).tobytes() == want.tobytes(), key
        assert np.asarray(decode_attr(img.attrs["nodata"])).tobytes() == want.astype(dt.newbyteorder("=")).tobytes()
        assert img.attrs["_FillValue"] == img.attrs["nodata"]
    else:  # no nodata, or one the type cannot hold: zero fill, no attribute
        assert "nodata" not in img.attrs and "_FillValue" not in img.attrs, key
        assert img.fill_value is not None and decode_fill(img.fill_value, dt) == 0, key


def test_series_dates_from_the_datetime_tag_and_names(tiffs: dict[str, Path], tmp_path: Path) -> None:
    res = TiffScanner(concat_dim="time")(str(tiffs["dated"]))
    metas = _check(tiffs["dated"], res, lead="time")
    when = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last, res.sort_units) == (when, when, "seconds since 1970-01-01")
    t = metas["time"]
    assert t.shape == (1,) and t.chunks == (1,) and t.dims == ("time",) and t.dtype == "<i8" and not t.short_edge
    assert {k: decode_attr(v) for k, v in t.attrs.items()} == {
        "units": "seconds since 1970-01-01 00:00:00",
        "calendar": "proleptic_gregorian",
        "standard_name": "time",
    }
    (row,) = [r for r in res.chunks.to_pylist() if r["array"] == "time"]
    assert np.frombuffer(row["inline"], "<i8").tolist() == [int(when)]
    assert row["k0"] == 0 and all(row[f"k{i}"] == NO_DIM for i in range(1, MAX_DIMS))
    named = tmp_path / "sst_2020123118.tif"
    shutil.copyfile(tiffs["dated"], named)
    res = TiffScanner(concat_dim="t", time_pattern="sst_%Y%m%d%H")(str(named))
    assert res.sort_value == datetime(2020, 12, 31, 18, tzinfo=UTC).timestamp()
    with pytest.raises(ScanError, match=r"badnodata\.tif: no date found from the TIFF DateTime tag$"):
        TiffScanner(concat_dim="time")(str(tiffs["badnodata"]))
    with pytest.raises(ScanError, match=r"no date found from the TIFF DateTime tag$"):
        TiffScanner(concat_dim="time")(str(tiffs["b12"]))
    with pytest.raises(ScanError, match=r"no date found from --time-from-name 'x%Y'$"):
        TiffScanner(concat_dim="time", time_pattern="x%Y")(str(named))
    assert TiffScanner()(str(tiffs["dated"])).sort_value is None


def test_time_from_name_against_strptime() -> None:
    cases = [("D%Y%m%d", "oisst-D20240102-v2.tif", datetime(2024, 1, 2)),
             ("%Y%j", "x_2024366_y", datetime(2024, 12, 31)),
             ("%y%m%d_%H%M%S", "a991231_235958.tif", datetime(1999, 12, 31, 23, 59, 58)),
             ("%Y-%m", "v1-2023-13_2023-11", datetime(2023, 11, 1)),  # the first match is no date: the next
             ("%Y.%m", "2023x11_2023.11", datetime(2023, 11, 1)),  # "." is literal
             ("%Y%m%d", "no digits", None), ("%m%d", "1301", None)]  # fmt: skip
    for pattern, name, want in cases:
        got = time_from_name(pattern, name)
        assert got == (want.replace(tzinfo=UTC) if want else None), (pattern, name)
    for bad in ("%H%M", "plain", "%S"):
        with pytest.raises(BadInputError, match=rf"^--time-from-name '{bad}': the pattern has no date code"):
            time_from_name(bad, "20200101")
    for ok in ("%y", "%j", "%m", "%d"):
        assert time_from_name(ok, "nothing") is None


def test_damaged_tiffs(tiffs: dict[str, Path], tmp_path: Path) -> None:
    blob = tiffs["zstd_f64"].read_bytes()
    with tifffile.TiffFile(tiffs["zstd_f64"]) as tif:
        end = max(o + n for o, n in zip(tif.pages[0].dataoffsets, tif.pages[0].databytecounts, strict=True))
        tile_tag = tif.pages[0].tags["TileOffsets"].valueoffset
        count_tag = tif.pages[0].tags["TileByteCounts"].valueoffset
        first = (tif.pages[0].dataoffsets[0], tif.pages[0].databytecounts[0])
    cut = tmp_path / "cut.tif"
    cut.write_bytes(blob[: end - 1])
    with pytest.raises(ScanError, match=r"cut\.tif: IFD 'image' points past the end of the file \(truncated\?\)$"):
        TiffScanner()(str(cut))
    sparse = bytearray(blob)  # GDAL's sparse tiles: offset 0 and count 0 -> no reference
    sparse[tile_tag : tile_tag + 4] = b"\0" * 4
    sparse[count_tag : count_tag + 4] = b"\0" * 4
    (tmp_path / "sparse.tif").write_bytes(bytes(sparse))
    res = TiffScanner()(str(tmp_path / "sparse.tif"))
    refs = {(r["offset"], r["length"]) for r in res.chunks.to_pylist()}
    assert first not in refs and len(refs) == len(TiffScanner()(str(tiffs["zstd_f64"])).chunks) - 1
    (tmp_path / "junk.tif").write_bytes(b"II*\0" + b"\xff" * 12)
    with pytest.raises(ScanError, match=r"junk\.tif: TIFF holds no image$"):
        TiffScanner()(str(tmp_path / "junk.tif"))
    (tmp_path / "junk2.tif").write_bytes(b"II*\0\x08\0\0\0\x05\0" + b"\x00" * 3)
    try:
        tifffile.TiffFile(tmp_path / "junk2.tif")
    except Exception as e:  # tifffile's own reason, first line
        why = str(e).splitlines()[0]
    with pytest.raises(ScanError, match=rf"junk2\.tif: not a readable TIFF: {re.escape(why)}$"):
        TiffScanner()(str(tmp_path / "junk2.tif"))


def _ifd_file(bo: str, big: bool, tag: int, count: int, n_ifds: int = 1) -> bytes:
    """A TIFF of ``n_ifds`` chained IFDs, each one entry ``tag`` claiming ``count`` values."""
    if big:
        head = (b"II" if bo == "<" else b"MM") + struct.pack(bo + "HHHQ", 43, 8, 0, 16)
        out = bytearray(head)
        for i in range(n_ifds):
            nxt = len(out) + 8 + 20 + 8 if i + 1 < n_ifds else 0
            out += struct.pack(bo + "Q", 1) + struct.pack(bo + "HHQQ", tag, 16, count, 0) + struct.pack(bo + "Q", nxt)
        return bytes(out)
    out = bytearray((b"II" if bo == "<" else b"MM") + struct.pack(bo + "HI", 42, 8))
    for i in range(n_ifds):
        nxt = len(out) + 2 + 12 + 4 if i + 1 < n_ifds else 0
        out += struct.pack(bo + "H", 1) + struct.pack(bo + "HHII", tag, 4, count, 0) + struct.pack(bo + "I", nxt)
    return bytes(out)


def test_tiff_guard_counts_by_the_ifd_layout() -> None:
    import io

    for bo in "<>":
        for big in (False, True):
            assert check_tiff_counts(io.BytesIO(_ifd_file(bo, big, 324, MAX_SEGMENTS))) is None
            assert check_tiff_counts(io.BytesIO(_ifd_file(bo, big, 324, MAX_SEGMENTS + 1))) == (
                f"IFD 0 claims {MAX_SEGMENTS + 1} tiles, more than the {MAX_SEGMENTS} taken here; not scanned"
            )
            two = _ifd_file(bo, big, 273, MAX_SEGMENTS + 5, n_ifds=2)
            assert check_tiff_counts(io.BytesIO(two)) == (
                f"IFD 0 claims {MAX_SEGMENTS + 5} strips, more than the {MAX_SEGMENTS} taken here; not scanned"
            )
            assert check_tiff_counts(io.BytesIO(_ifd_file(bo, big, 256, 1 << 30))) is None  # not a segment tag
    many = _ifd_file("<", False, 256, 1, n_ifds=MAX_IFDS + 1)
    assert check_tiff_counts(io.BytesIO(many)) == f"more than {MAX_IFDS} IFDs (pages); not scanned"
    assert check_tiff_counts(io.BytesIO(_ifd_file("<", False, 256, 1, n_ifds=MAX_IFDS))) is None
    # a second IFD with too many tiles is named by its index
    chain = bytearray(_ifd_file("<", False, 256, 1, n_ifds=2))
    chain[-4 - 12 + 0 : -4 - 12 + 2] = struct.pack("<H", 324)
    chain[-4 - 12 + 4 : -4 - 12 + 8] = struct.pack("<I", MAX_SEGMENTS + 1)
    assert check_tiff_counts(io.BytesIO(bytes(chain))) == (
        f"IFD 1 claims {MAX_SEGMENTS + 1} tiles, more than the {MAX_SEGMENTS} taken here; not scanned"
    )
    loop = bytearray(_ifd_file("<", False, 256, 1))
    loop[-4:] = struct.pack("<I", 8)  # points back at itself: stops
    assert check_tiff_counts(io.BytesIO(bytes(loop))) is None
    for short in (b"II*\0", b"PK\3\4" + b"\0" * 12, b"II+\0\x08\0\0\0", _ifd_file("<", False, 324, 1 << 30)[:12]):
        assert check_tiff_counts(io.BytesIO(short)) is None


def test_the_scanner_refuses_what_the_guard_refuses(tmp_path: Path) -> None:
    # apart from the guard's own test (65,537 IFDs: slow), which then runs for its mutants only
    p = tmp_path / "hostile.tif"
    p.write_bytes(_ifd_file("<", True, 324, MAX_SEGMENTS + 1))
    with pytest.raises(ScanError, match=rf"hostile\.tif: IFD 0 claims {MAX_SEGMENTS + 1} tiles"):
        TiffScanner()(str(p))


def test_ifd_names_against_the_oracle_naming() -> None:
    """``ifd_names`` against tests/_oracle.tiff_names (the README's rule, written apart) over
    random sequences of full images, overviews, masks and mask overviews."""
    import random
    from types import SimpleNamespace

    from refstore.scan.tiff import ifd_names

    rng = random.Random(5)
    for _ in range(300):
        pages = [SimpleNamespace(subfiletype=rng.choice([0, 0, 1, 4, 5])) for _ in range(rng.randint(1, 9))]
        assert ifd_names(pages) == tiff_names(pages), [p.subfiletype for p in pages]


def test_dates_are_utc_whatever_the_local_zone(tiffs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        res = TiffScanner(concat_dim="time")(str(tiffs["dated"]))
        assert res.sort_value == datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_crs_without_epsg_is_its_geokeys(tiffs: dict[str, Path]) -> None:
    """No EPSG code: the CRS is recorded as its GeoKeys (tifffile's names and values, sorted,
    the raster type left out), so two files' CRSs compare as text."""
    with tifffile.TiffFile(tiffs["citation"]) as tif:
        keys = dict(tif.pages[0].geotiff_tags or {})
    items = []
    for k in sorted(keys):
        if k.endswith("GeoKey") and k != "GTRasterTypeGeoKey":
            v = keys[k]
            items.append(f"{k}={int(v.value) if hasattr(v, 'value') else v!r}")
    assert len(items) >= 2 and any("=" in i and "Citation" in i for i in items)
    img = {m.name: m for m in TiffScanner()(str(tiffs["citation"])).arrays}["image"]
    assert decode_attr(img.attrs["crs_geokeys"]) == ";".join(items)
    assert "crs" not in img.attrs
    with_epsg = {m.name: m for m in TiffScanner()(str(tiffs["point"])).arrays}["image"]
    assert "crs_geokeys" not in with_epsg.attrs and decode_attr(with_epsg.attrs["crs"]) == "EPSG:32633"


def test_a_pixel_scale_without_a_tiepoint_is_no_transform(tiffs: dict[str, Path]) -> None:
    img = {m.name: m for m in TiffScanner()(str(tiffs["scale_only"])).arrays}["image"]
    assert "transform" not in img.attrs and decode_attr(img.attrs["crs"]) == "EPSG:4326"


def test_pages_refused_by_shape_or_segment_count(tiffs: dict[str, Path]) -> None:
    """Volumetric tiles (tifffile's (depth, y, x[, samples]) pages) are refused with their
    reason, their metadata kept; the page after them is scanned."""
    facts = _pages(tiffs["volumetric"])
    res = TiffScanner()(str(tiffs["volumetric"]))
    metas = {m.name: m for m in res.arrays}
    assert list(metas) == facts["names"] == ["image_1", "image_2", "image_3"]
    four, three, plain = facts["pages"]
    m = metas["image_1"]
    shape = tuple(four["shape"])
    assert (m.shape, m.chunks, m.dtype, m.status) == (shape, shape, "|u1", "unsupported")
    assert m.reason == f"page shape {shape} is not supported" and m.attrs == {} and m.fill_value is None
    m = metas["image_2"]
    shape = tuple(three["shape"])
    chunk = (three["tilelength"], three["tilewidth"], three["samplesperpixel"])  # read as (y, x, samples)
    grid = [math.ceil(a / b) for a, b in zip(shape, chunk, strict=True)]
    assert len(three["dataoffsets"]) != math.prod(grid)
    assert (m.shape, m.chunks, m.dtype, m.status) == (shape, chunk, "|u1", "unsupported")
    assert m.reason == f"{len(three['dataoffsets'])} segments for a grid of {grid}"
    assert m.attrs == {} and m.fill_value is not None and decode_fill(m.fill_value, np.dtype("u1")) == 0
    assert metas["image_3"].status == "ok" and metas["image_3"].shape == tuple(plain["shape"])
    assert {r["array"] for r in res.chunks.to_pylist()} == {"image_3"}


def test_segments_with_a_zero_offset_or_count_are_absent(tiffs: dict[str, Path], tmp_path: Path) -> None:
    """Hand-edited TileOffsets/TileByteCounts: a tile is referenced only where both are non-zero
    (tifffile reads the others as empty); a one-byte tile at offset 1 is a tile."""
    blob = bytearray(tiffs["zstd_f64"].read_bytes())
    with tifffile.TiffFile(tiffs["zstd_f64"]) as tif:
        page = tif.pages[0]
        assert len(page.dataoffsets) >= 3
        bo = tif.byteorder
        offs, cnts = page.tags["TileOffsets"], page.tags["TileByteCounts"]
        o_size, c_size = offs.valuebytecount // offs.count, cnts.valuebytecount // cnts.count
        o_at, c_at = offs.valueoffset, cnts.valueoffset
    size_fmt = {2: "H", 4: "I", 8: "Q"}
    for i, (o, n) in enumerate([(0, 50), (600, 0), (1, 1)]):
        blob[o_at + i * o_size : o_at + (i + 1) * o_size] = struct.pack(bo + size_fmt[o_size], o)
        blob[c_at + i * c_size : c_at + (i + 1) * c_size] = struct.pack(bo + size_fmt[c_size], n)
    p = tmp_path / "edited.tif"
    p.write_bytes(bytes(blob))
    res = TiffScanner()(str(p))
    _check(p, res)
    keys = {r["k1"]: (r["offset"], r["length"]) for r in res.chunks.to_pylist() if r["k0"] == 0}
    assert 0 not in keys and 1 not in keys and keys[2] == (1, 1)


def _chain(bo: str, big: bool, ifds: list[list[tuple[int, int]]], *, last_next: int = 0, cut: int = 0) -> bytes:
    """A TIFF of chained IFDs, each a list of ``(tag, count)`` entries (LONG/LONG8, value 0);
    ``last_next``: the last IFD's next-IFD offset; ``cut``: bytes dropped from the end."""
    n_fmt, e_fmt, o_fmt = ("Q", "HHQQ", "Q") if big else ("H", "HHII", "I")
    n_size, e_size, o_size = (8, 20, 8) if big else (2, 12, 4)
    first = 16 if big else 8
    head = struct.pack(bo + "HHHQ", 43, 8, 0, first) if big else struct.pack(bo + "HI", 42, first)
    out = bytearray((b"II" if bo == "<" else b"MM") + head)
    for i, entries in enumerate(ifds):
        nxt = len(out) + n_size + e_size * len(entries) + o_size if i + 1 < len(ifds) else last_next
        out += struct.pack(bo + n_fmt, len(entries))
        out += b"".join(struct.pack(bo + e_fmt, tag, 16 if big else 4, count, 0) for tag, count in entries)
        out += struct.pack(bo + o_fmt, nxt)
    return bytes(out[: len(out) - cut])


def test_tiff_guard_entry_tables_and_chains() -> None:
    """The guard over hand-written IFD layouts (TIFF 6.0 and BigTIFF byte layouts): every entry
    of a table is read, counts and offsets are unsigned, a table of more than 4096 entries is
    left to tifffile (damaged), and the chain is followed through 8-byte BigTIFF offsets."""
    import io

    def check(data: bytes) -> str | None:
        return check_tiff_counts(io.BytesIO(data))

    hostile = MAX_SEGMENTS + 1
    for bo in "<>":
        for big in (False, True):
            two = _chain(bo, big, [[(256, 1), (324, hostile)]])  # the segment tag is the second entry
            assert check(two) == f"IFD 0 claims {hostile} tiles, more than the {MAX_SEGMENTS} taken here; not scanned"
            huge = (1 << 64) - 1 if big else (1 << 32) - 1  # unsigned: no negative count
            assert check(_chain(bo, big, [[(273, huge)]])) == (
                f"IFD 0 claims {huge} strips, more than the {MAX_SEGMENTS} taken here; not scanned"
            )
            chain = _chain(bo, big, [[(256, 1)], [(256, 1), (273, hostile)]])
            want = f"IFD 1 claims {hostile} strips, more than the {MAX_SEGMENTS} taken here; not scanned"
            assert check(chain) == want
            # the next-IFD offset cut short by the end of the file: the chain ends there
            assert check(_chain(bo, big, [[(256, 1)]], last_next=1 << 40 if big else 1 << 20, cut=3)) is None
        assert check(_chain(bo, False, [[(256, 1)]], last_next=0xFFFFFF00)) is None  # past the end: unsigned
        # 4096 entries is a table; 4097 is damaged: not looked into, the chain not followed
        full = [(256, 1)] * 4095 + [(257, 1)]
        assert check(_chain(bo, False, [full, [(324, hostile)]])) == (
            f"IFD 1 claims {hostile} tiles, more than the {MAX_SEGMENTS} taken here; not scanned"
        )
        assert check(_chain(bo, False, [[*full, (324, hostile)], [(324, hostile)]])) is None
        # an entry count of 32768 or more (unsigned) is damaged too, whatever its 5000th entry says
        assert check(_chain(bo, False, [[(256, 1)] * 4999 + [(324, hostile)] + [(256, 1)] * 27768])) is None


def test_tifffile_messages_stay_quiet(tiffs: dict[str, Path], caplog: pytest.LogCaptureFixture,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """tifffile logs what it cannot parse (here GDAL_NODATA "abc" as an integer); the scan silences
    its logger (only it: the root logger's level is left alone) and names the problem itself."""
    import logging

    log = logging.getLogger("tifffile")
    monkeypatch.setattr(log, "level", logging.NOTSET)  # as a process that never scanned has it
    monkeypatch.setattr(log, "propagate", True)
    with caplog.at_level(logging.DEBUG):
        res = TiffScanner()(str(tiffs["badnodata"]))
        assert logging.getLogger().level == logging.DEBUG
    assert [r for r in caplog.records if r.name.startswith("tifffile")] == []
    assert not log.isEnabledFor(logging.CRITICAL)
    assert res.format == "tiff" and res.groups == {"": {}} and res.sort_units is None
    assert res.source.location == str(tiffs["badnodata"]) and res.source.size == tiffs["badnodata"].stat().st_size
