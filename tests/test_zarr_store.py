"""Zarr v2 and v3 stores (local folders) imported as references: every chunk object a source
referenced whole. Oracle: zarr-python over the same store (values, dtype, fill value, attributes),
and fsspec + zarr over the kerchunk JSON refstore emits from the imported collection."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import BadInputError
from refstore.imports import import_zarr

from ._cli import run

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # zarr: consolidated v3 metadata is not in the spec


def _compressors(fmt: int) -> list[Any]:
    from zarr.codecs import BloscCodec, ZstdCodec

    if fmt == 2:
        import numcodecs

        return [numcodecs.Zlib(level=3), numcodecs.Zstd(level=1), numcodecs.Blosc(cname="lz4", shuffle=1)]
    return [ZstdCodec(level=2), BloscCodec(cname="zstd", shuffle="shuffle")]


def _store(path: Path, fmt: int, *, consolidated: bool) -> dict[str, np.ndarray[Any, Any]]:
    """A store of several dtypes and compressors, chunks left unwritten (absent), a subgroup."""
    g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    g.attrs.update({"title": "a store", "n": 3, "ratio": 0.25, "flags": [1, 2]})
    rng = np.random.default_rng(fmt)
    expected: dict[str, np.ndarray[Any, Any]] = {}
    for i, (dtype, comp) in enumerate(zip(("<f4", ">f8", "<i2", "<u4", "|i1"), _compressors(fmt) * 3, strict=False)):
        name = f"v{i}"
        a = g.create_array(name, shape=(9, 7), chunks=(4, 3), dtype=dtype, fill_value=5,
                           compressors=[comp], **({"dimension_names": ("y", "x")} if fmt == 3 else {}))  # fmt: skip
        a.attrs.update({"units": "K", "scale": 2.5})
        a[:4, :] = (rng.random((4, 7)) * 100).astype(dtype)  # rows 4..8 never written: absent chunks
        expected[name] = a[...]
    sub = g.create_group("inner")
    b = sub.create_array("count", shape=(10,), chunks=(3,), dtype="<i8", fill_value=-1)
    b[2:5] = [1, 2, 3]
    expected["inner/count"] = b[...]
    if consolidated:
        zarr.consolidate_metadata(str(path))
    return expected


def _check(uri: Path, store: Path, expected: dict[str, np.ndarray[Any, Any]]) -> None:
    ds = refstore.open(str(uri))
    oracle = zarr.open_group(str(store), mode="r")
    for name, want in expected.items():
        got = ds[name][...]
        z = oracle[name][...]
        assert got.dtype == z.dtype, name
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, z)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("consolidated", [False, True])
def test_store_reads_as_zarr_python_reads_it(tmp_path: Path, fmt: int, consolidated: bool) -> None:
    store = tmp_path / "s.zarr"
    expected = _store(store, fmt, consolidated=consolidated)
    col = refstore.init(str(tmp_path / "c"))
    rep = import_zarr(col, str(store))
    chunk_files = [f for f in store.rglob("*") if f.is_file() and not f.name.startswith(".z") and f.name != "zarr.json"]
    assert rep.unsupported == () and rep.refs == len(chunk_files) and rep.inline == 0
    _check(tmp_path / "c", store, expected)
    # each chunk row: the object's path, offset 0, its size
    rows = col.snapshot().chunk_rows("v0", columns=("source", "offset", "length")).to_pylist()
    assert rows and all(r["offset"] == 0 and r["length"] == os.path.getsize(r["source"]) for r in rows)
    assert all(r["source"].startswith(str(store) + "/v0/") for r in rows)


def test_engine_verify_hold_and_emitted_kerchunk(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    fsspec = pytest.importorskip("fsspec")
    store = tmp_path / "s.zarr"
    expected = _store(store, 3, consolidated=True)
    col = refstore.init(str(tmp_path / "c"))
    import_zarr(col, str(store))
    oracle = xr.open_zarr(str(store), consolidated=True, mask_and_scale=False)
    with xr.open_dataset(str(tmp_path / "c"), engine="refstore", mask_and_scale=False) as got:
        for name in ("v0", "v1", "v2"):
            xr.testing.assert_identical(got[name].load().variable, oracle[name].load().variable)
    v = refstore.verify(col.snapshot())  # each chunk object against zarr-python over the store
    n_chunks = col.snapshot().count("chunk")
    assert v.mismatched == 0 and v.checked == n_chunks > 0
    res = run("-C", str(tmp_path / "c"), "hold", "--array", "v0", "--json")
    assert res.returncode == 0, res.stderr
    v = refstore.verify(refstore.Collection.open(str(tmp_path / "c")).snapshot())
    assert v.mismatched == 0 and v.held_mismatched == 0 and v.held_checked == 3  # v0: rows 0..3 written, 3 chunks
    out = tmp_path / "refs.json"
    emit(col, "kerchunk-json", str(out))
    mapper = fsspec.get_mapper("reference://", fo=str(out))
    again = zarr.open_group(mapper, mode="r", zarr_format=2)
    reopened = zarr.open_group(str(store), mode="r")
    for name, want in expected.items():
        got = again[name][...]
        np.testing.assert_array_equal(got, want)
        assert got.dtype == reopened[name][...].dtype
    assert dict(again["v0"].attrs)["units"] == "K"


def test_attributes_and_fill_values_exact(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    _store(store, 2, consolidated=False)
    col = refstore.init(str(tmp_path / "c"))
    import_zarr(col, str(store))
    metas = {r["array"]: json.loads(r["meta"]) for r in col.snapshot().ds.to_table(
        columns=["array", "meta"], filter="kind = 'array'").to_pylist()}  # fmt: skip
    oracle = zarr.open_group(str(store), mode="r")
    for name in ("v0", "v2", "inner/count"):
        ds = refstore.open(str(tmp_path / "c"))
        z = oracle[name]
        attrs = ds[name].attrs if hasattr(ds[name], "attrs") else None
        if attrs is not None:
            assert {k: attrs[k] for k in z.attrs} == dict(z.attrs)
        assert np.dtype(metas[name]["dtype"]) == z.dtype
    assert metas["inner/count"]["fill_value"] == -1


def test_rescan_after_a_chunk_changes_replaces_its_row(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    _store(store, 2, consolidated=False)
    col = refstore.init(str(tmp_path / "c"))
    import_zarr(col, str(store))
    assert run("-C", str(tmp_path / "c"), "hold", "--array", "v2").returncode == 0
    z = zarr.open_group(str(store), mode="r+")
    z["v2"][8, 6] = 42  # a chunk that was absent is written
    z["v2"][:4, :3] = np.arange(12).reshape(4, 3)  # a written chunk is rewritten
    os.utime(store / "v2" / "0.0", ns=(1, 1))  # its mtime differs from the recorded one
    rep = import_zarr(col, str(store))
    assert rep.inserted == 1 and rep.deleted == 0
    assert rep.held_kept == 2  # the two unchanged chunks keep their held bytes, the rewritten one not
    np.testing.assert_array_equal(refstore.open(str(tmp_path / "c"))["v2"][...], z["v2"][...])
    v = refstore.verify(col.snapshot())
    assert v.mismatched == 0 and v.held_mismatched == 0


@pytest.mark.parametrize("fmt", [2, 3])
def test_zipped_store_is_one_source(tmp_path: Path, fmt: int) -> None:
    from zarr.storage import ZipStore

    path = tmp_path / "s.zarr.zip"
    zs = ZipStore(str(path), mode="w")
    g = zarr.open_group(zs, mode="w", zarr_format=fmt)
    g.attrs["title"] = "zipped"
    a = g.create_array("t", shape=(6, 5), chunks=(4, 2), dtype="<f8", fill_value=-1.5)
    a[:4] = np.arange(20.0).reshape(4, 5)
    g.create_group("sub").create_array("n", shape=(3,), chunks=(2,), dtype="<u2")[...] = [7, 8, 9]
    zs.close()
    col = refstore.init(str(tmp_path / "c"))
    rep = import_zarr(col, str(path))
    assert rep.sources == 1 and rep.unsupported == ()
    rows = col.snapshot().chunk_rows("t", columns=("source", "offset", "length")).to_pylist()
    assert {r["source"] for r in rows} == {str(path)} and all(r["offset"] > 0 for r in rows)
    oracle = zarr.open_group(ZipStore(str(path), mode="r"), mode="r")
    ds = refstore.open(str(tmp_path / "c"))
    for name in ("t", "sub/n"):
        want = oracle[name][...]
        got = ds[name][...]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    v = refstore.verify(col.snapshot())
    assert v.mismatched == 0 and v.checked == col.snapshot().count("chunk") > 0


def test_compressed_zip_entries_refused_by_name(tmp_path: Path) -> None:
    import zipfile

    store = tmp_path / "s.zarr"
    _store(store, 2, consolidated=False)
    path = tmp_path / "s.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(store.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(store).as_posix())
    with pytest.raises(BadInputError, match="is compressed in the zip"):
        import_zarr(refstore.init(str(tmp_path / "c")), str(path))


def test_sharded_arrays_refused_by_name(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    g = zarr.open_group(str(store), mode="w", zarr_format=3)
    a = g.create_array("sharded", shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="<f4")
    a[...] = 1
    g.create_array("plain", shape=(4,), chunks=(2,), dtype="<i4")[...] = [1, 2, 3, 4]
    col = refstore.init(str(tmp_path / "c"))
    rep = import_zarr(col, str(store))
    assert [a for a, _ in rep.unsupported] == ["sharded"]
    assert "sharding_indexed" in rep.unsupported[0][1]
    np.testing.assert_array_equal(refstore.open(str(tmp_path / "c"))["plain"][...], [1, 2, 3, 4])


def test_not_a_store_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match="not a Zarr store"):
        import_zarr(refstore.init(str(tmp_path / "c")), str(tmp_path / "empty"))
    res = run("-C", str(tmp_path / "c"), "import", "zarr", str(tmp_path / "empty"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "not a Zarr store" in res.stderr
    bad = tmp_path / "bad.zarr"
    bad.mkdir()
    (bad / ".zgroup").write_text("{not json")
    res = run("-C", str(tmp_path / "c"), "import", "zarr", str(bad))
    assert res.returncode == 2 and "is not JSON" in res.stderr
    assert refstore.Collection.open(str(tmp_path / "c")).latest_version == 1


@pytest.mark.parametrize("rel", ["3", "17", "flat", "nested", "nested_legacy", "meta"])
def test_zoo_fixture_stores(shared_data: Path, tmp_path: Path, rel: str) -> None:
    store = shared_data / "zoo" / "pypi-zarr-fixtures" / rel
    if not store.is_dir():
        pytest.skip(f"{store} not present")
    copy = tmp_path / rel
    shutil.copytree(store, copy)
    col = refstore.init(str(tmp_path / "c"))
    rep = import_zarr(col, str(copy))
    oracle = zarr.open(str(copy), mode="r")
    ds = refstore.open(str(tmp_path / "c"))
    members = dict(oracle.arrays()) if hasattr(oracle, "arrays") else {rel: oracle}
    refused = dict(rep.unsupported)
    checked = 0
    for name, z in members.items():
        if name in refused:
            assert "has no decoder" in refused[name]
            continue
        got, want = ds[name][...], z[...]
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want)
        checked += 1
    assert checked >= len(members) - 1 >= 0


def test_scan_refuses_a_store_by_name(tmp_path: Path) -> None:
    from zarr.storage import ZipStore

    store = tmp_path / "s.zarr"
    _store(store, 3, consolidated=False)
    refstore.init(str(tmp_path / "c"))
    res = run("-C", str(tmp_path / "c"), "scan", str(store))
    assert "a Zarr store: not scanned" in res.stderr and "import zarr" in res.stderr  # a failed source, named
    zs = ZipStore(str(tmp_path / "z.zip"), mode="w")
    zarr.open_group(zs, mode="w").create_array("a", shape=(2,), dtype="<i4")[...] = [1, 2]
    zs.close()
    res = run("-C", str(tmp_path / "c"), "scan", str(tmp_path / "z.zip"))
    assert "a zip file: not scanned" in res.stderr and "import zarr" in res.stderr
    assert refstore.Collection.open(str(tmp_path / "c")).snapshot().count("chunk") == 0
