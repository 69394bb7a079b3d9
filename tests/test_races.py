"""Races and crashes at chosen system calls (``_faults.py``): a write lands in the latest version
or fails; a killed gc leaves only readable versions; nothing held is dropped by a retry. The
command under fault runs in a real process; the others run in this one (``_cli.invoke``)."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import lance
import numpy as np
import pytest

import refstore

from ._cli import invoke
from ._faults import Paused, killed_at, manifest, needs_strace, pause_before_linking


def _held(col: str) -> int:
    return refstore.Collection.open(col).snapshot().count("chunk", "held_at >= 0")


def _sources(col: str, as_of: int | None = None) -> set[str]:
    snap = refstore.Collection.open(col).snapshot(as_of)
    return set(snap.sources().column("source").to_pylist())


@needs_strace
def test_a_scan_losing_to_a_scan_of_the_same_files_changes_nothing(series, new_collection) -> None:
    """Issue 13, items 2 and 6: the loser's retry recomputes from the winner's version: the
    files are unchanged there, so no version, and what was held since stays held."""
    folder = str(series(2)[0].parent)
    col = new_collection()
    loser = pause_before_linking(2, col, "scan", folder, "--concat-dim", "time")
    assert invoke("-C", col, "scan", folder, "--concat-dim", "time").returncode == 0  # version 2
    assert invoke("-C", col, "hold", "--array", "sst").returncode == 0  # version 3
    held = _held(col)
    assert held > 0
    r = loser.resume()
    assert r.returncode == 0, r.stderr
    assert "no change" in r.stdout and "2 unchanged" in r.stdout
    assert refstore.Collection.open(col).latest_version == 3
    assert _held(col) == held


@needs_strace
def test_a_scan_racing_gc_lands_in_the_latest_version_or_fails(series, new_collection) -> None:
    """Issue 13, item 1: scan B stops with its version 3 written but not linked; two scans
    commit 3 and 4; gc frees 3; B links its 3 there. B must notice that 4 does not descend from
    its 3 and commit again on 4 (or fail): never exit 0 with its rows outside the latest version."""
    first = series(1, folder="a")
    later = [series(1, folder=f, start=date(2024, 1, d)) for f, d in (("b", 2), ("c", 3), ("d", 4))]
    col = new_collection()
    assert invoke("-C", col, "scan", str(first[0].parent), "--concat-dim", "time").returncode == 0  # 2
    racer = pause_before_linking(3, col, "scan", str(later[0][0].parent))
    for files in later[1:]:  # versions 3 and 4
        assert invoke("-C", col, "scan", str(files[0].parent)).returncode == 0
    r = invoke("-C", col, "gc", "--keep-last", "1", "--grace", "0", "--json")
    assert r.returncode == 0 and 3 in json.loads(r.stdout)["versions_removed"]
    r = racer.resume()
    assert r.returncode == 0, r.stderr
    assert str(later[0][0]) in _sources(col), r.stdout  # B's source is in the latest version
    assert len(_sources(col)) == 4
    assert f"version {refstore.Collection.open(col).latest_version}:" in r.stdout


@needs_strace
def test_gc_within_the_grace_period_frees_no_version_a_writer_may_take(series, new_collection) -> None:
    """The default grace period keeps young versions: the paused writer's link then fails
    (the number is taken), Lance reports a conflict, and the writer lands on the latest."""
    first = series(1, folder="a")
    later = [series(1, folder=f, start=date(2024, 1, d)) for f, d in (("b", 2), ("c", 3))]
    col = new_collection()
    assert invoke("-C", col, "scan", str(first[0].parent), "--concat-dim", "time").returncode == 0
    racer = pause_before_linking(3, col, "scan", str(later[0][0].parent))
    assert invoke("-C", col, "scan", str(later[1][0].parent)).returncode == 0  # version 3
    r = invoke("-C", col, "gc", "--keep-last", "1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["versions_removed"] == []
    r = racer.resume()
    assert r.returncode == 0 and "version 4:" in r.stdout, r.stdout + r.stderr
    assert len(_sources(col)) == 3


def _versions(col: str) -> list[int]:
    return [int(e["version"]) for e in json.loads(invoke("-C", col, "log", "--json").stdout)]


def _history(series, col: str) -> None:
    """Versions 2..6 whose data and deletion files differ (scan, hold, release, hold, release)."""
    from refstore.table import HoldSelection, hold, release

    refstore.scan(col, [str(series(2)[0].parent)], concat_dim="time")
    c = refstore.Collection.open(col)
    for step in (hold, release, hold, release):
        step(c, HoldSelection(arrays=("sst",)))


def _reads(col: str, version: int) -> bool:
    """Every row and every array of ``version`` reads (refused cleanly if not)."""
    try:
        snap = refstore.Collection.open(col).snapshot(version)
        snap.ds.to_table(columns=["kind", "offset", "held"])
        ds = refstore.open(col, version)
        for name in snap.arrays():
            ds[name][...]
    except refstore.RefstoreError:
        return False
    return True


@needs_strace
def test_a_gc_killed_part_way_leaves_only_readable_versions(series, new_collection) -> None:
    """Issue 13, item 3: gc is killed at its Nth unlink, N = one more than the files it deletes
    besides manifests (Lance's own order: all of those first, then manifests). Every version
    still listed reads; the next gc finishes the job."""
    for n, name in enumerate(("early", "late")):
        col = new_collection(name)
        _history(series, col)
        ds = lance.dataset(col)
        plan = ds.explain_cleanup_old_versions(retain_versions=1, error_if_tagged_old_versions=False,
                                               include_files=True, max_files=10_000)  # fmt: skip
        others = sum(1 for c in plan.candidate_files if c.kind != "manifest")
        assert others > 0
        at = 2 if n == 0 else others + 1
        r = killed_at("unlink", at, "-C", col, "gc", "--keep-last", "1", "--grace", "0")
        assert r.returncode != 0  # killed
        listed = [int(v["version"]) for v in lance.dataset(col).versions()]
        assert [v for v in listed if not _reads(col, v)] == [], at
        assert invoke("-C", col, "gc", "--keep-last", "1", "--grace", "0").returncode == 0
        assert [int(v["version"]) for v in lance.dataset(col).versions()] == [6]
        assert _reads(col, 6)


def test_an_unreadable_version_is_refused_in_one_line(series, new_collection) -> None:
    """Issue 13, item 3: a version whose files are gone (an older refstore's interrupted gc
    deleted data files first) is refused by every reading command and by tag, in one line."""
    col = new_collection()
    _history(series, col)
    ds = lance.dataset(col)
    latest = {f"data/{f.path}" for frag in ds.get_fragments() for f in frag.metadata.files}
    old = {f"data/{f.path}" for frag in ds.checkout_version(3).get_fragments() for f in frag.metadata.files}
    gone = sorted(old - latest)[0]
    (Path(col) / gone).unlink()  # what Lance's own cleanup deletes first
    for args in (["info", "--as-of", "3"], ["read", "sst", "--as-of", "3", "--out", str(Path(col).parent / "x")],
                 ["verify", "--as-of", "3"], ["diff", "3"], ["tag", "old", "--as-of", "3"]):  # fmt: skip
        r = invoke("-C", col, *args)
        assert r.returncode == 2 and "cannot be read" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    assert "old" not in invoke("-C", col, "tags").stdout
    assert invoke("-C", col, "info", "--as-of", "4").returncode == 0


@needs_strace
def test_gc_removes_the_files_of_a_failed_commit(series, new_collection) -> None:
    """Issue 13 (hostile files): a scan killed before linking its manifest (as a full disk
    would fail it) leaves data files no version references and an unlinked manifest; gc removes
    them after the grace period, and the collection holds exactly what its versions need."""
    col = new_collection()
    folder = str(series(2)[0].parent)
    r = pause_before_linking(2, col, "scan", folder, "--concat-dim", "time").kill()
    assert r.returncode != 0 and _versions(col) == [1]
    assert Path(manifest(col, 2) + "#1").exists()  # written, never linked
    data = {p.name for p in (Path(col) / "data").iterdir()}
    assert len(data) > 1  # the init's file and the failed scan's
    assert invoke("-C", col, "gc", "--json").returncode == 0  # within the grace period: kept
    assert {p.name for p in (Path(col) / "data").iterdir()} == data
    assert invoke("-C", col, "gc", "--grace", "0").returncode == 0
    needed = {f.path for frag in lance.dataset(col).get_fragments() for f in frag.metadata.files}
    assert {p.name for p in (Path(col) / "data").iterdir()} == needed
    assert invoke("-C", col, "scan", folder, "--concat-dim", "time").returncode == 0  # takes version 2
    assert invoke("-C", col, "gc", "--grace", "0").returncode == 0  # the unlinked manifest can never link now
    assert not [p for p in (Path(col) / "_versions").iterdir() if "#" in p.name]


@needs_strace
def test_an_interrupted_icechunk_update_never_moves_main_without_its_tag(series, new_collection, tmp_path) -> None:
    """Issue 13, item 5: an update of an Icechunk repository killed after each of its updates
    of the repository's refs (``rename`` of ``repo#1`` onto ``repo``) in turn: ``main`` is at the old snapshot,
    or at the new one with its ``refstore-vN`` tag; a rerun leaves both at the new one."""
    ic = pytest.importorskip("icechunk")
    col = new_collection()
    assert invoke("-C", col, "scan", str(series(2)[0].parent), "--concat-dim", "time").returncode == 0
    base = tmp_path / "base.icechunk"
    assert invoke("-C", col, "emit", "icechunk", str(base)).returncode == 0  # version 2
    assert invoke("-C", col, "hold", "--array", "sst").returncode == 0  # version 3

    def state(out: Path) -> tuple[int, str, dict[str, str]]:
        repo = ic.Repository.open(ic.local_filesystem_storage(str(out)))
        tip = repo.lookup_branch("main")
        return (repo.lookup_snapshot(tip).metadata["refstore"]["version"], tip,
                {t: repo.lookup_tag(t) for t in repo.list_tags()})  # fmt: skip

    k = 0
    while True:
        k += 1
        out = tmp_path / f"kill{k}.icechunk"
        shutil.copytree(base, out)
        emitting = Paused("rename", f"{out}/repo#1", "-C", col, "emit", "icechunk", str(out))
        for _ in range(k - 1):
            emitting.step()
        if not emitting.stopped:  # every update survived a kill after it
            assert emitting.resume().returncode == 0
            break
        emitting.kill()
        version, tip, tags = state(out)
        assert version in (2, 3)
        if version == 3:
            assert tags.get("refstore-v3") == tip, k
        r = invoke("-C", col, "emit", "icechunk", str(out))
        assert r.returncode == 0, r.stderr
        version, tip, tags = state(out)
        assert version == 3 and tags.get("refstore-v3") == tip, k
    assert k > 2


@needs_strace
def test_a_hold_killed_before_a_data_file_is_complete_commits_nothing_and_gc_removes_it(
    series, new_collection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local collection's new fragments are written under a temporary name (``<name>#<n>``)
    and renamed when complete (``_replace.fragment_uri``). A hold killed at its first such
    rename commits nothing; the file it left is kept by gc within the grace period (a writer
    in flight may still rename it), removed after it; the next hold's bytes equal h5py's."""
    import h5py

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # the only renames are the writer's
    col = new_collection()
    files = series(2)
    assert invoke("-C", col, "scan", str(files[0].parent), "--concat-dim", "time").returncode == 0
    before = _versions(col)
    data = Path(col) / "data"

    def temporary() -> list[Path]:
        return [p for p in data.rglob("*") if p.is_file() and "#" in p.name]

    r = killed_at("rename", 1, "-C", col, "hold", "--array", "sst")
    assert r.returncode != 0 and _versions(col) == before and _held(col) == 0
    left = temporary()
    assert left and all(p.name.split("#")[1].isdigit() for p in left)
    assert invoke("-C", col, "gc").returncode == 0  # within the grace period: kept
    assert temporary() == left
    r = invoke("-C", col, "gc", "--grace", "0", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["files_removed"] >= len(left)
    assert temporary() == []
    needed = {f"data/{f.path}" for frag in lance.dataset(col).get_fragments() for f in frag.metadata.files}
    assert {str(p.relative_to(col)) for p in data.rglob("*") if p.is_file()} == needed

    assert invoke("-C", col, "hold", "--array", "sst").returncode == 0
    assert temporary() == [] and _held(col) > 0
    expected = np.concatenate([h5py.File(p)["sst"][()] for p in files])
    gone = files[0].parent.rename(files[0].parent.with_name("gone"))
    assert gone.exists()
    got = refstore.open(col)["sst"][...]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
