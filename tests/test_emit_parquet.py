"""Flat Parquet: self-describing metadata, typed sorted key columns, row-group pruning by key
(pyarrow and DuckDB), eras, short strips and filter masks expressed, remap, as-of, identical
bytes. Values are checked through ``tests/readers/parquet.py`` (pyarrow + byte ranges)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import refstore
from refstore.emit import emit
from refstore.emit.flat_parquet import ROW_GROUP_ROWS
from refstore.table.remap import add_rule
from refstore.table.versions import create_tag

from ._emit_cases import Case, assert_same
from ._tables import era_series, many_chunks_file, small_file
from .readers import parquet as reader


def _collection(tmp_path: Path, files: list[Path], **kw: Any) -> Any:
    col = refstore.init(str(tmp_path / "col"))
    refstore.scan(col.uri, [str(p) for p in files], **kw)
    return col


def _doc(out: str) -> dict[str, Any]:
    kv = pq.read_metadata(out).metadata
    return json.loads(kv[b"refstore"])  # type: ignore[no-any-return]


def test_layout_and_metadata(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    src = small_file(tmp_path / "d" / "small.h5")
    col = _collection(tmp_path, [src])
    out = str(tmp_path / "refs.parquet")
    rep = emit(col, "parquet", out)
    t = pq.read_table(out)
    assert t.schema.names == ["array_name", "era", "dim_0", "dim_1", "path", "offset", "size", "inline", "filter_mask"]
    assert [t.schema.field(c).type for c in ("era", "dim_0", "dim_1", "offset", "size", "filter_mask")] == [
        pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.int32()]  # fmt: skip
    assert t.num_rows == rep.refs == 7
    rows = t.to_pylist()
    keys = [(r["array_name"], r["era"], r["dim_0"], -1 if r["dim_1"] is None else r["dim_1"]) for r in rows]
    assert keys == sorted(keys)
    # chunk rows equal h5py's chunk index; the compact array is inline with a null path
    with h5py.File(src) as f:
        ds = f["x"]
        want = sorted((ds.id.get_chunk_info(i).chunk_offset, ds.id.get_chunk_info(i).byte_offset,
                       ds.id.get_chunk_info(i).size) for i in range(ds.id.get_num_chunks()))  # fmt: skip
    got = [((r["dim_0"] * 4, r["dim_1"] * 4), r["offset"], r["size"]) for r in rows if r["array_name"] == "x"]
    assert got == want
    assert {r["path"] for r in rows if r["array_name"] == "x"} == {f"file://{src}"}
    (inl,) = [r for r in rows if r["array_name"] == "inline"]
    assert inl["path"] is None and inl["offset"] is None and inl["inline"] == np.arange(6, dtype="<i2").tobytes()
    doc = _doc(out)
    assert doc["format"] == "refstore-flat-parquet/1" and doc["version"] == col.snapshot().version
    assert doc["key_columns"] == ["dim_0", "dim_1"]
    x = doc["arrays"]["x"]
    # x's second dimension has no scale where its first has one: netCDF-C reads it as a dimension of
    # another length (its dimension id left unset); refstore gives a phony dimension of its own
    others = {d for name, a in doc["arrays"].items() if name != "x" for d in a["dims"]}
    assert x["dims"][0] == "time" and x["dims"][1].startswith("phony_dim_") and x["dims"][1] not in others
    assert (x["shape"], x["dtype"], x["fill_value"]) == ([6, 10], "<f4", "NaN")
    assert [c["id"] for c in x["eras"][0]["codecs"]] == ["shuffle", "zlib"]
    assert x["attrs"]["scale_factor"] == {"type": "<f4", "value": 0.5}
    assert doc["sources"] == [{"published": f"file://{src}", "scanned": str(src), "size": src.stat().st_size,
                               "mtime_ns": src.stat().st_mtime_ns, "etag": None}]  # fmt: skip
    # the file's own metadata: our key only, no timestamps; sorting columns declared
    md = pq.read_metadata(out)
    assert set(md.metadata) == {b"refstore"}
    assert [s.column_index for s in md.row_group(0).sorting_columns] == [0, 1, 2, 3]
    arrays = reader.open_form(out, None)
    with h5py.File(src) as f:
        for name in ("time", "x", "grp/T", "inline"):
            assert_same(arrays[name][...], np.asarray(f[name][()]), name)


def test_a_key_lookup_reads_one_row_group(tmp_path: Path) -> None:
    src = many_chunks_file(tmp_path / "many.h5")
    col = _collection(tmp_path, [src])
    out = str(tmp_path / "refs.parquet")
    assert emit(col, "parquet", out).refs == 40_000
    md = pq.read_metadata(out)
    assert md.num_row_groups == -(-40_000 // ROW_GROUP_ROWS) >= 5
    flt = (pads.field("array_name") == "big") & (pads.field("dim_0") == 123) & (pads.field("dim_1") == 45)
    (frag,) = pads.dataset(out, format="parquet").get_fragments()
    touched = frag.split_by_row_group(flt)
    assert len(touched) == 1  # the other row groups are pruned by their statistics
    (row,) = touched[0].to_table(filter=flt).to_pylist()
    with h5py.File(src) as f:
        info = f["big"].id.get_chunk_info_by_coord((123, 45))
    assert (row["offset"], row["size"]) == (info.byte_offset, info.size)
    # row-group key ranges do not overlap: (array, dim_0, dim_1) statistics are a clustered index
    ranges = []
    for i in range(md.num_row_groups):
        s = md.row_group(i).column(2).statistics
        ranges.append((s.min, s.max))
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))


def test_duckdb_prunes_and_reads_the_refs(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    src = many_chunks_file(tmp_path / "many.h5")
    col = _collection(tmp_path, [src])
    out = str(tmp_path / "refs.parquet")
    emit(col, "parquet", out)
    con = duckdb.connect()
    got = con.execute("SELECT path, \"offset\", size FROM read_parquet(?) WHERE array_name = 'big' AND dim_0 = 123 "
                      "AND dim_1 = 45", [out]).fetchall()  # fmt: skip
    with h5py.File(src) as f:
        info = f["big"].id.get_chunk_info_by_coord((123, 45))
    assert got == [(f"file://{src}", info.byte_offset, info.size)]
    (meta,) = con.execute("SELECT value FROM parquet_kv_metadata(?) WHERE key = 'refstore'", [out]).fetchone()
    assert json.loads(meta)["arrays"]["big"]["shape"] == [200, 200]


def test_eras_are_expressed(tmp_path: Path) -> None:
    files = era_series(tmp_path / "eras")
    col = _collection(tmp_path, [tmp_path / "eras"], concat_dim="time")
    out = str(tmp_path / "refs.parquet")
    emit(col, "parquet", out)
    x = _doc(out)["arrays"]["x"]
    assert x["dtype"] == "<i4"
    assert [(e["start"], e["stop"], e["dtype"], e["chunks"], [c["id"] for c in e["codecs"]]) for e in x["eras"]] == [
        (0, 4, "<i2", [1, 12], ["shuffle", "zlib"]), (4, 8, "<i4", [2, 5], [])]  # fmt: skip
    eras = pq.read_table(out, filters=[("array_name", "=", "x")]).column("era").to_pylist()
    assert eras == [0] * 4 + [1] * 6  # 4 chunks of (1, 12), then 2 x 3 chunks of (2, 5)
    expected = np.concatenate([np.asarray(h5py.File(p)["x"][()], dtype="<i4") for p in files])
    arr = reader.open_form(out, None)["x"]
    assert_same(arr[...], expected, "x")
    assert_same(arr[(slice(3, 6), slice(4, 11))], expected[3:6, 4:11], "x window across the boundary")


def test_short_strips_and_filter_masks_are_expressed(tmp_path: Path) -> None:
    from refstore.fixtures.edge import write_edge_file
    from refstore.fixtures.tiff import write_cases

    strip = write_cases(tmp_path / "tiff")["short_strip"]
    edge = write_edge_file(tmp_path / "edge.h5")
    for i, src in enumerate([Path(strip), edge]):
        col = refstore.init(str(tmp_path / f"col{i}"))
        refstore.scan(col.uri, [str(src)])
        out = str(tmp_path / f"refs{i}.parquet")
        rep = emit(col, "parquet", out, skip_unexpressible=True)
        assert all("has no decoder" in why for why in rep.skipped.values())  # only what refstore cannot decode
        case = Case(src.name, col.uri, str(src))
        arrays = reader.open_form(out, case)
        doc = _doc(out)
        for name, arr in arrays.items():
            sel = case.window(name)
            assert_same(arr[sel] if sel else arr[...], case.expected(name, sel), f"{src.name}:{name}")
        if i == 0:
            assert doc["arrays"]["image"]["short_edge"] is True
        else:
            masks = pq.read_table(out, filters=[("array_name", "=", "filter_mask")]).column("filter_mask").to_pylist()
            assert masks == [0, 1]


def test_remap_as_of_and_identical_bytes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    src = small_file(tmp_path / "d" / "small.h5")
    col = _collection(tmp_path, [src])
    create_tag(col, "v1")
    add_rule(col, str(src.parent) + "/", "s3://bucket/small/")
    a, b = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    emit(col, "parquet", a)
    st = os.stat(src)
    os.utime(src)  # the source's live mtime never reaches the form (with the check ignored)
    emit(col, "parquet", b, on_stale="ignore")
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert Path(a).read_bytes() == Path(b).read_bytes()
    doc = _doc(a)
    assert doc["remap"] == {"applied": True, "rules": [{"prefix": f"{src.parent}/", "replacement": "s3://bucket/small/"}]}
    assert set(pq.read_table(a, columns=["path"]).column("path").drop_null().to_pylist()) == {"s3://bucket/small/small.h5"}
    assert doc["sources"][0]["published"] == "s3://bucket/small/small.h5" and doc["sources"][0]["scanned"] == str(src)
    plain = str(tmp_path / "plain.parquet")
    emit(col, "parquet", plain, remap=False)
    assert set(pq.read_table(plain, columns=["path"]).column("path").drop_null().to_pylist()) == {f"file://{src}"}
    old = str(tmp_path / "old.parquet")
    emit(col, "parquet", old, as_of="v1")
    assert _doc(old)["tag"] == "v1" and _doc(old)["remap"]["rules"] == []
    assert _doc(a)["tag"] is None
    assert_same(reader.open_form(old, None)["x"][...], np.asarray(h5py.File(src)["x"][()]), "x as of v1")


def test_a_new_tag_on_the_version_does_not_change_a_re_emit(tmp_path: Path) -> None:
    """The form depends on the version and options only, not on the live tag list."""
    (tmp_path / "d").mkdir()
    col = _collection(tmp_path, [small_file(tmp_path / "d" / "small.h5")])
    v = col.snapshot().version
    a, b = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    emit(col, "parquet", a, as_of=v)
    create_tag(col, "later")
    emit(col, "parquet", b, as_of=v)
    assert Path(a).read_bytes() == Path(b).read_bytes()
    emit(col, "parquet", b, as_of="later")
    assert _doc(b)["tag"] == "later" and _doc(b)["version"] == v


def test_streamed_in_ranges_with_whole_row_groups(tmp_path: Path, monkeypatch: Any) -> None:
    """Arrays read range by range along axis 0 and row groups cut across ranges and arrays: the
    rows are still h5py's chunk index in key order, every row group but the last full."""
    from refstore.emit import flat_parquet

    monkeypatch.setattr(flat_parquet, "STREAM_REFS", 2)
    monkeypatch.setattr(flat_parquet, "ROW_GROUP_ROWS", 3)
    (tmp_path / "d").mkdir()
    src = small_file(tmp_path / "d" / "small.h5")
    out = str(tmp_path / "refs.parquet")
    rep = emit(_collection(tmp_path, [src]), "parquet", out)
    md = pq.read_metadata(out)
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert sum(sizes) == rep.refs == 7 and sizes[:-1] == [3] * (len(sizes) - 1) and 0 < sizes[-1] <= 3
    rows = pq.read_table(out).to_pylist()
    keys = [(r["array_name"], r["era"], r["dim_0"], -1 if r["dim_1"] is None else r["dim_1"]) for r in rows]
    assert keys == sorted(keys)
    with h5py.File(src) as f:
        ds = f["x"]
        want = sorted((ds.id.get_chunk_info(i).chunk_offset, ds.id.get_chunk_info(i).byte_offset,
                       ds.id.get_chunk_info(i).size) for i in range(ds.id.get_num_chunks()))  # fmt: skip
        got = [((r["dim_0"] * 4, r["dim_1"] * 4), r["offset"], r["size"]) for r in rows if r["array_name"] == "x"]
        assert got == want
        arrays = reader.open_form(out, None)
        for name in ("time", "x", "grp/T", "inline"):
            assert_same(arrays[name][...], np.asarray(f[name][()]), name)
