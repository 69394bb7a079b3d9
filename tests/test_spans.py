"""A box of chunk keys asked of Lance by the sources whose slabs meet it (``table/_spans.py``)
gives exactly the rows a brute-force numpy filter of the whole table gives, on series with eras,
a rectilinear grid along time, a source set aside and an array some days lack; and those rows
read what h5py reads."""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING

import h5py
import lance
import numpy as np
import pytest

import refstore
from refstore.fixtures.oisst import write_day
from refstore.table import _index, _spans

from ._oracle import assert_same, series_read

if TYPE_CHECKING:
    from pathlib import Path

KEYS = [f"g{i}" for i in range(8)]


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path]]:
    """Eight OISST-like days; sst packed differently from day 5 (two eras); a preliminary copy
    of day 2 set aside; day 6 without ``anom`` (a hole)."""
    folder = tmp_path_factory.mktemp("spans")
    files = [write_day(folder / f"d{i}.nc", date(2024, 1, 1) + timedelta(days=i)) for i in range(8)]
    for p in files[5:]:
        with h5py.File(p, "r+") as f:
            f["sst"].attrs["scale_factor"] = np.float32(0.02)
    with h5py.File(files[6], "r+") as f:
        del f["anom"]
    prelim = folder / "d2_preliminary.nc"
    prelim.write_bytes(files[2].read_bytes())
    uri = str(folder / "col")
    refstore.init(uri)
    rep = refstore.scan(uri, [str(folder)], concat_dim="time", prefer=["!*_preliminary*"], workers=1, timeout=None)
    assert [s for s, _, _ in rep.set_aside] == [str(prelim)]
    return uri, files


def _brute(uri: str, array: str, ranges: list[tuple[int, int]], era: int | None) -> set[tuple[object, ...]]:
    t = lance.dataset(uri).to_table(columns=["kind", "array", "era", "source", "offset", "length", *KEYS])
    keep = (t.column("kind").to_numpy(zero_copy_only=False) == "chunk") & (
        t.column("array").to_numpy(zero_copy_only=False) == array
    )
    if era is not None:
        keep &= t.column("era").to_numpy() == era
    for i, (lo, hi) in enumerate(ranges):
        g = t.column(KEYS[i]).to_numpy()
        keep &= (g >= max(lo, 0)) & (g <= hi)
    t = t.filter(keep)
    return set(zip(*(t.column(c).to_pylist() for c in ["source", "offset", "length", *KEYS[: len(ranges)]]),
                   strict=True))  # fmt: skip


def _got(snap: refstore.Snapshot, array: str, ranges: list[tuple[int, int]],
         era: int | None) -> set[tuple[object, ...]]:  # fmt: skip
    t = snap.chunk_rows(array, ranges, ("source", "offset", "length"), era=era)
    return set(zip(*(t.column(c).to_pylist() for c in ["source", "offset", "length", *KEYS[: len(ranges)]]),
                   strict=True))  # fmt: skip


@pytest.mark.parametrize("max_sources", [256, 1])
def test_boxes_equal_a_brute_force_filter(series: tuple[str, list[Path]], monkeypatch: pytest.MonkeyPatch,
                                          max_sources: int) -> None:  # fmt: skip
    """Random boxes (also reaching past the grid and below 0) on every era of each array; with
    ``MAX_SOURCES`` 1 most boxes take the array's own filter: the same rows either way."""
    uri, _files = series
    monkeypatch.setattr(_index, "MAX_ROWS", 0)  # no in-memory index: the Lance queries answer
    monkeypatch.setattr(_spans, "MAX_SOURCES", max_sources)
    snap = refstore.Collection.open(uri).snapshot()
    by_sources = []
    real = type(snap)._rows_by_sources
    monkeypatch.setattr(type(snap), "_rows_by_sources", lambda self, *a: by_sources.append(a[0]) or real(self, *a))
    rng = np.random.default_rng(7)
    asked = 0
    for array in ("sst", "anom", "time", "lat"):
        meta = snap.array(array)
        for era in [None] if not meta.eras else range(len(meta.eras)):
            for _ in range(12):
                ranges = []
                for n in (9, 1, 3, 3)[-len(meta.shape) :] if array != "time" else (9,):
                    a = int(rng.integers(-1, n))
                    ranges.append((a, a + int(rng.integers(0, n))))
                expected = _brute(uri, array, ranges, era)
                assert _got(snap, array, ranges, era) == expected, (array, era, ranges)
                asked += bool(expected)
    assert asked > 15  # many boxes hold chunks
    if max_sources > 1:  # every box of an array along time was asked by its sources
        assert len(by_sources) == 12 * 4 and set(by_sources) == {"sst", "anom", "time"}
    else:
        assert 0 < len(by_sources) < 12 * 4


def test_spans_cover_the_placed_sources(series: tuple[str, list[Path]]) -> None:
    uri, files = series
    snap = refstore.Collection.open(uri).snapshot()
    spans = snap._spans_of("sst")
    assert spans is not None
    assert sorted(spans.source.to_pylist()) == sorted(str(p) for p in files)  # not the one set aside
    days = [int(loc.rsplit("/d", 1)[1].split(".")[0]) for loc in spans.source.to_pylist()]
    assert spans.era.tolist() == [0 if d < 5 else 1 for d in days]
    assert snap._spans_of("lat") is None  # no time dimension


def test_box_reads_what_h5py_reads(series: tuple[str, list[Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    uri, files = series
    monkeypatch.setattr(_index, "MAX_ROWS", 0)
    ds = refstore.open(uri)
    paths = [str(p) for p in files]
    for name, window in (("sst", (slice(3, 7), 0, slice(10, 30), slice(20, 70))), ("err", (slice(1, 4), 0))):
        assert_same(ds[name][window], series_read(paths, name, "time")[window], name)


def _steps(path: Path, t0: int, n: int) -> Path:
    """``n`` time steps from ``t0``: ``time`` and a 3-D ``x`` (the only array of 3 dimensions)."""
    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.arange(t0, t0 + n, dtype="f8"), maxshape=(None,), chunks=(2,))
        t.attrs["units"] = "days since 2000-01-01"
        t.make_scale("time")
        x = f.create_dataset("x", data=(np.arange(12 * n).reshape(n, 3, 4) + 100 * t0).astype("<i4"),
                             maxshape=(None, 3, 4), chunks=(2, 2, 2))  # fmt: skip
        x.dims[0].attach_scale(t)
    return path


def test_array_alone_in_its_rank_is_asked_without_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``x`` is the only 3-D array: its boxes leave the ``array`` term out (the time rows hold
    NO_DIM in g1, g2) and still give the brute-force rows, on a grid rectilinear along time."""
    files = [_steps(tmp_path / "a.h5", 0, 3), _steps(tmp_path / "b.h5", 3, 2), _steps(tmp_path / "c.h5", 5, 4)]
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time", workers=1, timeout=None)
    monkeypatch.setattr(_index, "MAX_ROWS", 0)
    snap = refstore.Collection.open(uri).snapshot()
    assert snap.array("x").edges[0] == (2, 1, 2, 2, 2)
    filters: list[str] = []
    real = snap.ds.to_table
    monkeypatch.setattr(
        snap, "ds", type("D", (), {"to_table": lambda _s, **k: filters.append(k["filter"]) or real(**k)})()
    )
    for ranges in (
        [(0, 4), (0, 1), (0, 1)],
        [(1, 3), (1, 1), (0, 0)],
        [(4, 9), (0, 0), (1, 5)],
        [(-1, 0), (-1, 9), (1, 1)],
    ):
        assert _got(snap, "x", ranges, None) == _brute(uri, "x", ranges, None), ranges
    box = [f for f in filters if "source IN" in f]
    assert len(box) == 4 and not any("array =" in f for f in box)
    assert_same(refstore.open(uri)["x"][1:7, 1:, 1:3], series_read([str(p) for p in files], "x", "time")[1:7, 1:, 1:3])
