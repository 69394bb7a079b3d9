"""``refstore._gc.young_only``: automatic collections paused for a scan, restored after it
(also when it fails), cycles still freed by ``young()``, a caller's own ``gc.disable`` kept."""

from __future__ import annotations

import gc
import weakref
from typing import TYPE_CHECKING

import pytest

import refstore
from refstore._gc import young_only
from refstore.errors import ScanError
from refstore.fixtures.oisst import write_day

if TYPE_CHECKING:
    from pathlib import Path


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_young_only_pauses_and_restores_and_young_frees_cycles() -> None:
    assert gc.isenabled()
    with young_only() as young:
        assert not gc.isenabled()
        ref = _cycle()
        assert ref() is not None  # a cycle: reference counting alone never frees it
        young()
        assert ref() is None
    assert gc.isenabled()
    with pytest.raises(RuntimeError), young_only():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_young_only_keeps_a_callers_disabled_collector() -> None:
    gc.disable()
    try:
        with young_only() as young:
            ref = _cycle()
            young()  # the caller chose no collections: none here either
            assert ref() is not None and not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_scan_pauses_the_collector_and_restores_it_whether_it_commits_or_fails(tmp_path: Path) -> None:
    from datetime import date

    src = tmp_path / "src"
    src.mkdir()
    write_day(src / "d1.nc", date(2024, 1, 1))
    (src / "junk.nc").write_bytes(b"not a netCDF file at all")
    col = str(tmp_path / "col")
    refstore.init(col)
    during: list[bool] = []

    def progress(_done: int, _total: int) -> None:
        during.append(gc.isenabled())

    with pytest.raises(ScanError, match=r"junk\.nc"):
        refstore.scan(col, [str(src)], concat_dim="time", workers=1, timeout=None, strict=True, progress=progress)
    assert during == [False, False] and gc.isenabled()
    rep = refstore.scan(col, [str(src)], concat_dim="time", workers=1, timeout=None, progress=progress)
    assert rep.committed and rep.new == 1 and len(rep.failed) == 1 and gc.isenabled()
    assert during == [False] * 4
