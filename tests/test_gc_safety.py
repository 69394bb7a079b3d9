"""gc never destroys the last readable version (issue 29, §1): a writer paused before it links
its manifest while ``gc --grace 0`` removes its (not yet referenced) files must not report
success; gc refuses while the latest version is unreadable and names ``refstore repair``, which
makes the newest readable version latest again in a new version."""

from __future__ import annotations

import json
from datetime import date

import lance
import numpy as np
import pytest

import refstore

from ._cli import invoke
from ._faults import needs_strace, pause_before_linking


def _missing(col: str, version: int) -> list[str]:
    from refstore.table._files import missing_files

    return missing_files(lance.dataset(col, version=version))


def _two_versions(series, new_collection):  # type: ignore[no-untyped-def]
    first = series(1, folder="a")
    second = series(1, folder="b", start=date(2024, 1, 2))
    col = new_collection()
    assert invoke("-C", col, "scan", str(first[0].parent), "--concat-dim", "time").returncode == 0  # 2
    return col, first, second


@needs_strace
def test_a_scan_whose_files_gc_removed_while_it_was_paused_does_not_report_success(series, new_collection) -> None:
    col, first, second = _two_versions(series, new_collection)
    paused = pause_before_linking(3, col, "scan", str(second[0].parent))
    r = invoke("-C", col, "gc", "--grace", "0", "--json")
    assert r.returncode == 0, r.stderr
    r = paused.resume()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "refstore repair" in r.stderr, r.stderr
    assert _missing(col, 3)  # the broken version it linked
    # gc refuses while the latest is unreadable, keeps version 2 (the only readable one)
    r = invoke("-C", col, "gc", "--grace", "0")
    assert r.returncode == 2 and "refstore repair" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert 2 in [int(v["version"]) for v in lance.dataset(col).versions()] and not _missing(col, 2)
    r = invoke("-C", col, "repair", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["restored"] == 2 and rep["version"] == 4 and rep["unreadable"] == [3]
    assert not _missing(col, 4)
    import h5py

    expected = h5py.File(first[0])["sst"][()]
    got = refstore.open(col)["sst"][...]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert invoke("-C", col, "gc", "--grace", "0").returncode == 0
    assert invoke("-C", col, "scan", str(second[0].parent)).returncode == 0  # the collection works again
    assert len(refstore.open(col)["sst"][...]) == 2


def _broken_then_repaired(col: str, expected_days: list) -> None:  # type: ignore[type-arg]
    """gc refuses (with and without a grace period) while the latest is unreadable; repair
    restores the newest readable version, whose values equal h5py's over ``expected_days``."""
    import h5py

    latest = refstore.Collection.open(col).latest_version
    assert _missing(col, latest)
    for args in (["--grace", "0"], [], ["--keep-last", "3"]):
        r = invoke("-C", col, "gc", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "refstore repair" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = invoke("-C", col, "repair", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["version"] == latest + 1 and rep["unreadable"] == [latest] and not _missing(col, latest + 1)
    assert invoke("-C", col, "gc", "--grace", "0").returncode == 0
    assert [int(v["version"]) for v in lance.dataset(col).versions()] == [latest + 1]
    expected = np.concatenate([h5py.File(p)["sst"][()] for p in expected_days])
    got = refstore.open(col)["sst"][...]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    r = invoke("-C", col, "repair")
    assert r.returncode == 0 and "nothing to repair" in r.stdout
    entry = json.loads(invoke("-C", col, "log", "--json").stdout)[0]
    assert entry["operation"] == "repair" and entry["record"]["restored"] == rep["restored"]


@needs_strace
@pytest.mark.parametrize("grace", ["0", "1s"])
def test_a_hold_outlasting_the_grace_period_fails_and_repair_restores(series, new_collection, grace) -> None:
    """The same with a grace period the paused writer outlasts (``--grace 1s``, paused 1.5 s)."""
    import time

    col, first, _ = _two_versions(series, new_collection)
    paused = pause_before_linking(3, col, "hold", "--array", "sst")
    time.sleep(1.5)
    assert invoke("-C", col, "gc", "--grace", grace).returncode == 0
    r = paused.resume()
    assert r.returncode == 2 and "refstore repair" in r.stderr and "Traceback" not in r.stderr, r.stderr
    _broken_then_repaired(col, first)


@needs_strace
def test_a_compaction_whose_files_gc_removed_fails_and_repair_restores(series, new_collection) -> None:
    col, first, second = _two_versions(series, new_collection)
    assert invoke("-C", col, "scan", str(second[0].parent)).returncode == 0  # 3: two fragments to merge
    paused = pause_before_linking(4, col, "compact")
    assert invoke("-C", col, "gc", "--grace", "0").returncode == 0
    r = paused.resume()
    assert r.returncode == 2 and "refstore repair" in r.stderr and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    _broken_then_repaired(col, [*first, *second])


@needs_strace
def test_gc_keeps_the_files_of_a_version_linked_while_it_ran(series, new_collection, monkeypatch) -> None:
    """A writer links its manifest after gc listed the versions but before gc deletes what no
    version referenced then: those files are the new latest's, and gc keeps them."""
    from refstore.table import cleanup

    col, _, second = _two_versions(series, new_collection)
    paused = pause_before_linking(3, col, "scan", str(second[0].parent))
    real = cleanup._candidates
    done: list[int] = []

    def candidates(ds, keep_last, grace, *, unverified):  # type: ignore[no-untyped-def]
        out = real(ds, keep_last, grace, unverified=unverified)
        if unverified:  # the writer links now and checks its files: all there
            done.append(paused.resume().returncode)
        return out

    monkeypatch.setattr(cleanup, "_candidates", candidates)
    rep = cleanup.gc(refstore.Collection.open(col), grace=__import__("datetime").timedelta(0))
    assert done == [0] and rep["versions_kept"][-1] == 3
    assert not _missing(col, 3)
    assert len(refstore.open(col)["sst"][...]) == 2
