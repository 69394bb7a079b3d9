"""import kerchunk|icechunk: existing reference stores brought in as one new version.

Round trips (a scanned collection emitted as kerchunk-json / kerchunk-parquet / icechunk and
imported back) compare the imported table with the scanned one; stores made by kerchunk
(``SingleHdf5ToZarr``, ``MultiZarrToZarr``) and VirtualiZarr (``to_kerchunk``, ``to_icechunk``)
are imported and read back against h5py over the original files (``tests/_oracle.py``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refstore
from refstore.emit import emit
from refstore.imports import import_icechunk, import_kerchunk
from refstore.table.versions import diff

from ._cli import run
from ._oracle import assert_same, hdf5_read, series_read
from ._s3 import S3

FORMS = ("kerchunk-json", "kerchunk-parquet", "icechunk")


@pytest.fixture(autouse=True)
def _trust_local_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests write stores away from the files they reference: every local file is allowed
    here (``/``; devices and kernel files stay refused). What an import trusts is
    ``test_trust.py``'s subject."""
    from refstore.imports import _trust

    real = _trust.check_locations
    monkeypatch.setattr(_trust, "check_locations", lambda store, locs, allow=(): real(store, locs, (*allow, "/")))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 2-day OISST-like series scanned along time, and its three reference forms."""
    from refstore.fixtures.oisst import write_series

    root = tmp_path_factory.mktemp("import")
    files = [str(p) for p in write_series(root / "data", 2)]
    col = str(root / "scanned")
    refstore.init(col)
    refstore.scan(col, files, concat_dim="time", workers=1)
    c = refstore.Collection.open(col)
    outs = {}
    for form in FORMS:
        out = root / f"out.{form}"
        emit(c, form, str(out))
        outs[form] = str(out)
    return {"root": root, "files": files, "col": col, "outs": outs}


def _import(form: str, store: str, where: Path, **kw: Any) -> refstore.Collection:
    refstore.init(str(where))
    c = refstore.Collection.open(str(where))
    if form == "icechunk":
        import_icechunk(c, store, **kw)
    else:
        import_kerchunk(c, store)
    return c


def _chunks(c: refstore.Collection) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    cols = ["array", "g0", "g1", "g2", "g3", "source", "offset", "length", "inline"]
    t = c.snapshot().rows("chunk", cols, "g0 >= -1")
    return {(r["array"], r["g0"], r["g1"], r["g2"], r["g3"]): (r["source"], r["offset"], r["length"], r["inline"])
            for r in t.to_pylist()}  # fmt: skip


# What the forms cannot carry (design/import.md): which file an inline chunk came from. Attribute
# types and shapes (NCZarr's _nczarr_attr in kerchunk, the snapshot's metadata in Icechunk) and
# the stored fill value (kerchunk: in _nczarr_attr when fill_value says another) come back exact.
def _comparable(meta: Any, form: str) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(meta.to_json())
    return d


@pytest.mark.parametrize("form", FORMS)
def test_round_trip_same_arrays_and_references(built: dict[str, Any], tmp_path: Path, form: str) -> None:
    scanned = refstore.Collection.open(built["col"])
    imported = _import(form, built["outs"][form], tmp_path / "c")
    a, b = scanned.snapshot().arrays(), imported.snapshot().arrays()
    assert list(a) == list(b)
    for name in a:
        assert _comparable(a[name], form) == _comparable(b[name], form), name
        if "_FillValue" in a[name].attrs:  # CF's typed attributes keep their type
            assert a[name].attrs["_FillValue"] == b[name].attrs["_FillValue"]
    typed = [s.snapshot().group_attrs() for s in (scanned, imported)]
    assert typed[0] == typed[1] and typed[0][""]["title"]
    ca, cb = _chunks(scanned), _chunks(imported)
    assert ca.keys() == cb.keys()
    store = os.path.abspath(built["outs"][form])
    for key, (src, off, length, data) in ca.items():
        got = cb[key]
        if off >= 0:
            assert got == (src, off, length, b""), key
        else:  # inline: same bytes, from the store
            assert (got[1], got[2], got[3], got[0]) == (off, length, data, store), key
    # sources: the files, identified as the scan identified them, plus the store for inline chunks
    sa = {r["source"]: r for r in scanned.snapshot().sources().to_pylist()}
    sb = {r["source"]: r for r in imported.snapshot().sources().to_pylist()}
    assert set(sb) == set(sa) | {store}
    for s in sa:
        assert (sa[s]["size"], sa[s]["mtime_ns"], sa[s]["etag"]) == (sb[s]["size"], sb[s]["mtime_ns"], sb[s]["etag"])
    # values through refstore equal h5py over the files
    ds = refstore.open(str(tmp_path / "c"))
    for name in ("sst", "anom", "time", "lat", "meta/quality"):
        assert_same(ds[name][...], series_read(built["files"], name, "time"), f"{form} {name}")
    rep = refstore.verify(imported.snapshot())
    assert rep.mismatched == 0 and rep.checked > 0 and rep.skipped == sum(1 for v in cb.values() if v[1] < 0)


@pytest.mark.parametrize("form", FORMS)
def test_round_trip_diff_lists_only_what_the_form_cannot_carry(built: dict[str, Any], tmp_path: Path,
                                                               form: str) -> None:  # fmt: skip
    """Importing the form of a collection's version into that collection: refstore diff shows no
    reference added, removed or moved, no metadata changed; only the inline chunks' source."""
    col = tmp_path / "c"
    shutil.copytree(built["col"], col)
    c = refstore.Collection.open(str(col))
    before = c.latest_version
    (import_icechunk if form == "icechunk" else import_kerchunk)(c, built["outs"][form])
    rep = diff(c, before)
    inline: dict[str, int] = {}
    for (name, *_k), v in _chunks(refstore.Collection.open(built["col"])).items():
        inline[name] = inline.get(name, 0) + (v[1] < 0)
    assert sum(inline.values()) > 0
    for name, d in rep.arrays.items():
        assert d["added"] == 0 and d["removed"] == 0, name
        assert d["changed"] == inline[name], name  # inline chunks: their source is now the store
    assert rep.sources_added == [os.path.abspath(built["outs"][form])]
    assert rep.sources_removed == [] and rep.sources_changed == []
    assert {n for n, d in rep.arrays.items() if d["metadata_changed"]} == set()  # f4/i4 attrs keep their types


def test_everything_else_works_on_an_import(
    built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = _import("kerchunk-parquet", built["outs"]["kerchunk-parquet"], tmp_path / "c")
    uri = str(tmp_path / "c")
    assert _cli(capsys, "-C", uri, "tag", "imported")[0] == 0
    code, out, err = _cli(capsys, "-C", uri, "hold", "--array", "sst", "--json")
    assert code == 0, err
    assert json.loads(out)["chunks"] == 12
    code, out, err = _cli(capsys, "-C", uri, "diff", "imported", "--json")
    assert json.loads(out)["arrays"]["sst"]["changed"] == 0
    for form in (*FORMS, "parquet", "sqlite"):
        out = tmp_path / f"again.{form}"
        rep = emit(c, form, str(out))
        assert rep.refs > 0, form
    again = _import("kerchunk-json", str(tmp_path / "again.kerchunk-json"), tmp_path / "c2")
    ds = refstore.open(str(tmp_path / "c2"))
    assert_same(ds["sst"][...], series_read(built["files"], "sst", "time"), "sst")
    assert again.latest_version == 2
    assert refstore.verify(c.snapshot()).mismatched == 0
    # the same store imported again: a new version; the unchanged references keep their held bytes
    rep = import_kerchunk(c, built["outs"]["kerchunk-parquet"])
    assert rep.held_kept == 12 and (rep.inserted, rep.updated, rep.deleted) == (0, 0, 0)
    v = refstore.verify(c.snapshot())
    assert v.mismatched == 0 and v.held_checked == 12 and v.held_mismatched == 0


# --------------------------------------------------------------------------- stores made by peers
def _kerchunk_single(path: str) -> dict[str, Any]:
    from kerchunk.hdf import SingleHdf5ToZarr

    with open(path, "rb") as fh:
        return SingleHdf5ToZarr(fh, "file://" + path, inline_threshold=100).translate()  # type: ignore[no-any-return]


@pytest.mark.filterwarnings("ignore:The following exception was caught:UserWarning")  # anom: kerchunk skips fletcher32
def test_kerchunk_single_hdf5_to_zarr(built: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("kerchunk")
    f = built["files"][0]
    refs = tmp_path / "single.json"
    refs.write_text(json.dumps(_kerchunk_single(f)))
    c = _import("kerchunk-json", str(refs), tmp_path / "c")
    ds = refstore.open(str(tmp_path / "c"))
    assert "anom" not in ds.arrays  # kerchunk leaves out arrays with a fletcher32 filter
    assert c.snapshot().count("chunk", "array = 'ice'") == 0  # nor the bytes of compact datasets (kerchunk 0.2.10)
    for name in ("sst", "err", "mask", "lat", "meta/quality"):
        assert_same(ds[name][...], hdf5_read(f, name), name)
    assert ds["sst"].dtype == np.dtype("<i2")
    rep = refstore.verify(c.snapshot())
    assert rep.mismatched == 0 and rep.checked > 0


@pytest.mark.filterwarnings("ignore:The following exception was caught:UserWarning")
def test_kerchunk_multi_zarr_to_zarr_verifies_against_each_file(built: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("kerchunk")
    from kerchunk.combine import MultiZarrToZarr

    singles = [_kerchunk_single(f) for f in built["files"]]
    combined = MultiZarrToZarr(singles, concat_dims=["time"], identical_dims=["lat", "lon", "zlev"]).translate()
    refs = tmp_path / "multi.json"
    refs.write_text(json.dumps(combined))
    c = _import("kerchunk-json", str(refs), tmp_path / "c")
    ds = refstore.open(str(tmp_path / "c"))
    for name in ("sst", "err", "time"):
        assert_same(ds[name][...], series_read(built["files"], name, "time"), name)
    # each file's slab is placed where its chunks start, so verify reads each file's own array
    rep = refstore.verify(c.snapshot())
    entries = [(k, v) for k, v in combined["refs"].items() if not k.rsplit("/", 1)[-1].startswith(".z")]
    assert rep.mismatched == 0 and rep.checked == sum(isinstance(v, list) for _k, v in entries) > 0
    assert rep.skipped == sum(isinstance(v, str) for _k, v in entries)  # inline: nothing to compare with
    placed = {(r["source"], r["array"]): (r["d0"], json.loads(r["meta"])["shape"])
              for r in c.snapshot().vars().to_pylist()}  # fmt: skip
    assert placed[(built["files"][0], "sst")] == (0, [1, 1, 45, 90])  # each file's own slab
    assert placed[(built["files"][1], "sst")] == (1, [1, 1, 45, 90])


@pytest.mark.filterwarnings("ignore:The following exception was caught:UserWarning")
def test_vrt_of_an_imported_series(built: dict[str, Any], tmp_path: Path) -> None:
    """The VRT reads each file's own array through GDAL, placed where the import put it."""
    from .readers.vrt import translate

    c = _import("kerchunk-json", built["outs"]["kerchunk-json"], tmp_path / "c")
    rep = emit(c, "vrt", str(tmp_path / "s.vrt"), skip_unexpressible=True)
    assert set(rep.skipped) == {"ice", "time"}  # only inline chunks: no file holds them
    translate(str(tmp_path / "s.vrt"), str(tmp_path / "s.nc"))
    import netCDF4

    with netCDF4.Dataset(str(tmp_path / "s.nc")) as nc:
        for name in ("sst", "err"):
            v = nc[name]
            v.set_auto_maskandscale(False)
            assert_same(np.asarray(v[...]), series_read(built["files"], name, "time"), name)


def _virtual(files: list[str]) -> Any:
    vz = pytest.importorskip("virtualizarr")
    import xarray as xr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parts = [vz.open_virtual_dataset("file://" + f, registry=registry, parser=HDFParser(),
                                     loadable_variables=["time", "lat", "lon", "zlev"]) for f in files]  # fmt: skip
    return xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override",
                     combine_attrs="override")


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::RuntimeWarning")
def test_virtualizarr_to_kerchunk_and_to_icechunk(built: dict[str, Any], tmp_path: Path) -> None:
    import icechunk as ic

    vds = _virtual(built["files"])
    kj = tmp_path / "vz.json"
    vds.vz.to_kerchunk(str(kj), format="json")
    kj3 = tmp_path / "vz3.json"  # zarr v3 metadata in kerchunk's JSON (VirtualiZarr >= 2.8)
    kj3.write_text(json.dumps(vds.vz.to_kerchunk(format="dict", zarr_format=3)))
    folder = str(Path(built["files"][0]).parent)
    cfg = ic.RepositoryConfig.default()
    cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(f"file://{folder}/", ic.local_filesystem_store(folder)))
    repo = ic.Repository.create(ic.local_filesystem_storage(str(tmp_path / "vz.icechunk")), config=cfg)
    s = repo.writable_session("main")
    vds.vz.to_icechunk(s.store)
    snap = s.commit("virtualizarr")
    repo.create_tag("v1", snapshot_id=snap)
    cases = (("kerchunk-json", str(kj), {}), ("kerchunk-json", str(kj3), {}),
             ("icechunk", str(tmp_path / "vz.icechunk"), {"tag": "v1"}))  # fmt: skip
    for i, (form, store, kw) in enumerate(cases):
        c = _import(form, store, tmp_path / f"c{i}", **kw)
        ds = refstore.open(str(tmp_path / f"c{i}"))
        for name in ("sst", "anom", "time", "lat"):
            assert_same(ds[name][...], series_read(built["files"], name, "time"), f"{form} {name}")
        assert refstore.verify(c.snapshot()).mismatched == 0


# --------------------------------------------------------------------------- spec details
def test_v0_and_v1_templates_and_gen(built: dict[str, Any], tmp_path: Path) -> None:
    """A hand-written spec: version 0 (bare mapping), and version 1 with a template and a gen
    entry splitting the contiguous ``err`` array (one chunk per time step) arithmetically."""
    import h5py

    f = built["files"][0]
    with h5py.File(f, "r") as h:
        off, size = h["err"].id.get_offset(), h["err"].id.get_storage_size()
    zarray = {"chunks": [1, 1, 15, 90], "compressor": None, "dtype": ">f4", "fill_value": None, "filters": None,
              "order": "C", "shape": [1, 1, 45, 90], "zarr_format": 2}  # fmt: skip
    row = size // 3
    meta = {".zgroup": '{"zarr_format": 2}', "err/.zarray": json.dumps(zarray),
            "err/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["time", "zlev", "lat", "lon"], "units": "Celsius"})}
    v1 = {"version": 1, "templates": {"u": "file://" + f},
          "gen": [{"key": "err/0.0.{{i}}.0", "url": "{{u}}", "offset": "{{" + f"{off} + i * {row}" + "}}",
                   "length": str(row), "dimensions": {"i": {"stop": 3}}}],
          "refs": meta}  # fmt: skip
    v0 = {**meta, **{f"err/0.0.{i}.0": [f, off + i * row, row] for i in range(3)}}
    for name, spec in (("v1", v1), ("v0", v0)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(spec))
        _import("kerchunk-json", str(p), tmp_path / name)
        ds = refstore.open(str(tmp_path / name))
        assert_same(ds["err"][...], hdf5_read(f, "err"), name)
        assert ds["err"].attrs["units"] == "Celsius"


# --------------------------------------------------------------------------- bad input
def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command line in this process (``main``, as the ``refstore`` script runs it): exit
    code, stdout, stderr. A subprocess per case would cost seconds of imports each."""
    import sys

    from refstore.cli.app import main

    capsys.readouterr()
    argv = sys.argv
    sys.argv = ["refstore", *args]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sys.argv = argv
    got = capsys.readouterr()
    return code, got.out, got.err


def _refuses(capsys: pytest.CaptureFixture[str], uri: str, args: list[str], *needles: str) -> None:
    before = refstore.Collection.open(uri).latest_version
    code, _out, err = _cli(capsys, "-C", uri, "import", *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    assert refstore.Collection.open(uri).latest_version == before  # nothing committed


def test_bad_input_is_one_line_exit_2_nothing_committed(
    built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "c")
    refstore.init(uri)
    spec = json.loads(Path(built["outs"]["kerchunk-json"]).read_text())

    notspec = tmp_path / "not-a-spec.json"
    notspec.write_text(json.dumps({"type": "FeatureCollection", "features": []}))
    _refuses(capsys, uri, ["kerchunk", str(notspec)], str(notspec), "not a kerchunk reference spec")

    missing = tmp_path / "missing.json"
    gone = str(tmp_path / "gone.nc")
    first = next(v[0] for v in spec["refs"].values() if isinstance(v, list))  # one source's URL
    moved = {**spec, "refs": {k: ["file://" + gone, *v[1:]] if isinstance(v, list) and v[0] == first else v
                              for k, v in spec["refs"].items()}}  # fmt: skip
    missing.write_text(json.dumps(moved))
    _refuses(capsys, uri, ["kerchunk", str(missing)], str(missing), gone, "does not exist")

    outside = tmp_path / "outside.json"
    refs = dict(spec["refs"])
    refs["sst/7.0.0.0"] = refs["sst/0.0.0.0"]
    outside.write_text(json.dumps({**spec, "refs": refs}))
    _refuses(capsys, uri, ["kerchunk", str(outside)], str(outside), "7.0.0.0", "outside its chunk grid")

    beyond = tmp_path / "beyond.json"
    refs = dict(spec["refs"])
    refs["sst/0.0.0.0"] = [refs["sst/0.0.0.0"][0], 10**9, 10]
    beyond.write_text(json.dumps({**spec, "refs": refs}))
    _refuses(capsys, uri, ["kerchunk", str(beyond)], str(beyond), "bytes")

    _refuses(capsys, uri, ["kerchunk", str(tmp_path / "nothing-here.json")], "nothing-here.json")

    badb64 = tmp_path / "bad-base64.json"
    badb64.write_text(json.dumps({**spec, "refs": {**spec["refs"], "time/0": "base64:@@not base64@@"}}))
    _refuses(capsys, uri, ["kerchunk", str(badb64)], str(badb64), "time/0", "not valid base64")

    hostile = tmp_path / "hostile-gen.json"  # a reference file is data: its templates run sandboxed
    gen = [{"key": "sst/{{ ''.__class__.__mro__[1].__subclasses__() }}", "url": "x", "dimensions": {"i": [0]}}]
    hostile.write_text(json.dumps({**spec, "gen": gen}))
    _refuses(capsys, uri, ["kerchunk", str(hostile)], str(hostile), "gen entry cannot be expanded")

    import icechunk as ic
    import zarr

    native = tmp_path / "native.icechunk"
    repo = ic.Repository.create(ic.local_filesystem_storage(str(native)))
    s = repo.writable_session("main")
    g = zarr.create_group(s.store, zarr_format=3)
    g.create_array("x", shape=(4,), chunks=(2,), dtype="i4")[:] = np.arange(4, dtype="i4")
    s.commit("native only")
    _refuses(capsys, uri, ["icechunk", str(native)], str(native), "no virtual chunks")
    _refuses(capsys, uri, ["icechunk", built["outs"]["icechunk"], "--tag", "no-such-tag"], "no-such-tag")
    _refuses(capsys, uri, ["icechunk", str(tmp_path)], "not an Icechunk repository")


def test_cli_json_report(built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ``refstore`` command itself (a subprocess, once)."""
    uri = str(tmp_path / "c")
    refstore.init(uri)
    r = run("-C", uri, "import", "kerchunk", built["outs"]["kerchunk-json"], "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["version"] == 2 and j["form"] == "kerchunk-json" and j["arrays"] == 10 and j["sources"] == 3
    assert j["chunks"] == {"referenced": 44, "inline": 4}
    assert j["refs"] == {"inserted": 48, "updated": 0, "deleted": 0}
    assert json.loads(_cli(capsys, "-C", uri, "log", "--json")[1])[0]["operation"] == "import"


# --------------------------------------------------------------------------- object storage
def test_stores_and_sources_on_s3(s3: S3, built: dict[str, Any], tmp_path: Path) -> None:
    """kerchunk JSON, a Parquet reference folder and an Icechunk repository, all on S3 and
    pointing at files on S3: imported by URL, sources identified by their etags."""
    folder = Path(built["files"][0]).parent
    urls = s3.upload(folder, "oisst")
    scanned = str(tmp_path / "scanned")
    refstore.init(scanned)
    refstore.scan(scanned, [s3.url("oisst/")], concat_dim="time", workers=1)
    c = refstore.Collection.open(scanned)
    for form in FORMS:
        emit(c, form, str(tmp_path / form))
        s3.upload(tmp_path / form, f"stores/{form}") if form != "kerchunk-json" else s3.put(
            f"stores/{form}", tmp_path / form)  # fmt: skip
    for form in FORMS:
        imported = _import(form, s3.url(f"stores/{form}"), tmp_path / f"from-{form}")
        sources = {r["source"]: r for r in imported.snapshot().sources().to_pylist()}
        assert set(urls) <= set(sources)
        assert all(sources[u]["etag"] and sources[u]["size"] == Path(folder, u.rsplit("/", 1)[-1]).stat().st_size
                   for u in urls)  # fmt: skip
        ds = refstore.open(str(tmp_path / f"from-{form}"))
        for name in ("sst", "time"):
            assert_same(ds[name][...], series_read(built["files"], name, "time"), f"{form} {name}")


# --------------------------------------------------------------------------- real files
SHARED = ("gh-kerchunk/air.nc", "gh-noaa-cdr/seaice_conc_daily_sh_20211231_f17_v04r00.nc",
          "pypi-arm-pyart/example_cfradial_ppi.nc", "gh-netcdf4-python/issue672.nc")  # fmt: skip


@pytest.mark.filterwarnings("ignore:The following exception was caught:UserWarning")
@pytest.mark.parametrize("rel", SHARED)
def test_shared_files_through_kerchunk_and_back(shared_data: Path, tmp_path: Path, rel: str) -> None:
    """A real file: refstore's scan emitted as kerchunk JSON and imported back keeps every
    reference; kerchunk's own SingleHdf5ToZarr imported reads what h5py reads."""
    import h5py

    pytest.importorskip("kerchunk")
    f = str(shared_data / rel)
    scanned = str(tmp_path / "scanned")
    refstore.init(scanned)
    refstore.scan(scanned, [f], workers=1)
    c = refstore.Collection.open(scanned)
    rep = emit(c, "kerchunk-json", str(tmp_path / "refs.json"), skip_unexpressible=True)
    back = _import("kerchunk-json", str(tmp_path / "refs.json"), tmp_path / "back")
    ca, cb = _chunks(c), _chunks(back)
    written = {k: v for k, v in ca.items() if k[0] not in rep.skipped}
    for key, (src, off, length, _data) in written.items():
        if off >= 0:
            assert cb[key] == (src, off, length, b""), key
    refs = tmp_path / "kerchunk.json"
    refs.write_text(json.dumps(_kerchunk_single(f)))
    theirs = _import("kerchunk-json", str(refs), tmp_path / "theirs")
    ds = refstore.open(str(tmp_path / "theirs"))
    checked = 0
    with h5py.File(f, "r") as h:
        for name, meta in theirs.snapshot().arrays().items():
            if meta.status != "ok" or theirs.snapshot().count("chunk", f"array = '{name}'") == 0:
                continue  # no decoder here / kerchunk wrote no chunk (compact datasets)
            assert_same(ds[name][...], hdf5_read(f, name), f"{rel} {name}")
            assert np.dtype(meta.dtype) == h[name].dtype
            checked += 1
    assert checked > 0
    assert refstore.verify(theirs.snapshot()).mismatched == 0


def test_unknown_codec_recorded_unsupported_rest_imported(built: dict[str, Any], tmp_path: Path) -> None:
    spec = json.loads(Path(built["outs"]["kerchunk-json"]).read_text())
    zarray = json.loads(spec["refs"]["anom/.zarray"])
    spec["refs"]["anom/.zarray"] = json.dumps({**zarray, "compressor": {"id": "bz2", "level": 9}})
    p = tmp_path / "bz2.json"
    p.write_text(json.dumps(spec))
    refstore.init(str(tmp_path / "c"))
    rep = import_kerchunk(refstore.Collection.open(str(tmp_path / "c")), str(p))
    assert rep.unsupported == (("anom", "codec 'bz2' has no decoder in refstore"),)
    snap = refstore.Collection.open(str(tmp_path / "c")).snapshot()
    assert snap.array("anom").status == "unsupported" and snap.count("chunk", "array = 'anom'") == 0
    assert_same(refstore.open(str(tmp_path / "c"))["sst"][...], series_read(built["files"], "sst", "time"), "sst")


def test_native_icechunk_chunks_inline_up_to_a_cap(
    built: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """refstore's own Icechunk form writes inline chunks over Icechunk's inline threshold as
    native chunks (``ice`` here): imported as inline rows; beyond the cap, refused by name."""
    from refstore.imports import icechunk as ic_import

    c = _import("icechunk", built["outs"]["icechunk"], tmp_path / "c")
    ice = c.snapshot().rows("chunk", ["offset", "inline"], "array = 'ice'").to_pylist()
    assert ice and all(r["offset"] == -1 and len(r["inline"]) == 45 * 90 for r in ice)
    assert_same(refstore.open(str(tmp_path / "c"))["ice"][...], series_read(built["files"], "ice", "time"), "ice")
    monkeypatch.setattr(ic_import, "MAX_NATIVE_BYTES", 1000)
    refstore.init(str(tmp_path / "c2"))
    with pytest.raises(refstore.BadInputError, match=r"native chunks.*'ice'"):
        import_icechunk(refstore.Collection.open(str(tmp_path / "c2")), built["outs"]["icechunk"])
    assert refstore.Collection.open(str(tmp_path / "c2")).latest_version == 1


# --------------------------------------------------------------------------- pure parts
CODECS = [
    {"id": "zlib", "level": 4}, {"elementsize": 4, "id": "shuffle"}, {"id": "fletcher32"}, {"id": "zstd", "level": 3},
    {"id": "blosc"}, {"id": "lz4h5"}, {"id": "lzw"}, {"id": "packbits"}, {"id": "lerc"},
    {"id": "szip", "mask": 141, "pixels_per_block": 32, "bits_per_pixel": 32, "pixels_per_scanline": 90},
    {"axis": -1, "id": "delta"}, {"axis": -1, "id": "floatpred"}, {"id": "refstore.grib"},
]  # fmt: skip


@pytest.mark.parametrize("codec", CODECS, ids=[c["id"] for c in CODECS])
def test_codecs_come_back_as_the_scanners_record_them(codec: dict[str, Any]) -> None:
    """Every codec a form writes (zarr v2 and v3 spellings) imports as the config a scan records."""
    from refstore.imports._zarr import v2_meta, v3_meta
    from refstore.scan._types import ArrayMeta
    from refstore.zarr_meta import v2_array, v3_array

    meta = ArrayMeta("a", ("y", "x"), (45, 90), (15, 90), "<f4", 0.0, codecs=(codec,))
    assert v2_meta("a", v2_array(meta), {"_ARRAY_DIMENSIONS": ["y", "x"]}).codecs == (codec,)
    assert v3_meta("a", v3_array(meta)).codecs == (codec,)


@given(st.lists(st.integers(2, 5), min_size=2, max_size=5), st.integers(0, 2), st.integers(0, 2**16))
def test_slabs_place_each_file_where_its_chunks_start(counts: list[int], axis: int, seed: int) -> None:
    """Files holding consecutive runs of chunks along one axis (and any chunks across the others)
    are placed at the start of their run along it, at 0 elsewhere. Each file spans chunks 0..2
    on the other axes (its first two chunks), so only ``axis`` separates the files."""
    from refstore.imports._commit import _slabs

    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keys, src = [], []
    for f, (s, n) in enumerate(zip(starts.tolist(), counts, strict=True)):
        for i in range(n):
            k = np.full(3, min(i, 1) * 2) if i < 2 else rng.integers(0, 3, size=3)
            k[axis] = s + i
            keys.append(k)
            src.append(f)
    present, _lo, _hi, place, along = _slabs(np.array(keys, np.int64), np.array(src, np.int64), len(counts))
    assert present.tolist() == list(range(len(counts)))
    want = np.zeros((len(counts), 3), np.int64)
    want[:, axis] = starts
    assert (place == want).all() and along == axis


def test_icechunk_named_container_locations(built: dict[str, Any], tmp_path: Path) -> None:
    """``vcc://NAME/path`` references resolve through the repository's container configuration."""
    import h5py
    import icechunk as ic
    import zarr
    from zarr.codecs import BytesCodec

    f = built["files"][0]
    folder, name = os.path.split(f)
    with h5py.File(f, "r") as h:
        off, size = h["err"].id.get_offset(), h["err"].id.get_storage_size()
    cfg = ic.RepositoryConfig.default()
    cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(f"file://{folder}/", ic.local_filesystem_store(folder),
                                                             name="days"))  # fmt: skip
    repo = ic.Repository.create(ic.local_filesystem_storage(str(tmp_path / "named.icechunk")), config=cfg)
    s = repo.writable_session("main")
    g = zarr.create_group(s.store, zarr_format=3)
    g.create_array("err", shape=(1, 1, 45, 90), chunks=(1, 1, 45, 90), dtype="float32",
                   serializer=BytesCodec(endian="big"), compressors=None,
                   dimension_names=("time", "zlev", "lat", "lon"))  # fmt: skip
    s.store.set_virtual_ref("err/c/0/0/0/0", f"vcc://days/{name}", offset=off, length=size)
    s.commit("named")
    c = _import("icechunk", str(tmp_path / "named.icechunk"), tmp_path / "c")
    assert set(c.snapshot().sources().column("source").to_pylist()) == {f}
    assert_same(refstore.open(str(tmp_path / "c"))["err"][...], hdf5_read(f, "err"), "err")


def test_icechunk_reference_to_a_file_modified_since_is_refused(
    built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reference whose Icechunk checksum (last modified) predates the file: Icechunk would not
    read it, and the import refuses it naming the file."""
    import datetime

    import h5py
    import icechunk as ic
    import zarr
    from zarr.codecs import BytesCodec

    f = built["files"][0]
    folder = os.path.dirname(f)
    with h5py.File(f, "r") as h:
        off, size = h["err"].id.get_offset(), h["err"].id.get_storage_size()
    cfg = ic.RepositoryConfig.default()
    cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(f"file://{folder}/", ic.local_filesystem_store(folder)))
    repo = ic.Repository.create(ic.local_filesystem_storage(str(tmp_path / "old.icechunk")), config=cfg)
    s = repo.writable_session("main")
    g = zarr.create_group(s.store, zarr_format=3)
    g.create_array("err", shape=(1, 1, 45, 90), chunks=(1, 1, 45, 90), dtype="float32",
                   serializer=BytesCodec(endian="big"), compressors=None)  # fmt: skip
    s.store.set_virtual_ref("err/c/0/0/0/0", "file://" + f, offset=off, length=size,
                            checksum=datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC))  # fmt: skip
    s.commit("stale")
    uri = str(tmp_path / "c")
    refstore.init(uri)
    _refuses(capsys, uri, ["icechunk", str(tmp_path / "old.icechunk")], f, "modified since")


def test_inline_fill_chunks_of_a_kerchunk_form_decode(tmp_path: Path) -> None:
    """An array whose fill value differs from its _FillValue: the kerchunk form writes its absent
    chunks as inline fill chunks encoded by the array's codecs; imported, they decode as h5py reads."""
    import h5py

    f = str(tmp_path / "fill.h5")
    with h5py.File(f, "w") as h:
        d = h.create_dataset("a", shape=(4, 4), chunks=(2, 2), dtype="i4", fillvalue=7, compression="gzip")
        d.attrs["_FillValue"] = np.int32(-1)
        d[0:2, 0:2] = np.arange(4, dtype="i4").reshape(2, 2)
    refstore.init(str(tmp_path / "c"))
    refstore.scan(str(tmp_path / "c"), [f], workers=1)
    emit(refstore.Collection.open(str(tmp_path / "c")), "kerchunk-json", str(tmp_path / "o.json"))
    refstore.init(str(tmp_path / "d"))
    rep = import_kerchunk(refstore.Collection.open(str(tmp_path / "d")), str(tmp_path / "o.json"))
    assert rep.to_json()["chunks"] == {"referenced": 1, "inline": 3}
    assert_same(refstore.open(str(tmp_path / "d"))["a"][...], hdf5_read(f, "a"), "a")


def _etag_repo(tmp_path: Path, name: str, f: str, etag: str | None) -> str:
    """An Icechunk repository with one virtual reference into ``f`` carrying the etag checksum."""
    import h5py
    import icechunk as ic
    import zarr
    from zarr.codecs import BytesCodec

    folder = os.path.dirname(f)
    with h5py.File(f, "r") as h:
        off, size = h["a"].id.get_offset(), h["a"].id.get_storage_size()
    cfg = ic.RepositoryConfig.default()
    cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(f"file://{folder}/", ic.local_filesystem_store(folder)))
    where = str(tmp_path / f"{name}.icechunk")
    repo = ic.Repository.create(ic.local_filesystem_storage(where), config=cfg)
    s = repo.writable_session("main")
    g = zarr.create_group(s.store, zarr_format=3)
    g.create_array("a", shape=(4, 4), chunks=(4, 4), dtype="<i4", serializer=BytesCodec(endian="little"),
                   compressors=None)  # fmt: skip
    s.store.set_virtual_ref("a/c/0/0", "file://" + f, offset=off, length=size, checksum=etag)
    s.commit(name)
    return where


def test_icechunk_reference_whose_etag_differs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reference whose Icechunk checksum is an etag the file no longer has: Icechunk itself
    refuses to read it ("the checksum of the object owning the virtual chunk has changed"), so
    the import refuses it naming the file; the file's current etag imports and reads as h5py."""
    import h5py
    import icechunk as ic
    import obstore
    import zarr
    from obstore.store import LocalStore

    f = str(tmp_path / "e.h5")
    with h5py.File(f, "w") as h:
        h.create_dataset("a", data=np.arange(16, dtype="<i4").reshape(4, 4))
    stale = _etag_repo(tmp_path, "stale", f, "0-0-40")
    access = {f"file://{tmp_path}/": ic.credentials.LocalFileSystemAccess}
    r = ic.Repository.open(ic.local_filesystem_storage(stale), authorize_virtual_chunk_access=access)
    with pytest.raises(Exception, match="checksum"):  # the oracle: Icechunk will not read it
        zarr.open_group(r.readonly_session("main").store, mode="r")["a"][...]
    uri = str(tmp_path / "c")
    refstore.init(uri)
    _refuses(capsys, uri, ["icechunk", stale], f, "etag")

    now = str(obstore.head(LocalStore(str(tmp_path)), "e.h5")["e_tag"])
    c = _import("icechunk", _etag_repo(tmp_path, "now", f, now), tmp_path / "d")
    assert_same(refstore.open(str(tmp_path / "d"))["a"][...], hdf5_read(f, "a"), "a")
    assert c.snapshot().sources().column("source").to_pylist() == [f]


def test_two_keys_naming_one_chunk_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``a/0.0`` and ``a/00.0`` parse to the same chunk: zarr reads only ``a/0.0``; keeping both
    rows would leave which bytes a read gets to chance, so the import refuses naming the chunk."""
    import h5py

    f = str(tmp_path / "d.h5")
    with h5py.File(f, "w") as h:
        d = h.create_dataset("a", data=np.arange(16, dtype="<i4").reshape(4, 4), chunks=(2, 4))
        offs = [d.id.get_chunk_info(i).byte_offset for i in range(2)]
    spec = {".zgroup": json.dumps({"zarr_format": 2}),
            "a/.zarray": json.dumps({"zarr_format": 2, "shape": [4, 4], "chunks": [2, 4], "dtype": "<i4",
                                     "compressor": None, "filters": None, "fill_value": 0, "order": "C"}),
            "a/0.0": [f, offs[0], 32], "a/00.0": [f, offs[1], 32], "a/1.0": [f, offs[1], 32]}  # fmt: skip
    (tmp_path / "dup.json").write_text(json.dumps(spec))
    uri = str(tmp_path / "c")
    refstore.init(uri)
    _refuses(capsys, uri, ["kerchunk", str(tmp_path / "dup.json")], "dup.json", "a/00.0", "a/0.0")


@pytest.mark.parametrize("damage", ["truncated", "scrambled"])
def test_a_damaged_icechunk_manifest_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 damage: str) -> None:  # fmt: skip
    """A manifest cut short (Icechunk's own reader fails) or with its tables scrambled (the
    references parsed are not the count the snapshot lists for it): refused naming the
    repository, never a traceback, never fewer chunks than the snapshot holds."""
    import h5py
    import imagecodecs

    f = str(tmp_path / "e.h5")
    with h5py.File(f, "w") as h:
        h.create_dataset("a", data=np.arange(16, dtype="<i4").reshape(4, 4))
    repo = _etag_repo(tmp_path, "r", f, None)
    (m,) = (tmp_path / "r.icechunk" / "manifests").iterdir()
    raw = m.read_bytes()
    body = bytearray(imagecodecs.zstd_decode(raw[39:]))
    if damage == "truncated":
        body = body[: len(body) // 2]
    else:  # the root table's offset points at its vtable's neighbourhood: the tables read as others
        body[0:4] = (int.from_bytes(body[0:4], "little") + 8).to_bytes(4, "little")
    m.write_bytes(raw[:39] + imagecodecs.zstd_encode(bytes(body)))
    uri = str(tmp_path / "c")
    refstore.init(uri)
    _refuses(capsys, uri, ["icechunk", repo], repo)


def test_a_reference_without_a_url_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``[null, offset, length]`` means fsspec's ``target`` option, which the file does not
    carry: refused naming the key (it was committed as an empty inline chunk that cannot decode)."""
    import h5py

    f = str(tmp_path / "d.h5")
    with h5py.File(f, "w") as h:
        d = h.create_dataset("a", data=np.arange(16, dtype="<i4").reshape(4, 4), chunks=(2, 4))
        offs = [d.id.get_chunk_info(i).byte_offset for i in range(2)]
    zarray = {"zarr_format": 2, "shape": [4, 4], "chunks": [2, 4], "dtype": "<i4", "compressor": None,
              "filters": None, "fill_value": 0, "order": "C"}  # fmt: skip
    uri = str(tmp_path / "c")
    refstore.init(uri)
    for name, value in (("three", [None, offs[0], 32]), ("one", [None])):
        spec = {".zgroup": json.dumps({"zarr_format": 2}), "a/.zarray": json.dumps(zarray),
                "a/0.0": value, "a/1.0": [f, offs[1], 32]}  # fmt: skip
        (tmp_path / f"{name}.json").write_text(json.dumps(spec))
        _refuses(capsys, uri, ["kerchunk", str(tmp_path / f"{name}.json")], f"{name}.json", "a/0.0", "no URL")


def test_an_import_over_a_mosaic_is_no_longer_a_mosaic(tmp_path: Path) -> None:
    """An import replaces the collection's arrays and sources: it clears the mosaic setting as it
    clears ``concat_dim`` (a later scan of the imported files would otherwise be planned as
    GeoTIFF tiles and refused)."""
    import h5py
    import tifffile

    from refstore.fixtures.tiff import geotags

    tif = tmp_path / "t.tif"
    tifffile.imwrite(tif, np.zeros((64, 64), "u1"), extratags=geotags(x0=0.0, y0=0.0, dx=1.0, dy=1.0),
                     tile=(64, 64), metadata=None)  # fmt: skip
    uri = str(tmp_path / "c")
    refstore.init(uri)
    refstore.scan(uri, [str(tif)], mosaic=True, timeout=None)
    assert refstore.Collection.open(uri).snapshot().config().get("mosaic")
    f = str(tmp_path / "d.h5")
    with h5py.File(f, "w") as h:
        d = h.create_dataset("a", data=np.arange(8, dtype="<i4").reshape(2, 4), chunks=(2, 4))
        off = d.id.get_chunk_info(0).byte_offset
    zarray = {"zarr_format": 2, "shape": [2, 4], "chunks": [2, 4], "dtype": "<i4", "compressor": None,
              "filters": None, "fill_value": 0, "order": "C"}  # fmt: skip
    spec = {".zgroup": json.dumps({"zarr_format": 2}), "a/.zarray": json.dumps(zarray), "a/0.0": [f, off, 32]}
    (tmp_path / "k.json").write_text(json.dumps(spec))
    import_kerchunk(refstore.Collection.open(uri), str(tmp_path / "k.json"))
    assert not refstore.Collection.open(uri).snapshot().config().get("mosaic")
    refstore.scan(uri, [f], timeout=None)  # the imported file scanned again: an HDF5 file, not a tile
    assert_same(refstore.open(uri)["a"][...], hdf5_read(f, "a"), "a")


def test_a_manifest_array_not_recognised_is_refused_not_read_as_fill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest's entries for an array whose node id is not recognised are skipped (they may
    belong to another snapshot sharing the manifest). Were a node id read wrong, that array's
    chunks would read as fill: the chunks parsed per array must be the chunks Icechunk lists for
    it (its own listing is the oracle), else refused naming the array."""
    import h5py
    import icechunk as ic
    import zarr
    from zarr.codecs import BytesCodec

    import refstore.imports.icechunk as ice

    f = str(tmp_path / "e.h5")
    with h5py.File(f, "w") as h:
        for name in ("a", "b"):
            h.create_dataset(name, data=np.arange(16, dtype="<i4").reshape(4, 4) * (2 if name == "b" else 1))
        ranges = {n: (h[n].id.get_offset(), h[n].id.get_storage_size()) for n in ("a", "b")}
    cfg = ic.RepositoryConfig.default()
    store = ic.local_filesystem_store(str(tmp_path))
    cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(f"file://{tmp_path}/", store))
    repo = str(tmp_path / "two.icechunk")
    r = ic.Repository.create(ic.local_filesystem_storage(repo), config=cfg)
    s = r.writable_session("main")
    g = zarr.create_group(s.store, zarr_format=3)
    for name, (off, size) in ranges.items():
        g.create_array(name, shape=(4, 4), chunks=(4, 4), dtype="<i4", serializer=BytesCodec(endian="little"),
                       compressors=None)  # fmt: skip
        s.store.set_virtual_ref(f"{name}/c/0/0", "file://" + f, offset=off, length=size)
    s.commit("two")
    b_id = r.readonly_session("main").get_node_id("/b")
    _import("icechunk", repo, tmp_path / "ok")  # read as it is: imports, both arrays as h5py reads them
    ds = refstore.open(str(tmp_path / "ok"))
    assert_same(ds["a"][...], hdf5_read(f, "a"), "a")
    assert_same(ds["b"][...], hdf5_read(f, "b"), "b")
    real = ice._node_id
    monkeypatch.setattr(ice, "_node_id", lambda raw: "misread" if real(raw) == b_id else real(raw))
    uri = str(tmp_path / "c")
    refstore.init(uri)
    _refuses(capsys, uri, ["icechunk", repo], repo, "'b'", "0 chunk references", "lists 1")
