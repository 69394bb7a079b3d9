"""Versions (``table/versions.py``) against independent counts: chunk counts of the files from
h5py, Lance's own version list, and Python sets for the row-id membership test. Written for the
mutation run (``./dev mutate versions``); fast (small series, no CLI subprocess).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING

import h5py
import lance
import numpy as np
import pytest

import refstore
from refstore.fixtures.oisst import write_day
from refstore.table import compact, create_tag, delete_tag, diff, gc, list_tags
from refstore.table.remap import add_rule

if TYPE_CHECKING:
    from pathlib import Path


def _chunks(path: Path) -> dict[str, int]:
    """Stored chunks per chunked dataset, as h5py counts them (contiguous ones: one range)."""
    out: dict[str, int] = {}

    def visit(name: str, ds: object) -> None:
        if isinstance(ds, h5py.Dataset):
            out[name] = ds.id.get_num_chunks() if ds.chunks else 1

    with h5py.File(path) as f:
        f.visititems(visit)
    return out


def test_diff_of_an_added_source_counts_its_chunks_both_ways(tmp_path: Path, new_collection) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    first = [write_day(folder / f"d{i}.nc", date(2024, 1, 1 + i)) for i in range(2)]
    col = new_collection()
    v1 = refstore.scan(col, [str(folder)], concat_dim="time").version
    added = write_day(folder / "d2.nc", date(2024, 1, 3))
    v2 = refstore.scan(col, [str(folder)]).version
    c = refstore.Collection.open(col)
    per_file = _chunks(added)
    import netCDF4

    with netCDF4.Dataset(added) as nc:  # arrays without 'time' are taken once, from the first file
        along = {n for n in per_file if "time" in nc[n].dimensions}
    assert along and along != set(per_file)

    for exhaustive in (False, True):
        d = diff(c, v1, v2, exhaustive=exhaustive)
        assert (d.a, d.b) == (v1, v2)
        assert d.sources_added == [str(added)] and d.sources_removed == d.sources_changed == []
        assert d.differs and not d.remap_changed
        for name in per_file:
            want = {"added": per_file[name] if name in along else 0, "removed": 0, "changed": 0}
            assert {k: d.arrays[name][k] for k in want} == want, name
            assert d.arrays[name]["metadata_changed"] is (name in along), name  # the shape grew
        back = diff(c, v2, v1, exhaustive=exhaustive)
        assert (back.a, back.b) == (v2, v1)
        assert back.sources_removed == [str(added)] and back.sources_added == []
        for name in per_file:
            assert back.arrays[name]["removed"] == d.arrays[name]["added"], name
            assert back.arrays[name]["added"] == 0, name
        j = back.to_json()
        assert j["from"] == {"version": v2} and j["to"] == {"version": v1} and j["differs"] is True
        assert j["sources"] == {"added": [], "removed": [str(added)], "changed": []}

    same = diff(c, v1, v1)
    assert not same.differs and same.to_json()["differs"] is False
    assert all(a == {"added": 0, "removed": 0, "changed": 0, "metadata_changed": False} for a in same.arrays.values())
    assert sorted(same.arrays) == sorted(per_file) and first


def test_diff_sees_remap_and_array_changes(tmp_path: Path, new_collection) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    path = write_day(folder / "d0.nc", date(2024, 1, 1))
    col = new_collection()
    v1 = refstore.scan(col, [str(folder)], concat_dim="time").version
    c = refstore.Collection.open(col)
    v2 = add_rule(c, str(folder), "https://example.org/d/")
    d = diff(c, v1, v2)
    assert d.remap_changed and d.differs and d.to_json()["remap_changed"] is True
    assert not any(a["added"] or a["removed"] or a["changed"] or a["metadata_changed"] for a in d.arrays.values())
    with h5py.File(path, "r+") as f:  # a new array in the same file: the source changed
        f.create_dataset("extra", data=np.arange(6, dtype="<i2"), chunks=(3,))
    v3 = refstore.scan(col, [str(folder)]).version
    d = diff(c, v2, v3)
    assert d.sources_changed == [str(path)] and not d.remap_changed
    assert d.arrays["extra"] == {"added": 2, "removed": 0, "changed": 0, "metadata_changed": True}
    chunks = _chunks(path)
    assert d.arrays["sst"] == {"added": 0, "removed": 0, "changed": chunks["sst"], "metadata_changed": False}
    assert d.to_json() == diff(c, v2, v3, exhaustive=True).to_json()


def test_tags_validate_sort_and_delete(tmp_path: Path, new_collection) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    write_day(folder / "d0.nc", date(2024, 1, 1))
    col = new_collection()
    v1 = refstore.scan(col, [str(folder)], concat_dim="time").version
    write_day(folder / "d1.nc", date(2024, 1, 2))
    v2 = refstore.scan(col, [str(folder)]).version
    c = refstore.Collection.open(col)
    assert create_tag(c, "b.later-1_x") == v2
    assert create_tag(c, "a", as_of=v1) == v1
    assert create_tag(c, "c", as_of=v1) == v1
    assert list_tags(c) == [{"name": "a", "version": v1}, {"name": "c", "version": v1},
                            {"name": "b.later-1_x", "version": v2}]  # fmt: skip
    for bad in ("12", "a b", "", "ü", "x/y"):
        with pytest.raises(refstore.BadInputError, match="use letters, digits"):
            create_tag(c, bad)
    assert create_tag(c, "1a") == v2  # digits and a letter: a name
    with pytest.raises(refstore.BadInputError, match=rf"tag 'a' already exists \(version {v1}\); tags are immutable"):
        create_tag(c, "a")
    assert delete_tag(c, "c") == v1
    with pytest.raises(refstore.NotFoundError, match="no tag named 'c'"):
        delete_tag(c, "c")
    assert [t["name"] for t in list_tags(c)] == ["a", "1a", "b.later-1_x"]


def test_gc_and_compact_report_what_lance_did(tmp_path: Path, new_collection) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    col = new_collection()
    for i in range(3):
        write_day(folder / f"d{i}.nc", date(2024, 1, 1 + i))
        refstore.scan(col, [str(folder)], concat_dim="time")
    c = refstore.Collection.open(col)
    with pytest.raises(refstore.BadInputError, match=r"^--keep-last must be at least 1$"):
        gc(c, keep_last=0)
    ds = lance.dataset(c.uri) if hasattr(c, "uri") else None
    before = sorted(int(v["version"]) for v in ds.versions()) if ds is not None else []
    tagged = before[1]
    create_tag(c, "keep", as_of=tagged)
    assert gc(c)["versions_removed"] == []  # all younger than the default grace period
    r = gc(c, grace=timedelta(0))  # keep_last defaults to 1: the newest version and the tagged one stay
    assert r["versions_kept"] == [tagged, before[-1]]
    after = sorted(int(v["version"]) for v in lance.dataset(c.uri).versions())
    assert r["versions_kept"] == after and tagged in after and before[-1] in after
    assert r["versions_removed"] == sorted(set(before) - set(after)) and r["versions_removed"]
    assert r["bytes_removed"] > 0
    r = compact(c)
    assert set(r) == {"version", "versions_added", "fragments_removed", "fragments_added", "indices"}
    now = int(lance.dataset(c.uri).version)
    assert r["version"] == now and r["versions_added"] == now - after[-1] >= 1
    assert r["fragments_removed"] >= r["fragments_added"] >= 0


def test_compact_materialises_deletions(tmp_path: Path, new_collection) -> None:
    """A reprocessed day replaces rows (deletion files in Lance's fragments); compact leaves no
    fragment with deletions."""
    folder = tmp_path / "d"
    folder.mkdir()
    for i in range(6):
        write_day(folder / f"d{i:02d}.nc", date(2024, 1, 1 + i))
    col = new_collection()
    refstore.scan(col, [str(folder)], concat_dim="time")
    write_day(folder / "d05.nc", date(2024, 1, 6), seed=9)
    refstore.scan(col, [str(folder)])
    c = refstore.Collection.open(col)
    frags = lance.dataset(c.uri).get_fragments()
    deleted = [f.metadata.deletion_file.num_deleted_rows / f.metadata.physical_rows
               for f in frags if f.metadata.deletion_file is not None]  # fmt: skip
    assert deleted and 0 < min(deleted) < 1
    compact(c)
    assert all(f.metadata.deletion_file is None for f in lance.dataset(c.uri).get_fragments())
