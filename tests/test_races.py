"""Races and crashes at chosen system calls (``_faults.py``): a write lands in the latest version
or fails; a killed gc leaves only readable versions; nothing held is dropped by a retry."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import refstore

from ._cli import run
from ._faults import needs_strace, pause_before_linking


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
    assert run("-C", col, "scan", folder, "--concat-dim", "time").returncode == 0  # version 2
    assert run("-C", col, "hold", "--array", "sst").returncode == 0  # version 3
    held = _held(col)
    assert held > 0
    r = loser.resume()
    assert r.returncode == 0, r.stderr
    assert "no change" in r.stdout and "2 unchanged" in r.stdout
    assert refstore.Collection.open(col).latest_version == 3
    assert _held(col) == held
