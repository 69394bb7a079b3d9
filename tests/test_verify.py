"""verify: held chunks against their checksum and their source, sources that are gone reported
apart (exit 2), and batched comparisons that still name the one chunk that differs. The oracle
is each format's own reader (h5py, netCDF4-python)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import h5py
import lance
import numpy as np
import pyarrow as pa
import pytest

import refstore
from refstore.schema import MERGE_KEY, SCHEMA
from refstore.table import HoldSelection, hold

from ._cli import invoke as run  # in this process: the commands are under test, not the process


def _series(folder: Path, n: int = 2) -> list[Path]:
    """``n`` uncompressed HDF5 files along ``time`` (so a changed byte is a changed value):
    ``x`` (time, 4) float32 in chunks of one record, ``y`` (time,) int16."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        path = folder / f"f{i}.h5"
        with h5py.File(path, "w") as f:
            t = f.create_dataset("time", data=np.arange(3, dtype="f8") + 3 * i, maxshape=(None,), chunks=(3,))
            t.attrs["units"] = "days since 2000-01-01"
            t.make_scale("time")
            x = f.create_dataset("x", data=np.arange(12, dtype="f4").reshape(3, 4) + 100 * i, chunks=(1, 4))
            x.dims[0].attach_scale(t)
            y = f.create_dataset("y", data=np.arange(3, dtype="i2") + 10 * i, chunks=(3,))
            y.dims[0].attach_scale(t)
        out.append(path)
    return out


def _collection(tmp_path: Path, *, held: tuple[str, ...] = ()) -> tuple[str, list[Path]]:
    files = _series(tmp_path / "data")
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    if held:
        hold(refstore.Collection.open(col), HoldSelection(arrays=held))
    return col, files


def _change_bytes_keep_identity(path: Path, offset: int, length: int) -> None:
    """Overwrite ``length`` bytes at ``offset`` with other bytes; size and mtime stay the same
    (what a scan recorded), so only a reader of the content can tell."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(length)
        f.seek(offset)
        f.write(bytes(b ^ 0x5A for b in old))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _rewrite_chunk_row(col: str, where: str, *, held: bytes | None = None, **values: Any) -> None:
    """Rewrite the one chunk row matching ``where`` through Lance itself, in a new version: the
    given column values, and (``held``) other held bytes under the checksum the hold wrote."""
    import pyarrow as pa

    ds = lance.dataset(col)
    plain = [f.name for f in SCHEMA if f.name != "held"]
    row = ds.to_table(columns=plain, filter=f"kind = 'chunk' AND {where}")
    assert row.num_rows == 1, where
    cols = {n: pa.array([values[n]], row.schema.field(n).type) if n in values else row.column(n) for n in plain}
    cols["held"] = lance.blob.blob_array([held])
    table = pa.table([cols[f.name] for f in SCHEMA], schema=SCHEMA)
    ds.merge_insert(MERGE_KEY).when_matched_update_all().execute(table)


def _chunk_row(col: str, array: str, source: Path) -> dict[str, Any]:
    snap = refstore.Collection.open(col).snapshot()
    t = snap.chunk_rows(array, columns=("source", "offset", "length"))
    rows = [r for r in t.to_pylist() if r["source"] == str(source)]
    return rows[0]


def _verify_json(col: str, *args: str) -> tuple[int, dict[str, Any]]:
    r = run("-C", col, "verify", "--json", *args)
    assert r.returncode in (0, 1, 2) and "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def test_held_bytes_that_differ_from_their_checksum_are_a_held_mismatch(tmp_path: Path) -> None:
    """A different blob written through Lance for one held row (a new version, the checksum left
    as the hold wrote it): verify reads the held bytes, not the source, and says so apart."""
    col, _files = _collection(tmp_path, held=("x",))
    good = np.arange(4, dtype="<f4").tobytes()  # x[0] of f0.h5, as held
    _rewrite_chunk_row(col, "array = 'x' AND g0 = 0", held=bytes(b ^ 1 for b in good))
    code, rep = _verify_json(col)
    assert code == 1
    assert rep["mismatched"] == 0 and rep["mismatches"] == []  # the sources are right
    held = rep["held"]
    assert held["checked"] == 6 and held["mismatched"] == 1
    (m,) = held["mismatches"]
    assert m["array"] == "x" and m["reason"] == "held bytes differ from their checksum"
    r = run("-C", col, "verify")
    assert r.returncode == 1 and "held mismatch" in r.stderr and "held chunks: 6 checked" in r.stdout


def test_held_bytes_that_differ_from_an_unchanged_source_are_a_held_mismatch(tmp_path: Path) -> None:
    """The source's bytes change under the same size and mtime: the held bytes (the old ones)
    are checked against the source's own reader and differ."""
    col, files = _collection(tmp_path, held=("x",))
    row = _chunk_row(col, "x", files[1])
    _change_bytes_keep_identity(files[1], row["offset"], row["length"])
    with h5py.File(files[1]) as f:  # the oracle sees the new bytes
        assert not np.array_equal(f["x"][()], np.arange(12, dtype="f4").reshape(3, 4) + 100)
    code, rep = _verify_json(col, "--array", "x")
    assert code == 1 and rep["mismatched"] == 0
    (m,) = rep["held"]["mismatches"]
    assert m["source"] == str(files[1]) and m["reason"] == "held bytes: values differ"


def test_held_chunks_of_a_rewritten_source_are_checked_by_checksum(tmp_path: Path) -> None:
    """A source reprocessed after the hold (new identity): its held chunks are the version's
    bytes, checked by their checksum; not a mismatch."""
    col, files = _collection(tmp_path, held=("x",))
    _series(tmp_path / "data")  # the same files written again: new mtimes
    with h5py.File(files[0], "a") as f:
        f["x"][0] = -1.0
    code, rep = _verify_json(col, "--array", "x")
    assert code == 0, rep
    assert rep["held"] == {"checked": 6, "checksum_only": 6, "mismatched": 0, "mismatches": []}


def test_a_missing_source_is_reported_apart_with_exit_2(tmp_path: Path) -> None:
    col, files = _collection(tmp_path)
    files[1].unlink()
    code, rep = _verify_json(col)
    assert code == 2
    assert rep["mismatched"] == 0 and rep["mismatches"] == []
    assert rep["missing_sources"] == [{"source": str(files[1]), "chunks": 5}]  # time, 3 x records, y
    assert rep["checked"] == 5
    r = run("-C", col, "verify")
    assert r.returncode == 2 and "missing source" in r.stderr and files[1].name in r.stderr


def test_a_missing_source_whose_chunks_are_held_is_verified_from_held_bytes(tmp_path: Path) -> None:
    col, files = _collection(tmp_path, held=("x", "y"))
    files[1].unlink()
    code, rep = _verify_json(col, "--array", "x", "--array", "y")
    assert code == 0, rep
    assert "missing_sources" not in rep and rep["held"]["checksum_only"] == 4 and rep["checked"] == 8


def test_mismatch_is_named_per_chunk_whatever_the_batch(tmp_path: Path) -> None:
    """One wrong reference in a netCDF3 series (a record pointing at the next record's bytes):
    exactly that chunk is reported, whether chunks are compared one at a time or many in one read."""
    from refstore.fixtures.netcdf3 import write_obs_series

    files = write_obs_series(tmp_path / "data", [40, 30, 50])
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    snap = refstore.Collection.open(col).snapshot()
    rows = snap.chunk_rows("temp", columns=("offset",)).to_pylist()
    next_record = next(r["offset"] for r in rows if r["g0"] == 48)
    _rewrite_chunk_row(col, "array = 'temp' AND g0 = 47", offset=next_record)  # a wrong reference
    for batch in (1, 64, 1 << 30):
        rep = refstore.verify(refstore.Collection.open(col).snapshot(), batch_bytes=batch)
        assert [(m["array"], m["chunk"]) for m in rep.mismatches] == [("temp", [47, 0])], (batch, rep.mismatches)
        placed = refstore.Collection.open(col).snapshot().count("chunk", "g0 >= -1")  # 0-d arrays: g0 = -1
        assert rep.checked == placed


@pytest.mark.parametrize("sample", [None, 7])
def test_sampled_and_full_verify_agree_with_the_oracle(tmp_path: Path, sample: int | None) -> None:
    col, _files = _collection(tmp_path)
    rep = refstore.verify(refstore.Collection.open(col).snapshot(), sample=sample, seed=3, batch_bytes=16)
    assert rep.mismatched == 0 and rep.checked == (sample or 10)


@pytest.fixture
def obs_collection(tmp_path: Path) -> tuple[str, pa.Table]:
    """A netCDF3 series whose ``temp`` row g0 = 47 points at the next record's bytes, and the
    view's ``temp`` rows as Lance's own filtered scan lists them (before the change)."""
    from refstore.fixtures.netcdf3 import write_obs_series

    files = write_obs_series(tmp_path / "data", [40, 30, 50])
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    snap = refstore.Collection.open(col).snapshot()
    flt = snap.view_filter("temp")
    whole = lance.dataset(col, version=snap.version).to_table(columns=["g0", "offset"], filter=flt, with_row_id=True)
    next_record = next(r["offset"] for r in whole.to_pylist() if r["g0"] == 48)
    _rewrite_chunk_row(col, "array = 'temp' AND g0 = 47", offset=next_record)
    return col, whole


def test_rows_at_positions_are_lances_own(obs_collection: tuple[str, pa.Table]) -> None:
    """``Snapshot.chunk_rows_at`` (the counted sampling path) gives the rows Lance's filtered
    scan lists at those positions."""
    col, whole = obs_collection
    snap = refstore.Collection.open(col).snapshot()
    pos = np.array([0, 3, 57, whole.num_rows - 1])
    got = snap.chunk_rows_at("temp", pos, ("length",))
    flt = snap.view_filter("temp")
    now = lance.dataset(col, version=snap.version).to_table(columns=["g0", "length"], filter=flt, with_row_id=True)
    for c in ("_rowid", "g0", "length"):
        assert got.column(c).to_pylist() == now.column(c).take(pos).to_pylist(), c


def test_drawn_sample_is_distinct_chunk_rows_of_the_view(obs_collection: tuple[str, pa.Table]) -> None:
    """The drawn sample (no count): exactly ``sample`` distinct rows, every one a chunk row of the
    view (Lance's filtered scan), of the arrays asked for only."""
    from refstore.read.verify import _draw

    col, whole = obs_collection
    snap = refstore.Collection.open(col).snapshot()
    ids = set(whole.column("_rowid").to_pylist())
    for seed in range(3):
        t = _draw(snap, [snap.array("temp")], 50, seed)
        assert t is not None and t.num_rows == 50
        got = t.column("_rowid").to_pylist()
        assert len(set(got)) == 50 and set(got) <= ids
        assert set(t.column("array").to_pylist()) == {"temp"}
    assert _draw(snap, [snap.array("temp")], 10**9, 0) is None  # more than there are: all are checked


@pytest.mark.parametrize("path", ["drawn", "counted"])
def test_sampled_verify_finds_a_wrong_reference(obs_collection: tuple[str, pa.Table], path: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Whichever way the sample is chosen, a wrong reference is named whenever the sample
    picks it, and the sample has the size asked for."""
    import importlib

    verify_mod = importlib.import_module("refstore.read.verify")  # the package exports a function of that name
    if path == "counted":
        monkeypatch.setattr(verify_mod, "_draw", lambda *a: None)
    col, _whole = obs_collection
    snap = refstore.Collection.open(col).snapshot()
    total = sum(snap.count("chunk", f"array = '{a}' AND g0 >= -1") for a in snap.arrays())
    found = 0
    for seed in range(4):
        rep = refstore.verify(snap, sample=total - 1, seed=seed)
        assert rep.checked == total - 1
        assert [(m["array"], m["chunk"]) for m in rep.mismatches] in ([], [("temp", [47, 0])])
        found += rep.mismatched
    assert found >= 3  # left out of a sample of all but one with probability 1/total each


def test_batches_do_not_read_the_box_around_scattered_chunks() -> None:
    """Consecutive chunks make one read; scattered ones (a sample) are read one box each, not as
    the box spanning them (which decoded ~1,000 chunks for one in a 100M-reference sample)."""
    from refstore.read.verify import _batches

    lo = np.array([[0, 0], [0, 10], [0, 20], [0, 30]])
    assert [b.tolist() for b in _batches(lo, lo + 10, 4, 1 << 30)] == [[0, 1, 2, 3]]
    lo = np.array([[0, 0], [50, 90], [90, 40]])
    assert [b.tolist() for b in _batches(lo, lo + 10, 4, 1 << 30)] == [[0], [1], [2]]
    lo = np.array([[0, 0], [0, 20]])  # a gap of one chunk: 3 chunks' box for 2, within a slack of 2
    assert [b.tolist() for b in _batches(lo, lo + 10, 4, 1 << 30)] == [[0, 1]]
    assert [b.tolist() for b in _batches(lo, lo + 10, 4, 1 << 30, slack=1)] == [[0], [1]]
    assert [b.tolist() for b in _batches(lo, lo + 10, 4, 400)] == [[0], [1]]  # the byte budget
