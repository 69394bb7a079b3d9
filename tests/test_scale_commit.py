"""The scan commit at scale: Lance's "not matched by source" delete (a full outer join over the
whole table) only when some row must disappear; the outcome is the same either way."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

import refstore

from ._oracle import assert_same


def test_rescans_that_drop_arrays_or_keep_every_chunk(tmp_path: Path, new_collection) -> None:
    """The commit adds Lance's (costly) "not matched by source" delete only when some row must
    disappear: a reprocessed file with the same chunks needs none; one that lost an array does."""
    p = tmp_path / "one.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.arange(100, dtype="i4").reshape(10, 10), chunks=(5, 5))
        f.create_dataset("y", data=np.ones((4, 4), "f4"), chunks=(2, 2))
    col = new_collection()
    refstore.scan(col, [str(p)])
    with h5py.File(p, "r+") as f:  # same chunks, new values: rows updated in place, none deleted
        f["x"][...] = np.arange(100, dtype="i4").reshape(10, 10)[::-1]
    rep = refstore.scan(col, [str(p)])
    assert (rep.changed, rep.deleted) == (1, 0)
    assert_same(refstore.open(col)["x"][...], np.arange(100, dtype="i4").reshape(10, 10)[::-1], "x")
    with h5py.File(p, "w") as f:  # y is gone from the file: its var, array and chunk rows go too
        f.create_dataset("x", data=np.zeros((10, 10), "i4"), chunks=(5, 5))
    rep = refstore.scan(col, [str(p)])
    assert rep.deleted == 4
    snap = refstore.Collection.open(col).snapshot()
    assert "y" not in snap.arrays()
    assert snap.count("var", "array = 'y'") == 0 and snap.count("chunk", "array = 'y'") == 0
    assert (refstore.open(col)["x"][...] == 0).all()


def test_compact_builds_scalar_indices_and_new_rows_are_still_found(series, new_collection) -> None:
    import lance

    from refstore.table import compact
    from refstore.table.indices import INDICES

    files = series(3)
    col = new_collection()
    refstore.scan(col, [str(p) for p in files[:2]], concat_dim="time")
    compact(refstore.Collection.open(col))
    names = {tuple(i.field_names) for i in lance.dataset(col).describe_indices()}
    assert names == {(c,) for c, _ in INDICES}
    refstore.scan(col, [str(files[0].parent)], concat_dim="time")  # day 3: rows no index covers yet
    ds = refstore.open(col)
    assert ds["sst"].shape[0] == 3
    with h5py.File(files[2]) as f:
        assert_same(ds["sst"][2:3], f["sst"][()], "sst day 2")
    compact(refstore.Collection.open(col))  # refreshes the existing indices
    assert refstore.verify(refstore.Collection.open(col).snapshot()).mismatched == 0


def test_array_meta_from_json_shares_one_instance_per_text() -> None:
    """Var rows of a long series repeat a few texts: equal texts give one instance (the planner
    skips comparing an instance with itself), different texts different values, and the text
    round-trips."""
    from refstore.scan._types import ArrayMeta

    a = ArrayMeta(name="sst", dims=("time", "lat"), shape=(1, 4), chunks=(1, 4), dtype="<i2", fill_value=-999,
                  codecs=({"id": "zlib", "level": 4},), attrs={"units": {"type": "str", "value": "K"}})  # fmt: skip
    b = ArrayMeta(name="sst", dims=("time", "lat"), shape=(1, 4), chunks=(1, 4), dtype="<i2", fill_value=-999,
                  codecs=({"id": "zlib", "level": 5},), attrs={"units": {"type": "str", "value": "K"}})  # fmt: skip
    ta, tb = a.to_json(), b.to_json()
    assert ArrayMeta.from_json(ta) is ArrayMeta.from_json(str(ta))
    assert ArrayMeta.from_json(ta) == a and ArrayMeta.from_json(tb) == b
    assert ArrayMeta.from_json(ta).era_key() != ArrayMeta.from_json(tb).era_key()


def test_many_small_sources_reach_lance_in_batches_of_thousands(tmp_path: Path, new_collection, monkeypatch) -> None:
    """A scan's rows come as one small batch per source; Lance gets them joined into batches of
    up to ``WRITE_BATCH_ROWS`` (its writer's memory grew with the number of batches, and its
    encodings are poor on tiny ones), and the rows read back are h5py's."""
    import lance.fragment

    from refstore.table import _replace

    monkeypatch.setattr(_replace, "WRITE_BATCH_ROWS", 50)
    seen: list[list[int]] = []
    real = lance.fragment.write_fragments

    def spy(data, *a, **k):  # type: ignore[no-untyped-def]
        seen.append([b.num_rows for b in data.to_batches()])
        return real(data, *a, **k)

    monkeypatch.setattr(lance.fragment, "write_fragments", spy)
    paths = []
    for i in range(30):
        p = tmp_path / f"d{i:02d}.h5"
        with h5py.File(p, "w") as f:
            t = f.create_dataset("time", data=np.array([float(i)]), maxshape=(None,), chunks=(1,))
            t.make_scale("time")
            x = f.create_dataset("x", data=np.full((1, 4), i, "i4"), chunks=(1, 2))
            x.dims[0].attach_scale(t)
        paths.append(str(p))
    col = new_collection()
    refstore.scan(col, paths, concat_dim="time", workers=1, timeout=None)
    # the metadata rows and the chunk rows are written as two fragments (``_replace._parts``)
    assert len(seen) == 2 and sum(seen[1]) == 90  # 30 sources x (2 chunks of x, 1 of time)
    for sizes in seen:
        assert max(sizes) == 50 and len(sizes) == -(-sum(sizes) // 50)
    assert sum(seen[0]) > 50  # collection, source, var and array rows
    with h5py.File(paths[7]) as f:
        assert_same(refstore.open(col)["x"][7:8], f["x"][...], "x")


def test_rows_of_sources_are_lances_filtered_rows(series, new_collection) -> None:
    """``Snapshot.rows_of_sources`` asks Lance for ``source IN`` alone and tests ``kind`` itself
    (the combined filter was ~20 s at 100M rows): the same rows as Lance's combined filter."""
    import lance

    col = new_collection()
    refstore.scan(col, [str(p) for p in series(3)], concat_dim="time")
    snap = refstore.Collection.open(col).snapshot()
    some = sorted(snap.source_identity())[:2]
    for kind in ("chunk", "var", "source"):
        got = snap.rows_of_sources(kind, some, ["array", "source", "offset"], with_row_id=True)
        flt = f"kind = '{kind}' AND source IN ('{some[0]}', '{some[1]}')"
        want = lance.dataset(col, version=snap.version).to_table(columns=["array", "source", "offset"], filter=flt,
                                                                 with_row_id=True)  # fmt: skip
        assert got.num_rows > 0 and got.sort_by("_rowid").equals(want.sort_by("_rowid")), kind
    assert snap.rows_of_sources("chunk", [], ["source"]).num_rows == 0


def test_metadata_rows_and_chunk_rows_are_written_apart(tmp_path: Path) -> None:
    """A scan commit's metadata rows (some long ``meta`` texts) and its chunk rows (empty ones)
    are two fragments: written together, Lance encodes the column at ~25 bytes per chunk row."""
    import lance
    import pyarrow as pa

    from refstore.schema import Kind
    from refstore.table._replace import _parts
    from refstore.table._rows import rows

    meta = rows(Kind.ARRAY, 3, array=["a", "b", "c"], meta=["x" * 300] * 3)
    chunk = rows(Kind.CHUNK, 5000, array=["a"] * 5000, offset=list(range(5000)))
    both = pa.concat_tables([meta, chunk])
    parts = _parts(both)
    assert [p.num_rows for p in parts] == [3, 5000]
    assert parts[1].column("offset").equals(chunk.column("offset"))
    assert parts[0].column("meta").to_pylist() == ["x" * 300] * 3
    assert [p.num_rows for p in _parts(chunk)] == [5000] and _parts(rows(Kind.CHUNK, 0)) == []
    mixed = pa.concat_tables([chunk.slice(0, 10), meta, chunk])  # not a prefix: one part
    assert [p.num_rows for p in _parts(mixed)] == [5013]
    sizes = []
    for i, tables in enumerate(([both], parts)):
        uri = str(tmp_path / f"t{i}")
        for k, t in enumerate(tables):
            lance.write_dataset(t, uri, mode="create" if k == 0 else "append")
        sizes.append(sum(f.stat().st_size for f in (tmp_path / f"t{i}" / "data").iterdir()))
    assert sizes[1] < sizes[0] / 2, sizes  # the point of the split, measured
