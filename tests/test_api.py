"""The public Python API: ``refstore.Collection``, one method per command, checked against
h5py on the generated OISST-like series; each command's ``--json`` is the method's result's
``to_json()``; the ``a*`` variants leave an event loop free."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import shutil
from datetime import timedelta
from importlib.resources import files as package_files
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.fixtures.oisst import write_series

from ._cli import invoke

DAYS = 3


def _chunks(path: Path, name: str) -> dict[tuple[int, ...], tuple[int, int]]:
    """Chunk offset -> (file offset, stored size) of ``name`` in ``path``, as h5py gives them."""
    with h5py.File(path, "r") as f:
        ds = f[name]
        out = {}
        for i in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(i)
            out[tuple(int(x) for x in info.chunk_offset)] = (int(info.byte_offset), int(info.size))
        return out


def _h5(files: list[Path], name: str) -> np.ndarray[Any, Any]:
    """``name`` of the series: the files' arrays along time (h5py, raw stored values)."""
    parts = []
    for p in files:
        with h5py.File(p, "r") as f:
            parts.append(f[name][...])
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[refstore.Collection, list[Path]]:
    root = tmp_path_factory.mktemp("api")
    series = write_series(root / "data", DAYS)
    col = refstore.init(root / "col")
    col.scan(root / "data", concat_dim="time", timeout=None)
    return col, series


@pytest.fixture
def fresh(built: tuple[refstore.Collection, list[Path]], tmp_path: Path) -> tuple[refstore.Collection, list[Path]]:
    """A copy of the built collection (same sources) that a test may change."""
    col, series = built
    shutil.copytree(col.uri, tmp_path / "col")
    return refstore.Collection.open(tmp_path / "col"), series


# ------------------------------------------------------------------------ opening
def test_init_and_open_give_the_collection_and_its_versions(tmp_path: Path, built: Any) -> None:
    col, series = built
    again = refstore.Collection.open(Path(col.uri))
    assert isinstance(again, refstore.Collection) and again.uri == col.uri
    ds = again.open()  # on an instance: a version for reading
    assert isinstance(ds, refstore.Dataset) and ds.version == col.latest_version
    assert again.open(as_of="latest").version == ds.version == refstore.open(col.uri).version
    np.testing.assert_array_equal(ds["sst"][...], _h5(series, "sst"))
    with pytest.raises(refstore.CollectionNotFoundError):
        refstore.Collection.open(tmp_path / "nothing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    with pytest.raises(refstore.NotACollectionError):
        refstore.init(tmp_path / "other")
    with pytest.raises(refstore.NotACollectionError):
        refstore.Collection.open(tmp_path / "other")


def test_scan_and_info_agree_with_h5py(built: Any) -> None:
    col, series = built
    info = col.info()
    assert info.to_json()["version"] == info.version == col.latest_version
    assert info.sources == DAYS and info.held_chunks == 0 and info.concat_dim == "time"
    with h5py.File(series[0], "r") as f:
        for name in ("sst", "anom", "mask", "meta/quality", "lat"):
            ds = f[name]
            a = info.arrays[name]
            concat = name in ("sst", "anom")
            assert a["shape"] == ([ds.shape[0] * DAYS, *ds.shape[1:]] if concat else list(ds.shape)), name
            assert a["chunks"] == list(ds.chunks or ds.shape), name
            assert np.dtype(a["dtype"]) == ds.dtype, name
        assert info.arrays["sst"]["fill_value"] == int(f["sst"].fillvalue)
        assert info.arrays["sst"]["attrs"]["units"] == f["sst"].attrs["units"]
        assert info.arrays["sst"]["attrs"]["scale_factor"] == pytest.approx(float(f["sst"].attrs["scale_factor"]))
    refs = sum(len(_chunks(p, n)) for p in series for n in ("sst", "anom"))
    assert refs == sum(info.arrays[n]["refs"] for n in ("sst", "anom"))


def test_scan_reports_progress_and_rescans_nothing(tmp_path: Path) -> None:
    series = write_series(tmp_path / "data", DAYS)
    col = refstore.init(str(tmp_path / "col"))
    col.scan(tmp_path / "data", concat_dim="time")  # the default: in worker processes, with a deadline
    seen: list[tuple[int, int]] = []
    rep = col.scan([str(p) for p in series], timeout=None, progress=lambda d, t: seen.append((d, t)))
    assert not rep.committed and rep.to_json()["sources"]["unchanged"] == DAYS
    write_series(series[0].parent, DAYS + 1)  # one day more: the others rewritten with the same bytes
    rep = col.scan(series[0].parent, timeout=None, progress=lambda d, t: seen.append((d, t)))
    assert rep.committed and rep.version == col.latest_version
    assert seen and seen[-1][0] == seen[-1][1] == rep.new + rep.changed


def test_read_equals_h5py_and_an_empty_window_is_refused(built: Any, tmp_path: Path) -> None:
    col, series = built
    want = _h5(series, "sst")[0:3, 0, 10:30, 20:40]
    got = col.read("sst", "0:3,0,10:30,20:40")
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(col.read("sst", (slice(0, 3), 0, slice(10, 30), slice(20, 40)),
                                           as_of=col.latest_version), want)  # fmt: skip
    with pytest.raises(refstore.BadInputError, match="selects no element"):
        col.read("sst", "5:9")
    out = tmp_path / "x.npy"
    r = invoke("-C", col.uri, "read", "sst", "--window", "5:9", "--out", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "selects no element" in r.stderr
    assert not out.exists()
    r = invoke("-C", col.uri, "read", "sst", "--as-of", "latest", "--window", "0:3,0,10:30,20:40", "--out", str(out))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out), want)


# ------------------------------------------------------------------------ versions
def test_tags_log_and_latest(fresh: Any) -> None:
    col, _ = fresh
    v = col.latest_version
    assert col.tag("r1") == refstore.Tag("r1", v)
    assert col.tag("r0", as_of=1).version == 1
    assert col.tags() == [refstore.Tag("r0", 1), refstore.Tag("r1", v)]
    log = col.log()
    assert [e.version for e in log] == sorted((e.version for e in log), reverse=True)
    assert log[0].version == v and log[0].operation == "scan" and log[0].tags == ("r1",)
    assert col.info("latest").version == col.info("r1").version == v
    with pytest.raises(refstore.BadInputError, match="newest version"):
        col.tag("latest")
    assert col.delete_tag("r0").to_json() == {"deleted": "r0", "version": 1}
    with pytest.raises(refstore.NotFoundError):
        col.delete_tag("r0")
    with pytest.raises(refstore.NotFoundError):
        col.info("no-such-tag")
    r = invoke("-C", col.uri, "tag", "--as-of", "latest", "r2", "--json")
    assert json.loads(r.stdout) == {"name": "r2", "version": v}


def test_hold_is_a_change_diff_reports_and_a_published_form_shows(fresh: Any, tmp_path: Path) -> None:
    col, series = fresh
    before = col.latest_version
    day0 = _chunks(series[0], "sst")
    held = col.hold(array="sst", window="0:1")
    assert held.chunks == len(day0) and held.bytes == sum(n for _, n in day0.values())
    assert held.version == col.latest_version == before + 1
    d = col.diff(before)
    assert isinstance(d, refstore.Diff) and d.changed and d.differs
    j = d.to_json()
    assert j["arrays"]["sst"] == {"added": 0, "removed": 0, "changed": 0, "metadata_changed": False,
                                  "held": {"added": len(day0), "removed": 0, "bytes": held.bytes}}  # fmt: skip
    assert j["arrays"]["anom"]["held"] == {"added": 0, "removed": 0, "bytes": 0}
    assert not col.diff(before, before).changed
    # the kerchunk JSON of the two versions differs: held chunks go in as bytes
    col.emit("kerchunk-json", tmp_path / "a.json", before)
    col.emit("kerchunk-json", tmp_path / "b.json", "latest")
    a, b = (json.loads((tmp_path / f).read_text())["refs"] for f in ("a.json", "b.json"))
    assert {k for k in a if a[k] != b[k]} == {f"sst/0.0.{y // 20}.{x // 32}" for _t, _z, y, x in day0}
    r = invoke("-C", col.uri, "diff", str(before), "--exit-code")
    assert r.returncode == 1 and "differs" in r.stdout
    r = invoke("-C", col.uri, "diff", str(before), "latest", "--json")
    assert json.loads(r.stdout) == j
    back = col.diff(col.latest_version, before).to_json()["arrays"]["sst"]["held"]
    assert back == {"added": 0, "removed": len(day0), "bytes": held.bytes}
    gone = col.release(array="sst")
    assert (gone.chunks, gone.bytes) == (held.chunks, held.bytes)
    assert col.diff(held.version).to_json()["arrays"]["sst"]["held"]["removed"] == len(day0)


def test_a_selection_that_meets_nothing_is_refused(fresh: Any) -> None:
    col, _ = fresh
    v = col.latest_version
    # latitudes run -88..88 and longitudes 2..358: this box is off both
    for kw in ({"bbox": (0.0, 89.0, 1.0, 89.5)}, {"time": ("1990-01-01", "1990-02-01")},
               {"array": "sst", "bbox": "0,89,1,89.5"}):  # fmt: skip
        with pytest.raises(refstore.BadInputError, match="meets no element"):
            col.hold(**kw)
        with pytest.raises(refstore.BadInputError, match="meets no element"):
            col.release(**kw)
    with pytest.raises(refstore.BadInputError, match="select chunks"):
        col.hold()
    assert col.latest_version == v
    for cmd in ("hold", "release"):
        r = invoke("-C", col.uri, cmd, "--bbox", "0,89,1,89.5")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "meets no element" in r.stderr
    assert col.latest_version == v


# ------------------------------------------------------------------------ publishing
def test_remap_and_emit_point_at_h5pys_chunks(fresh: Any, tmp_path: Path) -> None:
    col, series = fresh
    folder = str(series[0].parent) + "/"
    added = col.remap_add(folder, "https://example.org/oisst/")
    assert added == refstore.Commit(col.latest_version)
    assert [r.to_json() for r in col.remap_list()] == [{"prefix": folder, "replacement": "https://example.org/oisst/"}]
    rep = col.emit("kerchunk-json", tmp_path / "k.json")
    assert rep.version == col.latest_version and rep.to_json()["format"] == "kerchunk-json"
    doc = json.loads((tmp_path / "k.json").read_text())
    templates = doc.get("templates", {})
    for day, path in enumerate(series):
        for (t, z, y, x), (offset, size) in _chunks(path, "sst").items():
            url, off, length = doc["refs"][f"sst/{day + t}.{z}.{y // 20}.{x // 32}"]
            for k, val in templates.items():
                url = url.replace("{{" + k + "}}", val)
            assert (url, off, length) == (f"https://example.org/oisst/{path.name}", offset, size)
    assert col.remap_remove(folder).version == col.latest_version and col.remap_list() == []
    assert col.remap_list(added.version)[0].prefix == folder


def test_imports_round_trip_the_values(built: Any, tmp_path: Path) -> None:
    col, series = built
    col.emit("kerchunk-json", tmp_path / "k.json")
    col.emit("icechunk", tmp_path / "repo")
    want = _h5(series, "sst")
    seen: list[tuple[int, int]] = []
    kerchunk, icechunk = refstore.init(tmp_path / "k"), refstore.init(tmp_path / "i")
    allow = [str(series[0].parent) + "/"]  # the sources lie outside the stores' own folders
    with pytest.raises(refstore.BadInputError, match="outside the allowed locations"):
        refstore.init(tmp_path / "refused").import_kerchunk(tmp_path / "k.json")
    reps = [kerchunk.import_kerchunk(tmp_path / "k.json", allow=allow, progress=lambda d, t: seen.append((d, t))),
            icechunk.import_icechunk(tmp_path / "repo", branch="main", allow=allow)]  # fmt: skip
    assert seen and seen[-1][0] == seen[-1][1]
    for other, rep in zip((kerchunk, icechunk), reps, strict=True):
        assert rep.version == other.latest_version and rep.to_json()["version"] == rep.version
        got = other.read("sst")
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_catalog_coverage_and_report(fresh: Any, tmp_path: Path) -> None:
    col, _ = fresh
    cat = col.catalog(tmp_path / "stac.json", assets=["kerchunk-json=https://example.org/o.json"])
    stac = json.loads((tmp_path / "stac.json").read_text())
    assert cat.version == col.latest_version and cat.assets == ("kerchunk-json",)
    assert stac["assets"]["kerchunk-json"]["href"] == "https://example.org/o.json"
    again = col.catalog(tmp_path / "s2.json", assets={"kerchunk-json": "https://example.org/o.json"})
    assert again.assets == cat.assets
    col.hold(array="sst", window="0:1")
    cov = col.coverage("sst", tmp_path / "c.png", size="400x300")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shares = cov.to_json()["shares"]
    assert sum(shares.values()) == pytest.approx(1.0) and shares["held"] > 0 and shares["absent"] > 0
    assert cov.to_json()["out"] == str(tmp_path / "c.png") and cov.to_json()["picture"]["width"] == 400
    with pytest.raises(refstore.BadInputError, match="no such folder"):
        col.coverage("sst", tmp_path / "nowhere" / "c.png")
    page = col.report(tmp_path / "r.html", "latest")
    assert page.version == col.latest_version and page.tag is None and "sst" in page.arrays
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


# ------------------------------------------------------------------------ checking
def test_verify_and_a_touched_source_says_one_line_in_cli_words(tmp_path: Path) -> None:
    series = write_series(tmp_path / "data", 2)
    col = refstore.init(tmp_path / "col")
    col.scan(tmp_path / "data", concat_dim="time", timeout=None)
    rep = col.verify()
    placed = sum(len(_chunks(p, n)) for p in series for n in ("sst", "anom"))
    assert rep.mismatched == 0 and rep.exit_code == 0 and rep.checked >= placed
    assert col.verify(sample=5, array="sst").checked == 5
    st = os.stat(series[1])
    os.utime(series[1], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: same bytes, new mtime
    rep = col.verify()
    assert rep.exit_code == 1 and rep.mismatched > 1 and {m["source"] for m in rep.mismatches} == {str(series[1])}
    r = invoke("-C", col.uri, "verify")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mismatch")]
    assert r.returncode == 1 and len(lines) == 1 and f"{rep.mismatched} chunks" in lines[0], r.stderr
    assert "--on-stale warn" in lines[0] and "on_stale=" not in r.stderr
    out = tmp_path / "x.npy"
    r = invoke("-C", col.uri, "read", "sst", "--out", str(out))
    assert r.returncode == 2 and "--on-stale warn" in r.stderr and "on_stale=" not in r.stderr
    with pytest.raises(refstore.StaleSourceError, match="on_stale='warn'"):  # Python's spelling in Python
        col.read("sst")


def test_compact_and_gc_say_what_the_grace_period_kept(fresh: Any) -> None:
    col, _ = fresh
    col.tag("keep")
    col.hold(array="mask")
    col.release(array="mask")
    rep = col.compact()
    assert rep.version == col.latest_version and rep.to_json()["version"] == rep.version
    versions = [e.version for e in col.log()]
    kept = col.gc(keep_last=1)  # the default grace (1 h) keeps every version made just now
    assert kept.versions_removed == () and kept.kept_by_grace and col.latest_version not in kept.kept_by_grace
    assert set(kept.kept_by_grace) == set(versions) - {col.latest_version, col.info("keep").version}
    r = invoke("-C", col.uri, "gc", "--keep-last", "1")
    assert r.returncode == 0 and "younger than --grace 1h" in r.stdout, r.stdout
    gone = col.gc(keep_last=1, grace=timedelta(0))
    assert gone.kept_by_grace == () and set(gone.versions_kept) == {col.latest_version, col.info("keep").version}
    assert gone.to_json()["versions_removed"] == list(gone.versions_removed) and gone.versions_removed
    with pytest.raises(refstore.BadInputError, match="grace"):
        col.gc(grace="soon")
    fine = col.repair()  # every version it keeps reads: nothing to repair
    assert (fine.version, fine.restored, fine.unreadable) == (col.latest_version, None, ())
    r = invoke("-C", col.uri, "repair", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == fine.to_json()


# ------------------------------------------------------------------------ the CLI over the API
def test_every_json_the_cli_prints_is_the_api_results(built: Any) -> None:
    col, _ = built

    def cli(*args: str) -> Any:
        r = invoke("-C", col.uri, *args, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    assert cli("info") == col.info().to_json()
    assert cli("info", "--as-of", "1") == col.info(1).to_json()
    assert cli("log") == [e.to_json() for e in col.log()]
    assert cli("tags") == [t.to_json() for t in col.tags()]
    assert cli("remap", "list") == [r.to_json() for r in col.remap_list()]
    assert cli("diff", "1") == col.diff(1).to_json()


def test_version_flag_and_tables_off_a_terminal(built: Any) -> None:
    col, _ = built
    r = invoke("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"refstore {refstore.__version__}"
    r = invoke("-C", col.uri, "info", env={"COLUMNS": "40"})  # piped: never cut to the width
    assert r.returncode == 0 and f"{DAYS}x1x45x90" in r.stdout and "…" not in r.stdout


def test_bytes_fill_values_are_shown_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("code", shape=(8,), dtype="S4", chunks=(4,), fillvalue=b"ab")[:4] = [b"w", b"x", b"y", b"z"]
    col = refstore.init(tmp_path / "col")
    col.scan(path, timeout=None)
    assert col.info().arrays["code"]["fill_value"] == "YWIAAA=="  # JSON: base64 of the raw value, as before
    r = invoke("-C", col.uri, "info")
    assert r.returncode == 0 and "b'ab\\x00\\x00'" in r.stdout and "YWIAAA==" not in r.stdout, r.stdout
    np.testing.assert_array_equal(col.read("code"), h5py.File(path, "r")["code"][...])
    with pytest.raises(refstore.BadInputError, match="meets no element"):  # no array has a time coordinate
        col.hold(time=("2024-01-01", "2024-01-02"))
    r = invoke("-C", col.uri, "hold", "--time", "2024-01-01/2024-01-02")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "meets no element" in r.stderr


# ------------------------------------------------------------------------ async, typing, docs
async def test_async_variants_leave_the_event_loop_free(built: Any) -> None:
    col, series = built
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.002)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        seen: list[tuple[int, int]] = []
        await asyncio.sleep(0.01)
        before = ticks
        rep = await col.averify(progress=lambda d, t: seen.append((d, t)))
        during = ticks - before  # a call blocking the loop would leave the ticker at most one turn
        info, d, data = await asyncio.gather(col.ainfo(), col.adiff(1), col.aread("sst", "0:1"))
    finally:
        task.cancel()
    assert rep.mismatched == 0 and seen and seen[-1][0] == seen[-1][1] and during > 3, during
    assert info.version == col.latest_version and d.changed
    np.testing.assert_array_equal(data, _h5(series[:1], "sst"))


def test_the_public_surface_is_typed_and_documented() -> None:
    assert package_files("refstore").joinpath("py.typed").is_file()
    public = [n for n in vars(refstore.Collection) if not n.startswith("_")]
    verbs = {"scan", "info", "log", "tag", "delete_tag", "tags", "diff", "hold", "release", "remap_add",
             "remap_remove", "remap_list", "emit", "verify", "compact", "gc", "import_kerchunk", "import_icechunk",
             "catalog", "coverage", "report", "read", "create"}  # fmt: skip
    assert verbs <= set(public)
    for name in public:
        method = getattr(refstore.Collection, name)
        doc = inspect.getdoc(method) or ""
        assert ">>>" in doc, f"Collection.{name} has no example"
        if name not in {f"a{v}" for v in verbs}:
            assert "return" in inspect.get_annotations(method), name
    assert ">>>" in (refstore.Collection.__doc__ or "") and ">>>" in (refstore.init.__doc__ or "")
    for name in refstore.__all__:
        assert getattr(refstore, name) is not None, name
