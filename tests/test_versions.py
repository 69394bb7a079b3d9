"""Versions: tags, as-of reads, diff as a CI gate, stale sources, concurrent writers, compact/gc."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import h5py
import lance
import numpy as np
import pytest

import refstore
from refstore.fixtures.oisst import write_day
from refstore.table import compact, create_tag, diff, gc, list_tags

from ._cli import invoke as run  # in this process: the commands are under test, not the process
from ._oracle import assert_same, series_read


def _sst(path: Path) -> np.ndarray:
    with h5py.File(path) as f:
        return f["sst"][()]


def test_tags_are_immutable_named_versions(series, new_collection, tmp_path: Path) -> None:
    files = series(2)
    col = new_collection()
    refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    assert run("-C", col, "tag", "release-2026-10").returncode == 0
    r = run("-C", col, "tag", "release-2026-10")
    assert r.returncode == 2 and "already exists" in r.stderr and "Traceback" not in r.stderr
    r = run("-C", col, "tag", "12")
    assert r.returncode == 2
    r = run("-C", col, "tag", "ü")  # Lance cannot list such names: refused up front
    assert r.returncode == 2 and "letters, digits" in r.stderr
    for name in ("-1", "--json", "-x"):  # `--as-of -1` would be ambiguous (issue 13)
        r = run("-C", col, "tag", "--", name)
        assert r.returncode == 2 and "not '-'" in r.stderr and "Traceback" not in r.stderr
    write_day(files[0].parent / "later.nc", date(2024, 1, 3))
    refstore.scan(col, [str(files[0].parent)])
    assert run("-C", col, "tag", "first", "--as-of", "2").returncode == 0
    tags = json.loads(run("-C", col, "tags", "--json").stdout)
    assert tags == [{"name": "first", "version": 2}, {"name": "release-2026-10", "version": 2}]
    # as-of everywhere: info, read, verify, Python
    info = json.loads(run("-C", col, "info", "--as-of", "release-2026-10", "--json").stdout)
    assert info["version"] == 2 and info["arrays"]["sst"]["shape"][0] == 2
    assert refstore.open(col, as_of="release-2026-10")["sst"].shape[0] == 2
    assert refstore.open(col)["sst"].shape[0] == 3
    out = tmp_path / "old.npy"
    assert run("-C", col, "read", "sst", "--as-of", "first", "--out", str(out)).returncode == 0
    assert_same(np.load(out), np.concatenate([_sst(p) for p in files]), "read --out")
    assert run("-C", col, "verify", "--as-of", "2").returncode == 0
    log = json.loads(run("-C", col, "log", "--json").stdout)
    assert log[-2]["tags"] == ["first", "release-2026-10"]
    r = run("-C", col, "tag", "--delete", "first")
    assert r.returncode == 0
    assert [t["name"] for t in list_tags(refstore.Collection.open(col))] == ["release-2026-10"]
    assert run("-C", col, "tag", "--delete", "nope").returncode == 2
    assert run("-C", col, "info", "--as-of", "nope").returncode == 2
    assert run("-C", col, "info", "--as-of", "99").returncode == 2


def test_reprocessed_day(series, new_collection, tmp_path: Path) -> None:
    files = series(4)
    col = new_collection()
    refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    create_tag(refstore.Collection.open(col), "r1")
    before = [_sst(p) for p in files]

    write_day(files[2], date(2024, 1, 3), seed=7)  # reprocessed in place, new values
    rep = refstore.scan(col, [str(files[0].parent)])
    assert (rep.changed, rep.unchanged) == (1, 3)

    d = diff(refstore.Collection.open(col), "r1")
    assert d.to_json() == diff(refstore.Collection.open(col), "r1", exhaustive=True).to_json()
    assert d.sources_changed == [str(files[2])] and not d.sources_added and not d.sources_removed
    assert d.arrays["sst"]["changed"] == 6 and d.arrays["sst"]["added"] == d.arrays["sst"]["removed"] == 0
    assert d.arrays["lat"] == {"added": 0, "removed": 0, "changed": 0, "metadata_changed": False}
    r = run("-C", col, "diff", "r1", "--json", "--exit-code")
    assert r.returncode == 1
    j = json.loads(r.stdout)
    assert j["from"]["version"] == 2 and j["to"]["version"] == 3
    assert j["sources"] == {"added": [], "removed": [], "changed": [str(files[2])]}
    assert j["arrays"]["anom"]["changed"] == 9 and j["remap_changed"] is False
    assert run("-C", col, "diff", "r1", "r1", "--exit-code").returncode == 0

    # that day as of the old tag is refused as stale; unchanged days read the same either way
    old = refstore.open(col, "r1")["sst"]
    with pytest.raises(refstore.StaleSourceError, match="changed since scan"):
        old[2]
    r = run("-C", col, "read", "sst", "--as-of", "r1", "--window", "2", "--out", str(tmp_path / "x.npy"))
    assert r.returncode == 2 and "changed since scan" in r.stderr and str(files[2]) in r.stderr
    new = refstore.open(col)["sst"]
    for i in (0, 1, 3):
        assert old[i].tobytes() == new[i].tobytes() == before[i][0].tobytes()
    assert_same(new[2], _sst(files[2])[0], "new[2]")
    # the other policies read anyway (the old references may no longer decode: that is on the user)
    with pytest.warns(refstore.StaleSourceWarning, match="changed since scan"):
        _read_or_decode_error(col, "warn")
    _read_or_decode_error(col, "ignore")


def _read_or_decode_error(col: str, policy: str) -> None:
    try:
        refstore.open(col, "r1", options=refstore.ReadOptions(on_stale=policy))["sst"][2]
    except refstore.StaleSourceError:  # pragma: no cover - the policy must not raise this
        pytest.fail(f"on_stale={policy} raised StaleSourceError")
    except refstore.SourceReadError:
        pass  # old offsets into new bytes: a decode error is the honest outcome


def test_a_touched_source_counts_every_reference_as_changed(series, new_collection) -> None:
    files = series(2)
    col = new_collection()
    v = refstore.scan(col, [str(files[0].parent)], concat_dim="time").version
    write_day(files[1], date(2024, 1, 2))  # same content, new mtime: the bytes behind it are new
    refstore.scan(col, [str(files[0].parent)])
    d = diff(refstore.Collection.open(col), v)
    assert d.sources_changed == [str(files[1])]
    assert d.arrays["sst"]["changed"] == 6 and d.arrays["anom"]["changed"] == 9


def test_moved_away_source_is_a_clear_error(series, new_collection, tmp_path: Path) -> None:
    files = series(2)
    col = new_collection()
    refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    files[1].rename(tmp_path / "elsewhere.nc")
    with pytest.raises(refstore.SourceReadError, match="not found"):
        refstore.open(col)["sst"][1]
    assert refstore.open(col)["sst"][0].shape == (1, 45, 90)


_WRITER = """
import sys, refstore
col, folder = sys.argv[1], sys.argv[2]
rep = refstore.scan(col, [folder], concat_dim="time", workers=1)
print(rep.version)
"""


def test_two_concurrent_scans_both_land_without_duplicates(tmp_path: Path, new_collection) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for i in range(6):
        write_day((a if i % 2 == 0 else b) / f"d{i}.nc", date(2024, 2, 1 + i))
    col = new_collection()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, col, str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for folder in (a, b)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    ds = lance.dataset(col)
    t = ds.to_table(columns=["kind", "array", "source", "k0", "k1", "k2", "k3"])
    keys = {tuple(r.values()) for r in t.to_pylist()}
    assert len(keys) == t.num_rows  # no duplicated rows
    assert ds.count_rows(filter="kind = 'collection'") == 1
    assert ds.count_rows(filter="kind = 'source'") == 6
    files = sorted([*a.iterdir(), *b.iterdir()], key=lambda p: int(p.stem[1:]))
    got = refstore.open(col)["sst"][...]
    assert_same(got, np.concatenate([_sst(p) for p in files]), "got")
    assert refstore.verify(refstore.open(col).snapshot).mismatched == 0


def test_compact_and_gc_keep_tagged_versions(series, new_collection) -> None:
    files = series(3)
    col = new_collection()
    refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    c = refstore.Collection.open(col)
    create_tag(c, "keep")
    for seed in (1, 2):
        write_day(files[1], date(2024, 1, 2), seed=seed)
        refstore.scan(col, [str(files[0].parent)])
    latest = series_read([str(p) for p in files], "anom", "time")  # h5py over the files as they are now
    r = run("-C", col, "compact", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["fragments_removed"] >= 1
    r = run("-C", col, "gc", "--keep-last", "1", "--json")  # all younger than the grace period
    assert r.returncode == 0 and json.loads(r.stdout)["versions_removed"] == []
    r = run("-C", col, "gc", "--keep-last", "1", "--grace", "0", "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and 2 in rep["versions_kept"] and rep["versions_removed"]
    assert rep["versions_kept"] == [2, c.latest_version]
    assert_same(refstore.open(col)["anom"][...], latest, "anom")
    assert refstore.open(col, "keep")["sst"].shape[0] == 3  # the tag still reads
    assert gc(c, grace=timedelta(0))["versions_removed"] == []
    assert compact(c)["version"] >= c.latest_version - 2
