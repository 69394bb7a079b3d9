"""Remap rules and reproducible emits, through the command line users run: rules added, listed
and removed (JSON), longest prefix wins, a path and its file:// URL are one rule, --no-remap,
rules versioned with the collection, --as-of an older tag, byte-identical emits, refusals
(exit 2, one line naming the array) and --skip-unexpressible. Properties of plan/remap.py."""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.errors import BadInputError
from refstore.plan.remap import RemapRule, apply_remap, canonical_prefix, remap_one

from ._cli import invoke as run  # in this process: the commands are under test, not the process
from ._oracle import assert_same, series_read
from .readers import kerchunk_json, kerchunk_parquet

FORMS = ("kerchunk-json", "kerchunk-parquet")


def _ok(*args: str) -> Any:
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if "--json" in args else r.stdout


def _collection(tmp_path: Path, files: list[Path], name: str = "col") -> str:
    col = str(tmp_path / name)
    _ok("-C", col, "init")
    _ok("-C", col, "scan", *map(str, files), "--concat-dim", "time", "--json")
    return col


def _urls(fmt: str, out: Path) -> set[str]:
    """Every location an emitted kerchunk form points at."""
    if fmt == "kerchunk-json":
        doc = json.loads(out.read_text())
        return {v[0] for v in doc["refs"].values() if isinstance(v, list)}
    paths: set[str] = set()
    for f in out.rglob("refs.*.parq"):
        paths.update(p for p in pq.read_table(f, columns=["path"]).column("path").to_pylist() if p is not None)
    return paths


def _tree(out: Path) -> dict[str, bytes]:
    if out.is_file():
        return {"": out.read_bytes()}
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _open(fmt: str, out: Path) -> dict[str, Any]:
    reader = kerchunk_json if fmt == "kerchunk-json" else kerchunk_parquet
    return reader.open_form(str(out), None)


def test_remap_cli_add_list_remove(tmp_path: Path, series) -> None:
    files = series(2)
    col = _collection(tmp_path, files)
    data = str(files[0].parent)
    v1 = _ok("-C", col, "remap", "add", data + "/", "https://example.org/a/", "--json")["version"]
    assert _ok("-C", col, "remap", "list", "--json") == [
        {"prefix": data + "/", "replacement": "https://example.org/a/"}
    ]
    # the file:// spelling names the same rule: it replaces it
    v2 = _ok("-C", col, "remap", "add", f"file://{data}/", "https://example.org/b/", "--json")["version"]
    assert v2 > v1
    assert _ok("-C", col, "remap", "list", "--json") == [
        {"prefix": data + "/", "replacement": "https://example.org/b/"}
    ]
    # the same rule again commits nothing
    assert _ok("-C", col, "remap", "add", data + "/", "https://example.org/b/", "--json")["version"] == v2
    _ok("-C", col, "remap", "add", str(files[0]), "https://example.org/one.nc", "--json")
    assert [r["prefix"] for r in _ok("-C", col, "remap", "list", "--json")] == [data + "/", str(files[0])]
    v4 = _ok("-C", col, "remap", "remove", f"file://{data}/", "--json")["version"]
    assert _ok("-C", col, "remap", "list", "--json") == [
        {"prefix": str(files[0]), "replacement": "https://example.org/one.nc"}
    ]
    assert _ok("-C", col, "remap", "list", "--as-of", str(v2), "--json")[0]["replacement"] == "https://example.org/b/"
    assert v4 > v2
    r = run("-C", col, "remap", "remove", data + "/")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and data in r.stderr


def test_remap_longest_prefix_no_remap_versions_and_identical_bytes(tmp_path: Path, series) -> None:
    files = series(3)
    col = _collection(tmp_path, files)
    data = str(files[0].parent)
    _ok("-C", col, "tag", "before-remap")
    _ok("-C", col, "remap", "add", f"file://{data}/", "https://example.org/all/", "--json")
    _ok("-C", col, "remap", "add", str(files[1]), "https://example.org/one/day2.nc", "--json")
    assert _ok("-C", col, "diff", "before-remap", "--json")["remap_changed"] is True
    names = [p.name for p in files]
    for fmt in FORMS:
        out = tmp_path / f"out-{fmt}"
        _ok("-C", col, "emit", fmt, str(out), "--json")
        assert _urls(fmt, out) == {f"https://example.org/all/{names[0]}", "https://example.org/one/day2.nc",
                                   f"https://example.org/all/{names[2]}"}, fmt  # fmt: skip
        # the same version and options: byte-identical, in another process
        first = _tree(out)
        _ok("-C", col, "emit", fmt, str(out), "--json")
        assert _tree(out) == first, fmt
        # --no-remap: the locations as scanned
        _ok("-C", col, "emit", fmt, str(out), "--no-remap", "--json")
        assert _urls(fmt, out) == {f"file://{p}" for p in files}, fmt
        # rules are versioned: the tag taken before them has none
        _ok("-C", col, "emit", fmt, str(out), "--as-of", "before-remap", "--json")
        assert _urls(fmt, out) == {f"file://{p}" for p in files}, fmt


@pytest.mark.parametrize("fmt", FORMS)
def test_remapped_form_reads_the_moved_sources(tmp_path: Path, series, fmt: str) -> None:
    """Sources copied elsewhere and the originals removed: the remapped form reads the copies."""
    import refstore
    from refstore.emit import emit
    from refstore.table.remap import add_rule

    files = series(2)
    col = _collection(tmp_path, files)
    expected = series_read([str(p) for p in files], "sst", "time")
    moved = tmp_path / "moved place"
    shutil.copytree(files[0].parent, moved)
    add_rule(refstore.Collection.open(col), str(files[0].parent) + "/", f"file://{moved}/")
    out = tmp_path / "out"
    emit(refstore.Collection.open(col), fmt, str(out))
    shutil.rmtree(files[0].parent)
    assert _urls(fmt, out) == {f"file://{moved}/{p.name}" for p in files}
    assert_same(_open(fmt, out)["sst"][...], expected, f"{fmt} sst")


@pytest.mark.parametrize("fmt", FORMS)
def test_as_of_an_older_tag_emits_that_version(tmp_path: Path, series, fmt: str) -> None:
    import refstore
    from refstore.emit import emit
    from refstore.table.versions import create_tag

    files = series(3)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files[:2]], concat_dim="time")
    create_tag(refstore.Collection.open(col), "two-days")
    refstore.scan(col, [str(files[2])])
    old, new = tmp_path / "old", tmp_path / "new"
    rep = emit(refstore.Collection.open(col), fmt, str(old), as_of="two-days")
    assert rep.tag == "two-days" and rep.version == refstore.Collection.open(col).snapshot("two-days").version
    emit(refstore.Collection.open(col), fmt, str(new))
    got_old, got_new = _open(fmt, old)["sst"][...], _open(fmt, new)["sst"][...]
    assert got_old.shape[0] == 2 and got_new.shape[0] == 3
    assert_same(got_old, series_read([str(p) for p in files[:2]], "sst", "time"), f"{fmt} sst as of two-days")
    assert_same(got_new, series_read([str(p) for p in files], "sst", "time"), f"{fmt} sst latest")


def test_refused_arrays_exit_2_naming_the_array_and_skip_lists_them(tmp_path: Path) -> None:
    import refstore
    from refstore.fixtures.edge import write_edge_file

    path = write_edge_file(tmp_path / "edge.h5")
    col = str(tmp_path / "edge")
    refstore.init(col)
    refstore.scan(col, [str(path)])
    for fmt in FORMS:
        out = tmp_path / f"out-{fmt}"
        r = run("-C", col, "emit", fmt, str(out))
        assert r.returncode == 2 and "Traceback" not in r.stderr, fmt
        (line,) = r.stderr.strip().splitlines()
        assert "array '" in line and "--skip-unexpressible" in line
        assert not out.exists()
        rep = _ok("-C", col, "emit", fmt, str(out), "--skip-unexpressible", "--json")
        skipped = set(rep["skipped"])
        assert {"scaleoffset", "scaleoffset_float", "filter_mask"} <= skipped
        assert any(f"'{name}'" in line for name in skipped)
        arrays = _open(fmt, out)
        assert not skipped & set(arrays) and "partial" in arrays
    r = run("-C", col, "emit", "kerchunk-json", str(tmp_path / "again.json"), "--skip-unexpressible")
    assert r.returncode == 0 and all(name in r.stdout for name in skipped)


# --------------------------------------------------------------------------- properties
segments = st.lists(st.sampled_from(["a", "b", "ab", "data", "x.nc", "x", "é", "a b", "x#1", "p%41"]), min_size=1,
                    max_size=4)
paths = segments.map(lambda s: "/" + "/".join(s))
prefixes = st.tuples(segments, st.booleans()).map(lambda t: "/" + "/".join(t[0]) + ("/" if t[1] else ""))
replacements = st.sampled_from(["https://example.org/", "https://example.org/p/", "s3://bucket/k", "/mnt/"])
rule_sets = st.dictionaries(prefixes, replacements, max_size=5)


def _rules(d: dict[str, str], *, file_urls: bool = False) -> list[RemapRule]:
    return [RemapRule(canonical_prefix(("file://" if file_urls else "") + p), r) for p, r in d.items()]


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s]


def _expected(loc: str, d: dict[str, str]) -> str:
    """The oracle, stated on path segments: a prefix names a folder (or file) by its segments;
    it applies when those are the first segments of the location (a prefix ending in "/" names
    a folder, so it needs at least one more segment); the one naming the most segments wins (the
    "/"-ended spelling of a tie). The location's remaining segments follow the replacement
    (after a "/" unless the replacement or the prefix ends with one), percent-encoded when the
    replacement is an http(s) URL."""
    parts = _segments(loc)
    best: tuple[int, bool, str] | None = None
    for p, r in d.items():
        pp, folder = _segments(p), p.endswith("/")
        if parts[: len(pp)] == pp and (len(parts) > len(pp) or not folder):
            cand = (len(pp), folder, r)
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None:
        return loc
    n, folder, repl = best
    rest = parts[n:]
    if repl.startswith("https://"):
        rest = [urllib.parse.quote(x) for x in rest]
    if not rest:
        return repl
    return repl + ("" if folder or repl.endswith("/") else "/") + "/".join(rest)


@settings(max_examples=300, deadline=None)
@given(rule_sets, paths, st.randoms())
def test_longest_matching_prefix_wins_whatever_the_order(d: dict[str, str], loc: str, rnd: Any) -> None:
    rules = _rules(d)
    got = remap_one(loc, rules)
    assert got == _expected(loc, d)
    shuffled = list(rules)
    rnd.shuffle(shuffled)
    assert remap_one(loc, shuffled) == got


@settings(max_examples=300, deadline=None)
@given(rule_sets, st.lists(paths, max_size=8))
def test_a_path_and_its_file_url_are_one_rule(d: dict[str, str], locs: list[str]) -> None:
    for p in d:
        assert canonical_prefix("file://" + p) == canonical_prefix(p)
    plain, urls = _rules(d), _rules(d, file_urls=True)
    assert [remap_one(x, plain) for x in locs] == [remap_one(x, urls) for x in locs]


@settings(max_examples=200, deadline=None)
@given(st.lists(paths, max_size=12), rule_sets)
def test_column_remap_is_elementwise_and_identity_without_rules(locs: list[str], d: dict[str, str]) -> None:
    col = pa.array(locs, pa.string())
    assert pc_decode(apply_remap(col, [])) == locs
    rules = _rules(d)
    expected = [remap_one(x, rules) for x in locs]
    if len(set(expected)) < len(set(locs)):  # two sources published as one: refused
        with pytest.raises(BadInputError, match="map both"):
            apply_remap(col, rules)
    else:
        assert pc_decode(apply_remap(col, rules)) == expected


def pc_decode(arr: pa.Array) -> list[str]:
    return arr.dictionary_decode().to_pylist()  # type: ignore[no-any-return]


def test_relative_prefixes_are_absolute(tmp_path: Path) -> None:
    here = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert canonical_prefix("data/") == f"{tmp_path}/data/"
        assert canonical_prefix("file://data") == f"{tmp_path}/data"
    finally:
        os.chdir(here)
    assert canonical_prefix("s3://bucket/a") == "s3://bucket/a"
    with pytest.raises(BadInputError):
        canonical_prefix("")


# --------------------------------------------------------------------------- boundaries, URLs
def test_a_prefix_matches_at_a_path_boundary_only() -> None:
    rules = [RemapRule(canonical_prefix("/data"), "https://host/pub")]
    assert remap_one("/database/x.nc", rules) == "/database/x.nc"
    assert remap_one("/data/x.nc", rules) == "https://host/pub/x.nc"
    assert remap_one("/data", rules) == "https://host/pub"
    rules = [RemapRule(canonical_prefix("/data"), "https://host/pub/")]  # no doubled "/"
    assert remap_one("/data/x.nc", rules) == "https://host/pub/x.nc"
    url = [RemapRule("s3://bucket/a", "/mnt/a")]
    assert remap_one("s3://bucket/ab/x.nc", url) == "s3://bucket/ab/x.nc"
    assert remap_one("s3://bucket/a/x y.nc", url) == "/mnt/a/x y.nc"


def test_the_remainder_is_percent_encoded_for_http_and_literal_for_object_stores() -> None:
    to_http = [RemapRule("/d/", "https://host/p/"), RemapRule("s3://b/", "https://b.s3.example.org/")]
    assert remap_one("/d/x#1 a%41.h5", to_http) == "https://host/p/x%231%20a%2541.h5"
    assert remap_one("s3://b/k/x#1.h5", to_http) == "https://b.s3.example.org/k/x%231.h5"
    to_s3 = [RemapRule("/d/", "s3://bucket/"), RemapRule("https://host/", "/mnt/")]
    assert remap_one("/d/x#1 a%41.h5", to_s3) == "s3://bucket/x#1 a%41.h5"  # s3 keys are literal
    assert remap_one("https://host/x%231%20a.h5", to_s3) == "/mnt/x#1 a.h5"


def test_two_spellings_of_one_published_location_are_refused() -> None:
    """/other/a.nc remapped to file:///data/a.nc is the unremapped /data/a.nc: two sources
    published as one."""
    rules = [RemapRule("/other/", "file:///data/")]
    with pytest.raises(BadInputError, match="map both"):
        apply_remap(pa.array(["/data/a.nc", "/other/a.nc"]), rules)
    assert pc_decode(apply_remap(pa.array(["/data/b.nc", "/other/a.nc"]), rules)) == ["/data/b.nc", "file:///data/a.nc"]


@pytest.mark.parametrize("replacement", ["relative/", "file://relative/", "data", "https//host/"])
def test_a_relative_replacement_is_refused(tmp_path: Path, series, replacement: str) -> None:
    col = _collection(tmp_path, series(1))
    r = run("-C", col, "remap", "add", "/data/", replacement)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and repr(replacement) in r.stderr
    assert _ok("-C", col, "remap", "list", "--json") == []
    with pytest.raises(BadInputError, match="absolute path"):  # a stored rule is checked at emit too
        remap_one("/data/x.nc", [RemapRule("/data/", replacement)])


def _range_server(root: Path) -> Any:
    """A loopback http.server serving ``root`` with byte ranges (Icechunk reads ranges)."""
    import http.server
    import threading

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, directory=str(root), **k)

        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            rng = self.headers.get("Range")
            path = Path(self.translate_path(self.path))
            if not rng or not path.is_file():
                super().do_GET()
                return
            data = path.read_bytes()
            first, _, last = rng.removeprefix("bytes=").partition("-")
            a, b = int(first), (int(last) if last else len(data) - 1)
            body = data[a : b + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{a + len(body) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.mark.parametrize("name", ["a b.h5", "x#1.h5", "p%41.h5"])
def test_local_files_remapped_to_http_are_read_by_their_names(tmp_path: Path, name: str) -> None:
    """A file name with URL syntax in it (space, '#', '%41'), remapped to an http:// server: the
    published URL is percent-encoded, and Icechunk's HTTP store and the kerchunk JSON name the
    right object (the server's decoded path is the file name)."""
    import h5py

    import refstore
    from refstore.emit import emit
    from refstore.table.remap import add_rule

    from .readers import icechunk as icechunk_reader

    d = tmp_path / "d"
    d.mkdir()
    # a second file with other values beside it: each published URL must name its own file
    for i, n in enumerate([name, "other.h5"]):
        with h5py.File(d / n, "w") as f:
            f.create_dataset("x", data=np.full((4,), i + 1, "i4"), chunks=(2,))
    srv = _range_server(d)
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/"
        for n in (name, "other.h5"):
            col = str(tmp_path / f"col-{n}")
            refstore.init(col)
            refstore.scan(col, [str(d / n)])
            add_rule(refstore.Collection.open(col), str(d) + "/", url)
            doc_out = tmp_path / f"{n}.json"
            emit(refstore.Collection.open(col), "kerchunk-json", str(doc_out))
            refs = json.loads(doc_out.read_text())["refs"]
            assert {v[0] for v in refs.values() if isinstance(v, list)} == {url + urllib.parse.quote(n)}
            out = tmp_path / f"{n}.icechunk"
            emit(refstore.Collection.open(col), "icechunk", str(out))
            got = np.asarray(icechunk_reader.open_form(str(out), None)["x"][...])
            np.testing.assert_array_equal(got, np.full((4,), 1 if n == name else 2, "i4"))
    finally:
        srv.shutdown()
        srv.server_close()


def test_local_files_remapped_to_s3_keep_literal_keys(tmp_path: Path, s3: Any) -> None:
    """A file name with URL syntax in it, uploaded under the same (literal) key and remapped to
    s3://: the published location names that key, and GDAL's /vsis3/ (the VRT's reader) reads
    it from the loopback S3 server."""
    import subprocess

    import h5py

    import refstore
    from refstore.emit import emit
    from refstore.table.remap import add_rule

    name = "x#1 a%41.h5"
    d = tmp_path / "d"
    d.mkdir()
    with h5py.File(d / name, "w") as f:
        f.create_dataset("x", data=np.arange(4, dtype="i4") + 7, chunks=(2,))
    s3.put("pub/" + name, d / name)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(d / name)])
    add_rule(refstore.Collection.open(col), str(d) + "/", s3.url("pub/"))
    out = tmp_path / "out.vrt"
    emit(refstore.Collection.open(col), "vrt", str(out))
    assert f"/vsis3/{s3.bucket}/pub/{name}<" in out.read_text()
    host = s3.server.endpoint.split("//", 1)[1]
    env = {**os.environ, "AWS_S3_ENDPOINT": host, "AWS_HTTPS": "NO", "AWS_VIRTUAL_HOSTING": "FALSE"}
    r = subprocess.run(["gdalmdiminfo", "-detailed", "-array", "x", str(out)], capture_output=True, text=True,
                       env=env, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["values"] == [7, 8, 9, 10]
