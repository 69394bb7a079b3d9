"""The GDAL multidimensional VRT form: read by GDAL's own tools (gdalmdimtranslate, gdalmdiminfo).

Golden XML: ``tests/golden/oisst-series.vrt`` is the VRT of a 3-day generated OISST-like series
emitted with a remap rule to a fixed URL, written only by ``./dev golden`` (``tests/_golden.py``)
after a deliberate change; a test never writes it.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.emit.vrt import gdal_path, gdal_type
from refstore.errors import BadInputError, UnexpressibleError

from ._cli import invoke as run  # in this process: the commands are under test, not the process
from ._emit_cases import Case
from ._golden import check
from ._oracle import assert_same, hdf5_read
from .readers.gdal import available as gdal_available
from .readers.gdal import mdim_tool

GOLDEN = Path(__file__).parent / "golden" / "oisst-series.vrt"
GOLDEN_URL = "https://data.example.org/oisst/"

needs_gdal = pytest.mark.skipif(not gdal_available("gdal-mdim"), reason="gdal-wheel is not installed")


def _series(root: Path, days: int = 3) -> tuple[str, list[Path]]:
    from refstore.fixtures.oisst import write_series

    files = write_series(root / "data", days)
    col = str(root / "col")
    refstore.init(col)
    refstore.scan(col, [str(root / "data")], concat_dim="time")
    return col, files


def golden_text(root: Path) -> str:
    col, _ = _series(root)
    refstore.Collection.open(col)
    from refstore.table.remap import add_rule

    add_rule(refstore.Collection.open(col), str(root / "data") + "/", GOLDEN_URL)
    out = root / "out.vrt"
    emit(refstore.Collection.open(col), "vrt", str(out))
    return out.read_text(encoding="utf-8")


def _translate(vrt: Path, out: Path) -> None:
    from .readers.vrt import translate

    translate(str(vrt), str(out))


def _nc(path: Path) -> Any:
    import netCDF4

    ds = netCDF4.Dataset(str(path))
    ds.set_auto_maskandscale(False)
    return ds


# ---------------------------------------------------------------------------- pure parts
def test_gdal_paths_of_published_locations() -> None:
    assert gdal_path("/data/a.nc") == "/data/a.nc"
    assert gdal_path("file:///data/a.nc") == "/data/a.nc"
    assert gdal_path("https://host/x/a.nc") == "/vsicurl/https://host/x/a.nc"
    assert gdal_path("http://host/a.nc") == "/vsicurl/http://host/a.nc"
    assert gdal_path("s3://bucket/key/a.nc") == "/vsis3/bucket/key/a.nc"
    assert gdal_path("gs://bucket/a.nc") == "/vsigs/bucket/a.nc"
    with pytest.raises(BadInputError, match="ftp://"):
        gdal_path("ftp://host/a.nc")


def test_gdal_types() -> None:
    assert gdal_type(">f4") == "Float32" and gdal_type("<i2") == "Int16" and gdal_type("|u1") == "Byte"
    assert gdal_type("|i1") == "Int8"  # GDAL >= 3.7 reads int8 as Int8 (3.6 widened it to Int16)
    assert gdal_type("<i8") == "Int64" and gdal_type("<c16") == "CFloat64"
    assert gdal_type("<f2") is None  # GDAL 3.6 widens float16 to Float32, NaN payloads not kept
    assert gdal_type("|S6") is None and gdal_type("<U3") is None and gdal_type("|V8") is None


# ---------------------------------------------------------------------------- golden, reproducible
def test_golden_xml_and_identical_bytes(tmp_path: Path) -> None:
    text = golden_text(tmp_path / "a")
    check(GOLDEN, text)
    assert golden_text(tmp_path / "b") == text  # same version and options -> same bytes
    root = ET.fromstring(text)
    srcs = root.findall(".//Array[@name='sst']/Source")
    assert [s.findtext("SourceFilename") for s in srcs] == [
        f"/vsicurl/{GOLDEN_URL}oisst-avhrr-v02r01.2024010{d}.nc" for d in (1, 2, 3)
    ]
    assert [s.find("DestSlab").get("offset") for s in srcs] == ["0,0,0,0", "1,0,0,0", "2,0,0,0"]  # type: ignore[union-attr]


def test_emit_twice_same_bytes_and_no_remap(tmp_path: Path) -> None:
    col, files = _series(tmp_path)
    a, b = tmp_path / "a.vrt", tmp_path / "b.vrt"
    emit(refstore.Collection.open(col), "vrt", str(a))
    emit(refstore.Collection.open(col), "vrt", str(b), remap=False)
    assert a.read_bytes() == b.read_bytes()
    names = {e.text for e in ET.parse(a).getroot().iter("SourceFilename")}
    assert names == {str(p.resolve()) for p in files}


def test_as_of_an_older_tag_emits_that_version(tmp_path: Path) -> None:
    from refstore.fixtures.oisst import write_series
    from refstore.table import create_tag

    col, _ = _series(tmp_path, days=2)
    create_tag(refstore.Collection.open(col), "two-days")
    more = write_series(tmp_path / "more", 3)
    shutil.copy2(more[2], tmp_path / "data" / more[2].name)  # a third day; the first two untouched
    more[2] = tmp_path / "data" / more[2].name
    refstore.scan(col, [str(tmp_path / "data")], concat_dim="time")
    old, new = tmp_path / "old.vrt", tmp_path / "new.vrt"
    emit(refstore.Collection.open(col), "vrt", str(old), as_of="two-days")
    emit(refstore.Collection.open(col), "vrt", str(new))
    dims = [{d.get("name"): d.get("size") for d in ET.parse(p).getroot().iter("Dimension")} for p in (old, new)]
    sizes = [d["time"] for d in dims]
    assert sizes == ["2", "3"]
    assert len(ET.parse(old).getroot().findall(".//Array[@name='sst']/Source")) == 2
    assert str(more[2].resolve()) in new.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- read by GDAL
@needs_gdal
def test_series_translates_keeping_cf_attributes(tmp_path: Path) -> None:
    col, files = _series(tmp_path, days=4)
    vrt = tmp_path / "s.vrt"
    emit(refstore.Collection.open(col), "vrt", str(vrt))
    out = tmp_path / "s.nc"
    _translate(vrt, out)
    with _nc(files[0]) as f0, _nc(out) as ds:
        t = ds["time"]
        assert t.getncattr("units") == f0["time"].getncattr("units")  # the time units survive
        assert t.getncattr("calendar") == f0["time"].getncattr("calendar")
        sst = ds["sst"]
        for k in ("scale_factor", "add_offset", "_FillValue", "valid_min", "units"):
            want, got = np.asarray(f0["sst"].getncattr(k)), np.asarray(sst.getncattr(k))
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), k  # value and type kept
        assert sst.dtype == np.dtype("i2") and sst.shape == (4, 1, 45, 90)
        expect = np.concatenate([h5py.File(p)["sst"][...] for p in files])
        assert_same(sst[...], expect, "sst")
        assert_same(t[...], np.concatenate([h5py.File(p)["time"][...] for p in files]), "time")
        assert ds["meta"]["quality"].shape == (45, 90)


@needs_gdal
def test_gdalmdiminfo_sees_dimensions_and_indexing_variables(tmp_path: Path) -> None:
    col, _ = _series(tmp_path)
    vrt = tmp_path / "s.vrt"
    emit(refstore.Collection.open(col), "vrt", str(vrt))
    info = json.loads(mdim_tool(["gdalmdiminfo", str(vrt)]))  # GDAL 3.13: the series' int8 mask is Int8
    dims = {d["name"]: d for d in info["dimensions"]}
    assert dims["time"]["size"] == 3 and dims["time"]["type"] == "TEMPORAL"
    iv = dims["time"]["indexing_variable"]  # GDAL 3.13 prints the variable itself, keyed by its name
    assert (iv if isinstance(iv, str) else next(iter(iv.values()))["full_name"]) == "/time"
    assert info["arrays"]["sst"]["unit"] == "Celsius"
    assert info["arrays"]["sst"]["nodata_value"] == -999
    assert info["arrays"]["sst"]["scale"] == pytest.approx(0.01)
    assert "meta" in info["groups"]


@needs_gdal
def test_remote_locations_become_vsicurl_and_vsis3(tmp_path: Path) -> None:
    col, _ = _series(tmp_path)
    from refstore.table.remap import add_rule

    add_rule(refstore.Collection.open(col), str(tmp_path / "data") + "/", "s3://bucket/oisst/")
    out = tmp_path / "s3.vrt"
    emit(refstore.Collection.open(col), "vrt", str(out))
    names = sorted({e.text or "" for e in ET.parse(out).getroot().iter("SourceFilename")})
    assert names == [f"/vsis3/bucket/oisst/oisst-avhrr-v02r01.2024010{d}.nc" for d in (1, 2, 3)]


# ---------------------------------------------------------------------------- refusals
def test_unexpressible_arrays_are_refused_by_name(tmp_path: Path) -> None:
    d = tmp_path / "f.h5"
    with h5py.File(d, "w") as f:
        f.create_dataset("ok", data=np.arange(6, dtype="<f4").reshape(2, 3))
        f.create_dataset("empty", shape=(0, 3), dtype="<f4", chunks=(1, 3), maxshape=(None, 3))
        f.create_dataset("names", data=np.array([b"ab", b"cd"], dtype="S2"))
        f.create_dataset("half", data=np.array([1.5, -2.25, np.nan, 65504], "<f2"))
        f.create_dataset("tiny", data=np.array([-128, -1, 0, 127], "i1"))
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(d)])
    c = refstore.Collection.open(col)
    from refstore.emit import EmitSource
    from refstore.emit.vrt import check

    src = EmitSource(c.snapshot())
    for name, why in (("empty", "size 0"), ("names", "S2"), ("half", "f2")):
        with pytest.raises(UnexpressibleError, match=rf"array '{name}'.*{why}"):
            check(src, c.snapshot().array(name))
    with pytest.raises(UnexpressibleError, match="skip-unexpressible"):
        emit(c, "vrt", str(tmp_path / "x.vrt"))
    assert not (tmp_path / "x.vrt").exists()  # nothing partial left behind
    rep = emit(c, "vrt", str(tmp_path / "x.vrt"), skip_unexpressible=True)
    assert sorted(rep.skipped) == ["empty", "half", "names"] and rep.arrays == 2
    if gdal_available("gdal-mdim"):  # int8 reads as int8 (GDAL 3.13), values exact
        from .readers.vrt import open_form

        case = Case("f", col, str(d))
        arrays = open_form(str(tmp_path / "x.vrt"), case)
        for name in ("ok", "tiny"):
            whole = tuple(slice(0, n) for n in case.dataset()[name].shape)
            assert_same(arrays[name][...], case.expected(name, whole), name)


@needs_gdal
def test_codec_eras_are_no_limit_but_packing_eras_are_refused(tmp_path: Path) -> None:
    from .test_series import _era_file

    def series(folder: str, scales: tuple[float, float], dtypes: tuple[str, str]) -> refstore.Collection:
        d = tmp_path / folder
        d.mkdir()
        _era_file(d / "f0.h5", 0, comp="gzip", chunks=(1, 12), dtype=dtypes[0], scale=scales[0])
        _era_file(d / "f1.h5", 1, comp=None, chunks=(2, 5), dtype=dtypes[1], scale=scales[1])
        col = str(tmp_path / f"c-{folder}")
        refstore.init(col)
        refstore.scan(col, [str(d)], concat_dim="time")
        return refstore.Collection.open(col)

    codecs_only = series("a", (0.1, 0.1), ("<i2", "<i2"))
    assert len(codecs_only.snapshot().array("x").eras) == 2
    vrt = tmp_path / "a.vrt"
    emit(codecs_only, "vrt", str(vrt))
    out = tmp_path / "a.nc"
    _translate(vrt, out)
    with _nc(out) as ds:
        expected = np.concatenate([hdf5_read(tmp_path / "a" / f"f{i}.h5", "x") for i in (0, 1)])
        assert_same(ds["x"][...], expected, "x across eras")
    packing = series("b", (0.1, 0.01), ("<i2", "<i2"))
    with pytest.raises(UnexpressibleError, match=r"array 'x'.*packing"):
        emit(packing, "vrt", str(tmp_path / "b.vrt"))


# ---------------------------------------------------------------------------- TIFF
@needs_gdal
def test_tiff_bands_overviews_and_series(tmp_path: Path) -> None:
    from refstore.fixtures.tiff import write_cases

    from .readers.vrt import open_form

    cases = write_cases(tmp_path / "tiff")
    for name in ("planar", "striped_tiled_overview", "short_strip"):
        col = str(tmp_path / f"c-{name}")
        refstore.init(col)
        refstore.scan(col, [str(cases[name])])
        out = tmp_path / f"{name}.vrt"
        emit(refstore.Collection.open(col), "vrt", str(out))
        root = ET.parse(out).getroot()
        assert root.find(".//SourceBand") is not None
        case = Case(name, col, str(Path(cases[name]).resolve()))
        arrays = open_form(str(out), case)
        for a in case.dataset().arrays:
            assert_same(arrays[a][...], case.expected(a, tuple(slice(0, n) for n in case.dataset()[a].shape)), a)
    files = [e.text or "" for e in ET.parse(tmp_path / "striped_tiled_overview.vrt").getroot().iter("SourceFilename")]
    assert any(f.startswith("GTIFF_DIR:2:") for f in files)  # the overview IFD


def test_remapped_tiff_overviews_open_their_ifd_over_vsicurl(tmp_path: Path) -> None:
    from refstore.fixtures.tiff import write_cases
    from refstore.table.remap import add_rule

    cases = write_cases(tmp_path / "tiff")
    col = str(tmp_path / "c")
    refstore.init(col)
    refstore.scan(col, [str(cases["striped_tiled_overview"])])
    add_rule(refstore.Collection.open(col), str(tmp_path / "tiff") + "/", "https://host/tiff/")
    emit(refstore.Collection.open(col), "vrt", str(tmp_path / "x.vrt"))
    files = [e.text for e in ET.parse(tmp_path / "x.vrt").getroot().iter("SourceFilename")]
    url = "/vsicurl/https://host/tiff/striped_tiled_overview.tif"
    assert files == [url, f"GTIFF_DIR:2:{url}"]  # IFD numbers as the scan recorded them


def _moved_away(files: list[Path], to: Path) -> None:
    to.mkdir()
    for f in files:
        f.rename(to / f.name)


def test_emit_needs_no_source_files(tmp_path: Path) -> None:
    """Everything the VRT needs (format, IFD numbers) was recorded by the scan: the same
    version gives the same bytes with its sources moved away (a gone source is refused by
    default, as stale: ``--on-stale ignore`` publishes it unchecked)."""
    import tifffile

    from refstore.fixtures.oisst import write_series
    from refstore.fixtures.tiff import write_cases

    tif = write_cases(tmp_path / "gen")["striped_tiled_overview"]
    data = tmp_path / "data"
    data.mkdir()
    files = [shutil.copy(tif, data / f"img_2024010{d}.tif") for d in (1, 2)]  # overviews are IFD 1
    day = write_series(tmp_path / "nc", 1)[0]
    odd = Path(shutil.copy(day, data / "netcdf4_named.tif"))  # the scan sniffs formats: not a TIFF
    series, single = str(tmp_path / "series"), str(tmp_path / "single")
    refstore.init(series)
    refstore.scan(series, [str(f) for f in files], concat_dim="time", time_from_name="%Y%m%d")
    refstore.init(single)
    refstore.scan(single, [str(odd)])
    with tifffile.TiffFile(tif) as t:
        assert len(t.pages) == 2
    before = {}
    for col in (series, single):
        emit(refstore.Collection.open(col), "vrt", str(tmp_path / f"{Path(col).name}-1.vrt"))
        before[col] = (tmp_path / f"{Path(col).name}-1.vrt").read_bytes()
    names = [e.text for e in ET.fromstring(before[series]).iter("SourceFilename")]
    assert f"GTIFF_DIR:2:{files[0]}" in names and str(files[0]) in names
    assert [e.text for e in ET.fromstring(before[single]).iter("SourceArray")]  # read as netCDF arrays
    _moved_away([Path(f) for f in files] + [odd], tmp_path / "elsewhere")
    for col in (series, single):  # a new process: nothing cached from the first emit
        out = tmp_path / f"{Path(col).name}-2.vrt"
        r = run("-C", col, "emit", "vrt", str(out))
        assert r.returncode == 2 and "source not found" in r.stderr and not out.exists(), r.stderr
        r = run("-C", col, "emit", "vrt", str(out), "--on-stale", "ignore")
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == before[col], col


def test_collections_scanned_before_formats_were_recorded(tmp_path: Path, monkeypatch: Any) -> None:
    """Source rows without ``format``/``layout`` (older scans): the files are read as they are
    now, with a warning; while they are unchanged the VRT is the same."""
    import refstore.table.upsert as upsert
    from refstore.fixtures.tiff import write_cases

    tif = write_cases(tmp_path / "gen")["striped_tiled_overview"]
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    refstore.init(new)
    refstore.scan(new, [str(tif)])
    refstore.init(old)
    monkeypatch.setattr(upsert, "_source_meta", lambda order, r: json.dumps(
        {"order": order, "sort_units": r.sort_units, "groups": r.groups}, sort_keys=True))  # fmt: skip
    refstore.scan(old, [str(tif)])
    emit(refstore.Collection.open(new), "vrt", str(tmp_path / "new.vrt"))
    with pytest.warns(UserWarning, match=r"1 sources .* scanned before refstore recorded their format"):
        rep = emit(refstore.Collection.open(old), "vrt", str(tmp_path / "old.vrt"))
    assert rep.extra["read_from_files"] == 1
    assert (tmp_path / "old.vrt").read_bytes() == (tmp_path / "new.vrt").read_bytes()


def test_overviews_of_remotely_scanned_tiffs(s3: Any, tmp_path: Path) -> None:
    """IFD numbers come from the scan, so a TIFF scanned over S3 keeps its overviews."""
    from refstore.fixtures.tiff import write_cases

    tif = write_cases(tmp_path / "gen")["striped_tiled_overview"]
    url = s3.put("tiff/x.tif", tif)
    col = str(tmp_path / "c")
    refstore.init(col)
    refstore.scan(col, [url])
    emit(refstore.Collection.open(col), "vrt", str(tmp_path / "x.vrt"))
    files = [e.text for e in ET.parse(tmp_path / "x.vrt").getroot().iter("SourceFilename")]
    key = url.removeprefix("s3://")
    assert files == [f"/vsis3/{key}", f"GTIFF_DIR:2:/vsis3/{key}"]

