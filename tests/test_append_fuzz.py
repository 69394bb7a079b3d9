"""Series where the incremental scan commit (``plan/append.py``, ``table/_append.py``) once gave
another table than the full plan, found by ``bench/appendfuzz.py``, and a few of that campaign's
series with fixed seeds. Each step scans the same files into a collection with the append path
and one without it (and, in the campaign, a fresh one); the rows must be equal and the values
those of h5py / netCDF4-python over the files."""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest

import refstore
from bench.appendfuzz import RESULT, Run, _scan, diff_rows, plan_campaign, table_rows
from refstore.table import _append

from ._oracle import assert_same

if TYPE_CHECKING:
    from pathlib import Path


def _steps(path: Path, t0: int, n: int, chunk: int, *, with_x: bool = True) -> Path:
    """``n`` time steps from ``t0``: ``time``, and ``x`` (n, 3) chunked ``chunk`` along time,
    deflated (so not split into slabs of one); ``with_x=False``: a file lacking ``x``."""
    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.arange(t0, t0 + n, dtype="f8"), maxshape=(None,), chunks=(chunk,))
        t.attrs["units"] = "days since 2000-01-01"
        t.make_scale("time")
        if with_x:
            x = f.create_dataset("x", data=(np.arange(3 * n).reshape(n, 3) + 100 * t0).astype("<i4"),
                                 maxshape=(None, 3), chunks=(chunk, 3), compression="gzip")  # fmt: skip
            x.dims[0].attach_scale(t)
    return path


class Pair:
    def __init__(self, root: Path) -> None:
        self.folder = root / "data"
        self.folder.mkdir()
        self.fast, self.full = str(root / "fast"), str(root / "full")
        refstore.init(self.fast)
        refstore.init(self.full)

    def scan(self) -> dict[str, int]:
        """Both scans; the path the fast one took. The tables must be equal."""
        _, err, took = _scan(self.fast, self.folder, enabled=True)
        _, err2, _ = _scan(self.full, self.folder, enabled=False)
        assert err is None and err2 is None, (err, err2)
        d = diff_rows(table_rows(self.fast, drop_order=False), table_rows(self.full, drop_order=False))
        assert d is None, d
        return took


def _x_oracle(files: list[tuple[Path, int]]) -> np.ndarray:
    """h5py's ``x`` over ``files`` in time order; a file lacking it (its length given) reads as
    the fill value h5py reports for ``x`` in the files having it."""
    got: list[np.ndarray | int] = []
    fill = None
    for p, n in files:
        with h5py.File(p) as f:
            if "x" in f:
                fill = f["x"].fillvalue
                got.append(f["x"][()])
            else:
                got.append(n)
    return np.concatenate([g if isinstance(g, np.ndarray) else np.full((g, 3), fill, "<i4") for g in got])


def test_off_grid_append_after_a_hole_in_a_regular_grid(tmp_path: Path) -> None:
    """x chunked 2: 3 steps, a file without x (1 step), 3 steps: every holder starts on the grid
    (a regular grid, hole at 3). A file appended at 7 is off the grid: the full plan's chunk
    lengths are the slabs' (2, 1 | 1 | 2, 1 | ...), not whole chunks of 2 up to 7."""
    pair = Pair(tmp_path)
    files = [
        (_steps(pair.folder / "a0.h5", 0, 3, 2), 3),
        (_steps(pair.folder / "a1.h5", 3, 1, 2, with_x=False), 1),
        (_steps(pair.folder / "a2.h5", 4, 3, 2), 3),
    ]
    pair.scan()
    files.append((_steps(pair.folder / "a3.h5", 7, 2, 2), 2))
    pair.scan()
    ds = refstore.open(pair.fast)
    assert ds["x"].meta.edges[0] == (2, 1, 1, 2, 1, 2)
    assert_same(ds["x"][...], _x_oracle(files), "x")


@pytest.mark.parametrize("seed", [32, 38])
def test_campaign_series(tmp_path: Path, seed: int) -> None:
    """Two series of ``bench/appendfuzz.py`` (netCDF3 64-bit offset: appends, rewrites, a prune,
    a duplicate; netCDF4: single-file appends, a prune): after each of their steps the append
    path's table equals the full plan's and a fresh scan's, and the values netCDF4-python's
    (and, for the second, at the end, xarray's decoded values over the files). Each reaches the append path."""
    before = dict(_append.STATS)
    run = Run(seed, tmp_path, decoded=False)
    assert run.play(6) is None, run.log
    assert _append.STATS["appended"] > before["appended"], run.log
    if seed == 38:  # at the end, engine="refstore" against xarray (every file has every variable)
        run.decoded = True
        decoded = RESULT.decoded
        assert run.check_decoded(run.placed()) is None
        assert RESULT.decoded == decoded + 1


def test_extend_plan_equals_make_plan() -> None:
    """``extend_plan`` against ``make_plan`` in memory over 400 random series (``plan_campaign``):
    where it answers, the same arrays and new placements/views/keys, and never where make_plan
    refuses. Before the fix, seed 145 was the hole-before-an-off-grid-append case above."""
    got = plan_campaign(400, 0)
    assert got["failures"] == []
    assert got["answered"] > 40 and got["refused"] > 10  # it reaches both sides
