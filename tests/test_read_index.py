"""The per-version chunk index (``table/_index.py``) and the vectorised placement of
uncompressed chunks (``read/_place.py``): reads through them equal h5py's, on windows that cut
chunks, step over them and meet unwritten ones; the index finds exactly the rows Lance's
pushdown finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.table._index import ChunkIndex

from ._oracle import assert_same

WINDOWS: list[Any] = [
    (slice(None), slice(None)),
    (slice(3, 29), slice(2, 20)),  # cuts chunks on both axes
    (slice(1, 38, 3), slice(0, 23, 4)),  # strided
    (slice(30, 38), slice(19, 23)),  # the short edge chunks
    (7, slice(5, 17)),  # one axis dropped
    (slice(40, 50), slice(0, 5)),  # past the end: empty
    (slice(12, 16), slice(9, 12)),  # unwritten chunks only: fill value
    (slice(16, 30), slice(None)),  # whole rows of written chunks
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("index")
    src = d / "data" / "a.h5"
    src.parent.mkdir()
    rng = np.random.default_rng(11)
    with h5py.File(src, "w") as f:
        for name, kw, cw in (("raw", {}, 3), ("zip", {"compression": "gzip", "shuffle": True}, 3), ("wide", {}, 23)):
            x = f.create_dataset(name, shape=(38, 23), dtype=">i2", chunks=(4, cw), fillvalue=-7, **kw)
            for i in range(0, 38, 4):
                for j in range(0, 23, cw):
                    if (i // 4 + j // cw) % 5 != 3:  # some chunks never written
                        x[i : i + 4, j : j + cw] = rng.integers(-1000, 1000, x[i : i + 4, j : j + cw].shape)
    col = str(d / "col")
    refstore.init(col)
    refstore.scan(col, [str(src)])
    return src, col


@pytest.mark.parametrize("name", ["raw", "zip", "wide"])  # wide: chunks span whole rows (one slab copy)
def test_reads_through_the_index_equal_h5py(
    files: tuple[Path, str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from refstore.read import _place

    slabs = []
    real = _place._stacks_along_axis0
    monkeypatch.setattr(_place, "_stacks_along_axis0", lambda *a: slabs.append(real(*a)) or slabs[-1])
    src, col = files
    ds = refstore.open(col)
    arr = ds[name]
    with h5py.File(src) as f:
        for w in WINDOWS:
            expected = f[name][w]
            for _ in range(2):  # the second read of the array goes through the index
                assert_same(arr[w], expected, f"{name}{w}")
    assert (name, None) in ds.snapshot._indices._built
    assert any(slabs) == (name == "wide") and (name == "zip") == (not slabs)


def test_index_rows_equal_the_pushdown(files: tuple[Path, str]) -> None:
    _, col = files
    snap = refstore.open(col).snapshot
    cols = ("source", "offset", "length", "filter_mask", "inline", "held_at")
    full = snap.ds.to_table(columns=["g0", "g1", *cols], filter=snap.view_filter("zip"), with_row_id=True)
    index = ChunkIndex(full, 2)
    rng = np.random.default_rng(4)
    for trial in range(40):
        lo = rng.integers(-2, 12, 2)
        hi = lo + rng.integers(-1, 9, 2)
        ranges = [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)][: 1 + trial % 2]  # axis 0 only, or both
        want = snap.ds.to_table(columns=["g0", "g1", *cols], filter=snap.view_filter("zip", ranges),
                                with_row_id=True).sort_by([("g0", "ascending"), ("g1", "ascending")])  # fmt: skip
        got = index.rows(ranges, cols, with_row_id=True)
        assert got.schema == want.schema
        assert got.to_pylist() == want.to_pylist(), ranges
