"""A scan appending sources after the end of a series commits what planning the whole series
commits (``plan/append.py``, ``table/_append.py``): each case scans the same files, step by
step, into a collection with the append path and one without it, compares every row of the two
tables and every log record, and reads the result against h5py over the files."""

from __future__ import annotations

import json
import shutil
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

import h5py
import lance
import numpy as np
import pyarrow as pa
import pytest

import refstore
from refstore.fixtures.oisst import write_day
from refstore.table import _append
from refstore.table.log import log_entries

from ._oracle import assert_same, series_read

if TYPE_CHECKING:
    from pathlib import Path

START = date(2024, 1, 1)
FIELDS = ("sst", "anom", "err", "ice", "time")  # along time; lat/lon/zlev taken once


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Days 0..9 written once (netCDF4-like, OISST layout; time chunked 512: a rectilinear grid)."""
    folder = tmp_path_factory.mktemp("append-days")
    for i in range(10):
        write_day(folder / f"d{i:02d}.nc", START + timedelta(days=i))
    return folder


def _rows(uri: str) -> pa.Table:
    """Every row of the latest version but the held-bytes blob, in a canonical order; the
    collection row without its ``head`` (a new random id per commit)."""
    ds = lance.dataset(uri)
    cols = [f.name for f in ds.schema if f.name != "held"]
    t = ds.to_table(columns=cols)
    meta = t.column("meta").to_pylist()
    kinds = t.column("kind").to_pylist()
    for i, k in enumerate(kinds):
        if k == "collection":
            m = json.loads(meta[i])
            m.pop("head")
            meta[i] = json.dumps(m, sort_keys=True)
    t = t.set_column(t.schema.get_field_index("meta"), "meta", pa.array(meta, pa.string()))
    keys = ["kind", "array", "source", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"]
    return t.sort_by([(k, "ascending") for k in keys])


def _assert_same_rows(a: pa.Table, b: pa.Table) -> None:
    """Equal tables, column by column (a failure names the column; NaN equals NaN)."""
    assert a.num_rows == b.num_rows
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if pa.types.is_floating(x.type):
            assert np.array_equal(x.to_numpy(), y.to_numpy(), equal_nan=True), name
        else:
            assert x.equals(y), name


class Pair:
    """The same scans into two collections: ``fast`` with the append path, ``full`` without."""

    def __init__(self, tmp: Path, folder: Path) -> None:
        self.fast, self.full, self.folder = str(tmp / "fast"), str(tmp / "full"), folder
        refstore.init(self.fast)
        refstore.init(self.full)

    def scan(self, monkeypatch: pytest.MonkeyPatch, *, expect: str, **kw: Any) -> refstore.ScanReport:
        """Scan ``folder`` into both; ``expect``: the path the fast collection's commit takes
        (``appended`` or ``planned``). The two tables, log records and reports must agree."""
        before = dict(_append.STATS)
        fast = refstore.scan(self.fast, [str(self.folder)], concat_dim="time", workers=1, timeout=None, **kw)
        took = {k: _append.STATS[k] - before[k] for k in before}
        assert took[expect] == 1 and sum(took.values()) == 1, took
        with monkeypatch.context() as m:
            m.setattr(_append, "ENABLED", False)
            full = refstore.scan(self.full, [str(self.folder)], concat_dim="time", workers=1, timeout=None, **kw)
        assert fast.to_json() == {**full.to_json(), "version": fast.version}
        _assert_same_rows(_rows(self.fast), _rows(self.full))
        rec = [e.record for e in log_entries(refstore.Collection.open(self.fast))]
        assert rec == [e.record for e in log_entries(refstore.Collection.open(self.full))]
        return fast


def _check_values(uri: str, files: list[Path]) -> None:
    """Every array along time equals h5py's concatenation over ``files`` (in time order)."""
    ds = refstore.open(uri)
    paths = [str(p) for p in files]
    for name in FIELDS:
        got = ds[name][...]
        assert_same(got, series_read(paths, name, "time"), name)
        with h5py.File(paths[0]) as f:
            assert got.dtype == f[name].dtype, name
    assert_same(ds["lat"][...], series_read(paths, "lat", "time"), "lat")


def _link(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def test_appended_days_equal_the_full_plan(tmp_path: Path, days: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(3)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")  # the first scan plans
    for i in (3, 4):  # two new days in one scan, then one
        files.append(_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc"))
    rep = pair.scan(monkeypatch, expect="appended")
    assert (rep.new, rep.changed) == (2, 0)
    files.append(_link(days / "d05.nc", folder / "d05.nc"))
    pair.scan(monkeypatch, expect="appended")
    _check_values(pair.fast, files)


def _steps(path: Path, t0: int, n: int, chunk: int) -> Path:
    """A file of ``n`` time steps from day ``t0``: ``time`` and ``x`` (n, 3) chunked ``chunk``
    along time (larger than the file, as netCDF's unlimited dimensions are)."""
    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.arange(t0, t0 + n, dtype="f8"), maxshape=(None,), chunks=(chunk,))
        t.attrs["units"] = "days since 2000-01-01"
        t.make_scale("time")
        x = f.create_dataset("x", data=(np.arange(3 * n).reshape(n, 3) + 100 * t0).astype("<i4"),
                             maxshape=(None, 3), chunks=(chunk, 3), compression="gzip")  # fmt: skip
        x.dims[0].attach_scale(t)
    return path


def test_rectilinear_grid_grows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of 4 steps chunked 2 (a regular grid), then files off that grid (a rectilinear
    one): the append path grows the grid's chunk lengths as the full plan computes them."""
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_steps(folder / "a0.h5", 0, 4, 2), _steps(folder / "a1.h5", 4, 4, 2)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    files.append(_steps(folder / "a2.h5", 8, 3, 2))  # on the grid, a short last chunk
    pair.scan(monkeypatch, expect="appended")
    assert refstore.open(pair.fast)["x"].meta.edges == ()
    files.append(_steps(folder / "a3.h5", 11, 2, 2))  # at 11: off the grid of 2
    pair.scan(monkeypatch, expect="appended")
    assert refstore.open(pair.fast)["x"].meta.edges[0] == (2, 2, 2, 2, 2, 1, 2)
    files += [_steps(folder / "a4.h5", 13, 5, 2), _steps(folder / "a5.h5", 18, 2, 2)]
    pair.scan(monkeypatch, expect="appended")
    assert refstore.open(pair.fast)["x"].meta.edges[0] == (2, 2, 2, 2, 2, 1, 2, 2, 2, 1, 2)
    ds = refstore.open(pair.fast)
    for name in ("time", "x"):
        assert_same(ds[name][...], series_read([str(p) for p in files], name, "time"), name)


def test_day_inserted_in_the_middle_plans_the_series(tmp_path: Path, days: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    folder = tmp_path / "data"
    folder.mkdir()
    files = {i: _link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in (0, 1, 3, 4)}
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    files[2] = _link(days / "d02.nc", folder / "d02.nc")
    rep = pair.scan(monkeypatch, expect="planned")  # days 3 and 4 move: the full plan
    assert rep.inserted > 0 and rep.updated > 0
    files[5] = _link(days / "d05.nc", folder / "d05.nc")
    pair.scan(monkeypatch, expect="appended")
    _check_values(pair.fast, [files[i] for i in sorted(files)])


def test_new_variable_plans_the_series(tmp_path: Path, days: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(3)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    extra = _link(days / "d03.nc", folder / "d03.nc")
    with h5py.File(extra, "r+") as f:
        f.create_dataset("salt", data=np.arange(4, dtype="<i4").reshape(1, 4), chunks=(1, 4))
    pair.scan(monkeypatch, expect="planned")
    files.append(extra)
    _check_values(pair.fast, files)
    salt = refstore.open(pair.fast)["salt"][...]
    with h5py.File(extra) as f:
        assert_same(salt, f["salt"][()], "salt")  # taken once (no time dimension)
    # a later day lacking a variable some day has: a hole at the end, the full plan again
    files.append(_link(days / "d04.nc", folder / "d04.nc"))
    pair.scan(monkeypatch, expect="appended")  # salt has no time dimension: nothing grows
    _check_values(pair.fast, files)


def test_new_along_variable_and_a_day_without_it(tmp_path: Path, days: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(2)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    extra = _link(days / "d02.nc", folder / "d02.nc")
    with h5py.File(extra, "r+") as f:
        v = f.create_dataset("flag", data=np.full((1, 3), 7, "<i2"), chunks=(1, 3))
        v.dims[0].attach_scale(f["time"])
    pair.scan(monkeypatch, expect="planned")  # a new array along time, from the third day
    files.append(extra)
    files.append(_link(days / "d03.nc", folder / "d03.nc"))
    pair.scan(monkeypatch, expect="planned")  # the new day lacks it: a hole at the end
    _check_values(pair.fast, files)
    with h5py.File(extra) as f:
        assert_same(refstore.open(pair.fast)["flag"][2:3], f["flag"][()], "flag")


def test_packing_change_starts_an_era_then_appends_to_it(tmp_path: Path, days: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(3)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    for i in (3, 4):
        files.append(_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc"))
        with h5py.File(files[-1], "r+") as f:
            f["sst"].attrs["scale_factor"] = np.float32(0.02)
    pair.scan(monkeypatch, expect="planned")  # a new era (the packing changed)
    assert len(refstore.open(pair.fast)["sst"].meta.eras) == 2
    files.append(_link(days / "d05.nc", folder / "d05.nc"))
    with h5py.File(files[-1], "r+") as f:
        f["sst"].attrs["scale_factor"] = np.float32(0.02)
    pair.scan(monkeypatch, expect="appended")  # the same packing: the last era grows
    files.append(_link(days / "d06.nc", folder / "d06.nc"))  # back to 0.01: a third era
    pair.scan(monkeypatch, expect="planned")
    assert len(refstore.open(pair.fast)["sst"].meta.eras) == 3
    _check_values(pair.fast, files)


def test_prune_plans_the_series_unless_nothing_is_removed(tmp_path: Path, days: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(4)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    files.append(_link(days / "d04.nc", folder / "d04.nc"))
    pair.scan(monkeypatch, expect="appended", prune=True)  # nothing gone
    gone = files.pop(1)
    gone.unlink()
    files.append(_link(days / "d05.nc", folder / "d05.nc"))
    rep = pair.scan(monkeypatch, expect="planned", prune=True)
    assert rep.removed == (str(gone),)
    _check_values(pair.fast, files)


def test_duplicates_set_aside_stay_aside(tmp_path: Path, days: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(3)]
    prelim = _link(days / "d02.nc", folder / "d02_preliminary.nc")
    with h5py.File(prelim, "r+") as f:
        f["anom"][...] = -f["anom"][...]
    pair = Pair(tmp_path, folder)
    rep = pair.scan(monkeypatch, expect="planned", prefer=["!*_preliminary*"])
    assert [s for s, _, _ in rep.set_aside] == [str(prelim)]
    files.append(_link(days / "d03.nc", folder / "d03.nc"))
    pair.scan(monkeypatch, expect="appended")  # the rules are kept; the set-aside source too
    # a preliminary day after the end is appended; its final file then replaces it
    _link(days / "d04.nc", folder / "d04_preliminary.nc")
    pair.scan(monkeypatch, expect="appended")
    files.append(_link(days / "d04.nc", folder / "d04.nc"))
    rep = pair.scan(monkeypatch, expect="planned")
    assert [s for s, _, _ in rep.set_aside] == [str(folder / "d04_preliminary.nc")]
    files.append(_link(days / "d05.nc", folder / "d05.nc"))
    pair.scan(monkeypatch, expect="planned", prefer=["!*_preliminary*", "newest"])  # new rules: the full plan
    _check_values(pair.fast, files)


def test_bulk_fragments_path_appends(tmp_path: Path, days: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New sources whose rows come as prewritten fragments (the Dask / bulk path) are appended
    the same way: the same rows as the full plan's."""
    from refstore.scan.auto import AutoScanner
    from refstore.table.distributed import LocalFragments
    from refstore.table.upsert import commit_scan

    fast, full = str(tmp_path / "fast"), str(tmp_path / "full")
    scanner = AutoScanner(concat_dim="time")
    res = [scanner(str(days / f"d{i:02d}.nc")) for i in range(6)]
    for uri in (fast, full):
        col = refstore.init(uri)
        for k, part in enumerate((res[:3], res[3:])):
            with monkeypatch.context() as m:
                if uri == full:
                    m.setattr(_append, "ENABLED", False)
                before = _append.STATS["appended"]
                frag = LocalFragments(col, part)
                commit_scan(col, frag.summaries, concat_dim="time", unchanged=0, failed=[], prewritten=frag)
                assert _append.STATS["appended"] - before == int(uri == fast and k == 1)
    _assert_same_rows(_rows(fast), _rows(full))
    _check_values(fast, [days / f"d{i:02d}.nc" for i in range(6)])


def test_reprocessed_days_replace_their_rows_in_place(tmp_path: Path, days: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A file rewritten with new values (other byte ranges), the same arrays, metadata and
    coordinates: only its rows are replaced; anything else plans the series."""
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(5)]
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned")
    write_day(files[2], START + timedelta(days=2), seed=1)  # new values: other lengths and offsets
    rep = pair.scan(monkeypatch, expect="replaced")
    assert (rep.new, rep.changed) == (0, 1) and rep.updated > 0
    _check_values(pair.fast, files)
    write_day(files[1], START + timedelta(days=1), seed=2)
    write_day(files[4], START + timedelta(days=4), seed=2)
    pair.scan(monkeypatch, expect="replaced")  # two at once, one of them the last day
    with h5py.File(files[3], "r+") as f:
        f["sst"].attrs["scale_factor"] = np.float32(0.02)  # a new era for one day
    pair.scan(monkeypatch, expect="planned")
    write_day(files[0], START + timedelta(days=0), seed=3)
    files.append(_link(days / "d05.nc", folder / "d05.nc"))
    pair.scan(monkeypatch, expect="planned")  # a reprocessed day and a new one: the full plan
    write_day(files[4], START + timedelta(days=4), seed=4)  # in sst's third era (days 4-5)
    pair.scan(monkeypatch, expect="replaced")
    assert len(refstore.open(pair.fast)["sst"].meta.eras) == 3
    write_day(files[5], START + timedelta(days=7), seed=0)  # the same file, another date
    pair.scan(monkeypatch, expect="planned")
    _check_values(pair.fast, files)


def test_reprocessed_duplicate_plans_the_series(tmp_path: Path, days: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    folder = tmp_path / "data"
    folder.mkdir()
    files = [_link(days / f"d{i:02d}.nc", folder / f"d{i:02d}.nc") for i in range(3)]
    prelim = _link(days / "d01.nc", folder / "d01_preliminary.nc")
    pair = Pair(tmp_path, folder)
    pair.scan(monkeypatch, expect="planned", prefer=["newest"])
    write_day(files[1], START + timedelta(days=1), seed=5)  # the kept one, rewritten (newest again)
    pair.scan(monkeypatch, expect="planned")
    write_day(prelim, START + timedelta(days=1), seed=6)  # now the preliminary is the newest
    rep = pair.scan(monkeypatch, expect="planned")
    assert [s for s, _, _ in rep.set_aside] == [str(files[1])]
    _check_values(pair.fast, [files[0], prelim, files[2]])
