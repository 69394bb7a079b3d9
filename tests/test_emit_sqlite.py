"""SQLite (mdim-refs/0.2): the layout public readers expect, a golden schema, remap, as-of,
byte-identical emits, refusals. Values are checked through ``tests/readers/sqlite.py`` (sqlite3 +
numcodecs ids) against h5py.

The golden schema is written only by ``./dev golden`` (``tests/_golden.py``), after a deliberate
layout change; a test never writes it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import UnexpressibleError
from refstore.table.remap import add_rule
from refstore.table.versions import create_tag

from ._emit_cases import Case, assert_same
from ._golden import check
from ._tables import era_series, small_file
from .readers import sqlite as reader

GOLDEN = Path(__file__).parent / "golden" / "sqlite_schema.sql"


def _small(tmp_path: Path) -> tuple[Any, Path]:
    data = tmp_path / "data"
    data.mkdir()
    src = small_file(data / "small.h5")
    col = refstore.init(str(tmp_path / "col"))
    refstore.scan(col.uri, [str(src)])
    return col, src


def _q(out: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{out}?mode=ro", uri=True)) as con:
        return con.execute(sql, args).fetchall()


def schema_dump(out: str) -> str:
    """The DDL of every object, in creation order (what the golden file holds)."""
    rows = _q(out, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
    return "".join(f"{sql};\n" for (sql,) in rows)


def _check_values(out: str, src: Path) -> None:
    arrays = reader.open_form(out, None)
    with h5py.File(src) as f:
        names: list[str] = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        assert sorted(arrays) == sorted(names)
        for n in names:
            assert_same(arrays[n][...], np.asarray(f[n][()]), n)


def test_layout_is_mdim_refs_0_2(tmp_path: Path) -> None:
    col, src = _small(tmp_path)
    out = str(tmp_path / "refs.sqlite")
    rep = emit(col, "sqlite", out)
    assert rep.refs == 7  # time 1, x 4 of 6 (two never written), grp/T 1, inline 1
    assert _q(out, "SELECT value FROM meta WHERE key = 'format_version'") == [("mdim-refs/0.2",)]
    assert _q(out, "PRAGMA journal_mode") == [("delete",)]
    header = Path(out).read_bytes()[:100]
    assert header[18:20] == b"\x01\x01"  # legacy (rollback journal) read/write versions: not WAL
    assert not os.path.exists(out + "-journal") and not os.path.exists(out + "-wal")
    # the columns and declared types zaro's reader and its test fixture use
    assert [(c[1], c[2]) for c in _q(out, "PRAGMA table_info(sources)")][:2] == [("source_id", "INTEGER"),
                                                                                ("source", "TEXT")]  # fmt: skip
    assert [c[1] for c in _q(out, "PRAGMA table_info(remap)")] == ["target", "prefix", "replacement"]
    assert [c[1] for c in _q(out, "PRAGMA table_info(arrays)")][:12] == [
        "array", "kind", "storage", "dims", "shape", "chunks", "dtype", "fill", "codec", "attrs", "affine", "values"]
    chunk_cols = {c[1]: c[2] for c in _q(out, 'PRAGMA table_info("chunks_x")')}
    assert chunk_cols == {"source_id": "INTEGER", "dim_0": "INTEGER", "dim_1": "INTEGER", "present": "INTEGER",
                          "offset": "BIGINT", "size": "BIGINT", "info": "TEXT", "data": "BLOB"}  # fmt: skip
    view_cols = [c[1] for c in _q(out, 'PRAGMA table_info("refs_x")')]
    assert view_cols == ["dim_0", "dim_1", "present", "path", "offset", "size", "info", "data"]
    # one row per written chunk, offsets and sizes as h5py reports them
    with h5py.File(src) as f:
        ds = f["x"]
        want = sorted((ds.id.get_chunk_info(i).chunk_offset, ds.id.get_chunk_info(i).byte_offset,
                       ds.id.get_chunk_info(i).size) for i in range(ds.id.get_num_chunks()))  # fmt: skip
    got = _q(out, 'SELECT dim_0, dim_1, present, path, "offset", size FROM "refs_x" ORDER BY dim_0, dim_1')
    assert [((a * 4, b * 4), o, s) for a, b, _p, _path, o, s in got] == want
    assert {(p, path) for _a, _b, p, path, _o, _s in got} == {(1, str(src))}
    # the inline (compact) array: path NULL, bytes in data
    (row,) = _q(out, 'SELECT path, "offset", size, data FROM "refs_inline"')
    assert row[0] is None and row[1] is None and row[3] == np.arange(6, dtype="<i2").tobytes() and row[2] == 12
    kind, dtype, fill, codec = _q(out, "SELECT kind, dtype, fill, codec FROM arrays WHERE array = 'x'")[0]
    assert (kind, dtype, fill) == ("data", "<f4", "NaN")
    assert codec == '{"compressor":null,"filters":[{"elementsize":4,"id":"shuffle"},{"id":"zlib","level":4}]}'
    assert _q(out, "SELECT kind FROM arrays WHERE array = 'time'") == [("coord",)]
    assert sum(n for (n,) in _q(out, 'SELECT count(*) FROM "refs_x" UNION ALL SELECT count(*) FROM "refs_time" '
                                     'UNION ALL SELECT count(*) FROM "refs_grp/T" UNION ALL '
                                     'SELECT count(*) FROM "refs_inline"')) == rep.refs  # fmt: skip
    _check_values(out, src)


def golden_text(tmp_path: Path) -> str:
    """The schema dump of the small generated file's SQLite form."""
    col, _src = _small(tmp_path)
    out = str(tmp_path / "refs.sqlite")
    emit(col, "sqlite", out)
    return schema_dump(out)


def test_golden_schema(tmp_path: Path) -> None:
    check(GOLDEN, golden_text(tmp_path))


def test_emitting_twice_gives_identical_bytes(tmp_path: Path) -> None:
    col, _src = _small(tmp_path)
    a, b = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    emit(col, "sqlite", a)
    os.utime(_src)  # nothing time-based of the emit itself may reach the file (the source's mtime:
    emit(col, "sqlite", b, on_stale="ignore")  # the file records the scan's; a changed source is refused else)
    assert Path(a).read_bytes() == Path(b).read_bytes()


def test_remap_points_the_views_at_the_published_copy(tmp_path: Path) -> None:
    col, src = _small(tmp_path)
    moved = tmp_path / "published"
    add_rule(col, str(src.parent) + "/", str(moved) + "/")
    out = str(tmp_path / "refs.sqlite")
    emit(col, "sqlite", out)
    assert _q(out, "SELECT source, scanned FROM sources") == [(str(moved / "small.h5"), str(src))]
    assert {p for (p,) in _q(out, 'SELECT path FROM "refs_x"')} == {str(moved / "small.h5")}
    # target "scanned" maps each published location back (zaro: longest prefix first)
    rules = _q(out, "SELECT prefix, replacement FROM remap WHERE target = 'scanned' ORDER BY length(prefix) DESC")
    assert rules == [(str(moved / "small.h5"), str(src))]
    assert _q(out, "SELECT value FROM meta WHERE key = 'remap_rules'") == [
        (f'[{{"prefix":"{src.parent}/","replacement":"{moved}/"}}]',)]  # fmt: skip
    shutil.copytree(src.parent, moved)
    kept = src.with_suffix(".away")
    src.rename(kept)  # the scanned location is gone: reads go to the published copy
    _check_values(out, moved / "small.h5")
    kept.rename(src)
    plain = str(tmp_path / "plain.sqlite")
    emit(col, "sqlite", plain, remap=False)
    assert _q(plain, "SELECT source FROM sources") == [(str(src),)]
    assert _q(plain, "SELECT value FROM meta WHERE key = 'remap_rules'") == [("[]",)]


def test_as_of_an_older_tag_emits_that_version(tmp_path: Path) -> None:
    col, src = _small(tmp_path)
    create_tag(col, "v1")
    with h5py.File(src, "r+") as f:
        f["x"][4:6, 4:10] = 5.0  # writes the missing chunks
    os.utime(src, ns=(0, os.stat(src).st_mtime_ns + 10**9))
    refstore.scan(col.uri, [str(src)])
    old, new = str(tmp_path / "old.sqlite"), str(tmp_path / "new.sqlite")
    with pytest.raises(refstore.StaleSourceError, match="changed since scan"):  # v1 recorded the file before
        emit(col, "sqlite", old, as_of="v1")
    assert emit(col, "sqlite", old, as_of="v1", on_stale="ignore").refs < emit(col, "sqlite", new).refs
    assert _q(old, "SELECT value FROM meta WHERE key IN ('refstore_version', 'tag') ORDER BY key") == [
        (str(col.snapshot("v1").version),), ("v1",)]  # fmt: skip
    assert _q(new, "SELECT value FROM meta WHERE key = 'tag'") == [("",)]
    assert _q(old, 'SELECT count(*) FROM "refs_x"') == [(4,)] and _q(new, 'SELECT count(*) FROM "refs_x"') == [(6,)]
    _check_values(new, src)


def test_arrays_zarr_v2_cannot_express_are_refused_by_name(tmp_path: Path) -> None:
    files = era_series(tmp_path / "eras")
    col = refstore.init(str(tmp_path / "col"))
    refstore.scan(col.uri, [str(tmp_path / "eras")], concat_dim="time")
    out = tmp_path / "refs.sqlite"
    with pytest.raises(UnexpressibleError, match=r"array 'x' has 2 eras"):
        emit(col, "sqlite", str(out))
    assert not out.exists()
    rep = emit(col, "sqlite", str(out), skip_unexpressible=True)
    assert list(rep.skipped) == ["x"]
    got = reader.open_form(str(out), None)["time"][...]
    assert_same(got, np.concatenate([h5py.File(p)["time"][()] for p in files]), "time")


def test_round_trip_on_the_edge_file(tmp_path: Path) -> None:
    """Inline, big-endian, partial, never-written, szip... every array of the edge file that the
    form expresses reads back equal to h5py; the filter-mask array is refused."""
    from refstore.fixtures.edge import write_edge_file

    src = write_edge_file(tmp_path / "edge.h5")
    col = refstore.init(str(tmp_path / "col"))
    refstore.scan(col.uri, [str(src)])
    out = str(tmp_path / "edge.sqlite")
    rep = emit(col, "sqlite", out, skip_unexpressible=True)
    assert "filter_mask" in rep.skipped and "skip a filter" in rep.skipped["filter_mask"]
    case = Case("edge", col.uri, str(src))
    arrays = reader.open_form(out, case)
    assert len(arrays) == rep.arrays >= 10
    for name, arr in arrays.items():
        sel = case.window(name)
        assert_same(arr[sel] if sel else arr[...], case.expected(name, sel), name)


@pytest.mark.skipif(shutil.which("ogrinfo") is None, reason="GDAL command-line tools not installed")
def test_gdal_ogr_reads_the_views_with_64_bit_offsets(tmp_path: Path) -> None:
    """GDAL's SQLite driver (what serves the store over /vsicurl/) sees each view as a layer,
    with ``offset``/``size`` as Integer64 thanks to the BIGINT declarations."""
    import csv
    import subprocess

    col, src = _small(tmp_path)
    out = str(tmp_path / "refs.sqlite")
    emit(col, "sqlite", out)
    info = subprocess.run(["ogrinfo", "-ro", "-so", out, "refs_x"], capture_output=True, text=True, check=True).stdout
    assert "offset: Integer64" in info and "size: Integer64" in info
    sql = 'SELECT dim_0, dim_1, path, "offset", size FROM "refs_x" ORDER BY dim_0, dim_1'
    text = subprocess.run(["ogr2ogr", "-f", "CSV", "/vsistdout/", out, "-sql", sql], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    got = [(int(r["dim_0"]), int(r["dim_1"]), r["path"], int(r["offset"]), int(r["size"]))
           for r in csv.DictReader(text.splitlines())]  # fmt: skip
    assert got == _q(out, sql) and len(got) == 4 and {g[2] for g in got} == {str(src)}


def test_a_new_tag_on_the_version_does_not_change_a_re_emit(tmp_path: Path) -> None:
    """The form depends on the version and options only, not on the live tag list."""
    col, _src = _small(tmp_path)
    v = col.snapshot().version
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    emit(col, "sqlite", str(a), as_of=v)
    create_tag(col, "later")
    emit(col, "sqlite", str(b), as_of=v)
    assert a.read_bytes() == b.read_bytes()
