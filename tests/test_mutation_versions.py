"""Versions (``table/versions.py``) against independent counts: chunk counts of the files from
h5py, Lance's own version list, and Python sets for the row-id membership test. Written for the
mutation run (``./dev mutate versions``); fast (small series, no CLI subprocess).
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

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
        with pytest.raises(refstore.BadInputError, match=re.escape(
            f"tag {bad!r}: use letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(not only digits: that is a version number; not '-': that is an option)"
        )):  # fmt: skip
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


# --------------------------------------------------------------------------- one module-scoped history
# Five versions of one small collection, made once: v1 two days, v2 a third day (tagged), v3 the
# first day reprocessed and the second renamed, v4 the third removed, v5 a remap rule. Expected
# counts come from h5py's chunk index of the files and netCDF4's dimension names.


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import netCDF4

    root = tmp_path_factory.mktemp("history")
    folder = root / "d"
    folder.mkdir()
    col = str(root / "col")
    refstore.init(col)
    d0 = write_day(folder / "d'0.nc", date(2024, 1, 1))
    d1 = write_day(folder / "d1.nc", date(2024, 1, 2))
    v1 = refstore.scan(col, [str(folder)], concat_dim="time").version
    d2 = write_day(folder / "d2.nc", date(2024, 1, 3))
    v2 = refstore.scan(col, [str(folder)]).version
    c = refstore.Collection.open(col)
    create_tag(c, "three-days", as_of=v2)
    chunks = {p.name: _chunks(p) for p in (d0, d1, d2)}
    d1.unlink()
    d1b = write_day(folder / "d1b.nc", date(2024, 1, 2))
    write_day(d0, date(2024, 1, 1), seed=9)
    write_day(d2, date(2024, 1, 3), seed=7)
    v3 = refstore.scan(col, [str(folder)], prune=True).version
    chunks["d'0.nc"], chunks["d1b.nc"], chunks["d2.nc"] = _chunks(d0), _chunks(d1b), _chunks(d2)
    d2.unlink()
    v4 = refstore.scan(col, [str(folder)], prune=True).version
    c = refstore.Collection.open(col)
    v5 = add_rule(c, str(folder), "https://example.org/d/")
    with netCDF4.Dataset(d0) as nc:
        along = {n for n in chunks["d'0.nc"] if "time" in nc[n].dimensions}
    assert along and along != set(chunks["d'0.nc"])
    paths = {n: str(folder / n) for n in ("d'0.nc", "d1.nc", "d1b.nc", "d2.nc")}
    return {"col": c, "v": (v1, v2, v3, v4, v5), "chunks": chunks, "along": along, "paths": paths}


def _expect(h: dict[str, Any], counts: dict[str, tuple[str, ...]]) -> dict[str, dict[str, int]]:
    """Per array, the h5py chunk counts of the files named for added/removed/changed ("*:" prefix:
    every array of that file, else only the arrays along time)."""
    out: dict[str, dict[str, int]] = {}
    for name in h["chunks"]["d'0.nc"]:
        row = {}
        for what, files in counts.items():
            n = 0
            for f in files:
                every = f.startswith("*:")
                f = f.removeprefix("*:")
                if every or name in h["along"]:
                    n += h["chunks"][f][name]
            row[what] = n
        out[name] = row
    return out


def _counts(d: Any) -> dict[str, dict[str, int]]:
    return {n: {k: a[k] for k in ("added", "removed", "changed")} for n, a in d.arrays.items()}


@pytest.fixture
def fast_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The diff must take Lance's change feed (``_touched``), never the fallback join of everything."""
    from refstore.table import versions

    def refuse(*a: object) -> None:
        raise AssertionError("the full join was used")

    monkeypatch.setattr(versions, "_full", refuse)


def test_fast_diff_of_each_step_matches_h5py_counts(history: dict[str, Any], fast_only: None) -> None:
    h = history
    c, (v1, v2, v3, v4, v5) = h["col"], h["v"]
    p = h["paths"]
    d = diff(c, v1, v2)
    assert d.sources_added == [p["d2.nc"]] and d.sources_removed == d.sources_changed == []
    assert _counts(d) == _expect(h, {"added": ("d2.nc",), "removed": (), "changed": ()})
    # reprocessed d'0 (every array of it: the arrays without time come from the first file) and
    # d1 renamed to d1b (the same keys, another source: changed, not added/removed)
    d = diff(c, v2, v3)
    assert d.sources_added == [p["d1b.nc"]] and d.sources_removed == [p["d1.nc"]]
    assert d.sources_changed == [p["d'0.nc"], p["d2.nc"]] and not d.remap_changed
    assert _counts(d) == _expect(h, {"added": (), "removed": (), "changed": ("*:d'0.nc", "d1b.nc", "d2.nc")})
    d = diff(c, v1, v3)  # d'0's rows were written at v1 itself and replaced at v3
    assert d.sources_added == [p["d1b.nc"], p["d2.nc"]] and d.sources_removed == [p["d1.nc"]]
    assert d.sources_changed == [p["d'0.nc"]]
    assert _counts(d) == _expect(h, {"added": ("d2.nc",), "removed": (), "changed": ("*:d'0.nc", "d1b.nc")})
    d = diff(c, v3, v4)
    assert d.sources_removed == [p["d2.nc"]] and d.sources_added == d.sources_changed == []
    assert _counts(d) == _expect(h, {"added": (), "removed": ("d2.nc",), "changed": ()})
    assert {n for n, a in d.arrays.items() if a["metadata_changed"]} == h["along"]
    d = diff(c, v4, v5)
    assert d.remap_changed and d.differs and _counts(d) == _expect(h, {"added": (), "removed": (), "changed": ()})
    d = diff(c, "three-days", v4)  # the tag names v2
    assert d.a == v2 and d.sources_removed == sorted([p["d1.nc"], p["d2.nc"]])
    assert _counts(d) == _expect(h, {"added": (), "removed": ("d2.nc",), "changed": ("*:d'0.nc", "d1b.nc")})


def test_a_backward_diff_is_the_forward_one_flipped(history: dict[str, Any], fast_only: None) -> None:
    h = history
    c, (v1, v2, v3, v4, v5) = h["col"], h["v"]
    p = h["paths"]
    d = diff(c, v3, v2)  # not to the latest: the flipped call must keep both ends
    assert (d.a, d.b) == (v3, v2)
    assert d.sources_added == [p["d1.nc"]] and d.sources_removed == [p["d1b.nc"]]
    assert d.sources_changed == [p["d'0.nc"], p["d2.nc"]] and not d.remap_changed
    assert _counts(d) == _expect(h, {"added": (), "removed": (), "changed": ("*:d'0.nc", "d1b.nc", "d2.nc")})
    d = diff(c, v4, v1)
    assert d.sources_added == [p["d1.nc"]] and d.sources_removed == [p["d1b.nc"]]
    assert _counts(d) == _expect(h, {"added": (), "removed": (), "changed": ("*:d'0.nc", "d1b.nc")})
    d = diff(c, v5, v3)
    assert d.remap_changed and d.sources_added == [p["d2.nc"]] and d.sources_removed == []
    assert _counts(d) == _expect(h, {"added": ("d2.nc",), "removed": (), "changed": ()})


def test_exhaustive_and_fallback_diffs_equal_the_fast_one(
    history: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from refstore.table import versions

    c, vs = history["col"], history["v"]
    pairs = [(a, b) for a in vs for b in vs if a != b]
    fast = {(a, b): diff(c, a, b).to_json() for a, b in pairs}

    def no_feed(*a: object) -> None:
        raise AttributeError("no row-version tracking")  # what an older Lance raises

    monkeypatch.setattr(versions, "_touched", no_feed)
    for a, b in pairs:
        assert diff(c, a, b).to_json() == fast[(a, b)], (a, b)  # the fallback: the full join
        assert diff(c, a, b, exhaustive=True).to_json() == fast[(a, b)], (a, b)


def test_the_change_feed_rows_are_lances_rows_of_each_version(history: dict[str, Any]) -> None:
    """``_touched`` against Lance read directly: the rows it returns for ``b`` are rows of ``b``'s
    view, those for ``a`` rows of ``a``'s view, and every key present in only one of the two
    views is among them."""
    from refstore.table.versions import _VALUE_COLS, _touched

    c, (v1, v2, v3, v4, _) = history["col"], history["v"]
    key = ["array", "era", "g0", "g1", "g2", "g3"]
    cols = [*key, *_VALUE_COLS]
    for a, b, changed in (
        (v1, v2, []),
        (v2, v3, [history["paths"]["d'0.nc"], history["paths"]["d2.nc"]]),
        (v3, v4, []),
    ):
        la = lance.dataset(c.uri, version=a).to_table(columns=cols, filter="kind = 'chunk' AND g0 >= -1").to_pylist()
        lb = lance.dataset(c.uri, version=b).to_table(columns=cols, filter="kind = 'chunk' AND g0 >= -1").to_pylist()
        ta, tb = _touched(c.snapshot(a), c.snapshot(b), changed, key)
        assert ta.column_names == tb.column_names == cols
        ra, rb = ta.to_pylist(), tb.to_pylist()
        assert all(r in la for r in ra) and all(r in lb for r in rb)
        ka = {tuple(r[k] for k in key) for r in la}
        kb = {tuple(r[k] for k in key) for r in lb}
        assert ka ^ kb <= {tuple(r[k] for k in key) for r in ra + rb}
        new_b = [r for r in lb if r not in la or r["source"] in changed]
        assert sorted(map(str, new_b)) == sorted(map(str, rb))  # exactly the rows written or of a changed source
        assert len(ra) == len({tuple(r[k] for k in key) for r in ra})


def test_a_tag_lance_already_holds_is_refused_as_immutable(
    history: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: another writer made the tag between the check and the create (Lance refuses it)."""
    from refstore.table import versions

    c = history["col"]
    monkeypatch.setattr(versions, "_tags", lambda col: {})
    with pytest.raises(refstore.BadInputError, match=r"^tag 'three-days' already exists; tags are immutable$"):
        create_tag(c, "three-days")
    assert lance.dataset(c.uri).tags.list()["three-days"]["version"] == history["v"][1]
