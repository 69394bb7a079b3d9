"""A Hypothesis state machine over versions (write files, scan, tag, as-of read, diff, compact, gc)
checked against a plain in-memory model of what each version must contain."""

from __future__ import annotations

import shutil
import tempfile
from datetime import date, timedelta
from pathlib import Path

import h5py
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import refstore
from refstore.fixtures.oisst import write_day
from refstore.table import compact, create_tag, diff, gc

from ._oracle import assert_same

START = date(2024, 1, 1)
_VALUES: dict[tuple[int, int], np.ndarray] = {}


def day_values(day: int, seed: int) -> np.ndarray:
    """sst of a day written with ``seed`` (files are deterministic in (day, seed))."""
    if (day, seed) not in _VALUES:
        tmp = Path(tempfile.mkdtemp())
        p = write_day(tmp / "x.nc", START + timedelta(days=day), seed=seed)
        with h5py.File(p) as f:
            _VALUES[(day, seed)] = f["sst"][()]
        shutil.rmtree(tmp)
    return _VALUES[(day, seed)]


class Versions(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="refstore-sm-"))
        self.data = self.root / "data"
        self.data.mkdir()
        self.col = str(self.root / "col")
        refstore.init(self.col)
        self.disk: dict[int, tuple[int, int]] = {}  # day -> (seed, write number)
        self.committed: dict[int, tuple[int, int]] = {}  # what the latest version holds
        self.tags: dict[str, tuple[int, dict[int, tuple[int, int]]]] = {}
        self.writes = 0

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _path(self, day: int) -> Path:
        return self.data / f"day{day}.nc"

    @initialize()
    def released_series(self) -> None:
        """Two days scanned and tagged, so later rules meet a tag from the first step."""
        for day in (0, 1):
            self.write(day, 0)
        self.scan()
        self.tag()

    @rule(day=st.integers(0, 3), seed=st.integers(0, 1))
    def write(self, day: int, seed: int) -> None:
        self.writes += 1
        write_day(self._path(day), START + timedelta(days=day), seed=seed)
        self.disk[day] = (seed, self.writes)

    @precondition(lambda self: bool(self.disk))
    @rule()
    def scan(self) -> None:
        before = refstore.Collection.open(self.col).latest_version
        rep = refstore.scan(self.col, [str(self.data)], concat_dim="time", workers=1)
        changed = {d for d in self.disk if self.committed.get(d) != self.disk[d]}
        assert rep.committed == bool(changed)
        assert rep.version == (before + 1 if changed else before)
        assert rep.new + rep.changed == len(changed)
        self.committed = dict(self.disk)

    @precondition(lambda self: bool(self.committed) and len(self.tags) < 3)
    @rule()
    def tag(self) -> None:
        name = f"t{len(self.tags)}"
        version = create_tag(refstore.Collection.open(self.col), name)
        self.tags[name] = (version, dict(self.committed))

    @precondition(lambda self: bool(self.tags))
    @rule(data=st.data())
    def read_as_of_tag(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.tags)))
        _, state = self.tags[name]
        arr = refstore.open(self.col, as_of=name)["sst"]
        days = sorted(state)
        assert arr.shape[0] == len(days)
        for i, day in enumerate(days):
            if self.disk.get(day) == state[day]:
                assert_same(arr[i : i + 1], day_values(day, state[day][0]), f"{name} day {day}")
            else:
                try:
                    arr[i : i + 1]
                except refstore.StaleSourceError:
                    pass
                else:  # pragma: no cover
                    raise AssertionError(f"day {day} changed since tag {name} but read without error")

    @precondition(lambda self: bool(self.tags))
    @rule(data=st.data())
    def diff_against_tag(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.tags)))
        _, state = self.tags[name]
        col = refstore.Collection.open(self.col)
        d = diff(col, name)
        assert d.to_json() == diff(col, name, exhaustive=True).to_json()  # row-version fast path is exact
        back = diff(col, col.latest_version, name)
        assert back.sources_added == d.sources_removed and back.sources_removed == d.sources_added
        names = {str(self._path(day)): day for day in range(4)}
        assert {names[s] for s in d.sources_added} == set(self.committed) - set(state)
        assert {names[s] for s in d.sources_changed} == {
            day for day in set(self.committed) & set(state) if self.committed[day] != state[day]
        }
        assert d.differs == (self.committed != state)

    @rule()
    def compact(self) -> None:
        compact(refstore.Collection.open(self.col))

    @rule()
    def gc(self) -> None:
        gc(refstore.Collection.open(self.col), keep_last=1, grace=timedelta(0))

    @invariant()
    def latest_matches_model(self) -> None:
        if not self.committed:
            return
        arr = refstore.open(self.col)["sst"]
        days = sorted(self.committed)
        assert arr.shape[0] == len(days)
        fresh = [i for i, d in enumerate(days) if self.disk[d] == self.committed[d]]
        for i in fresh:
            day = days[i]
            assert_same(arr[i : i + 1], day_values(day, self.committed[day][0]), f"latest day {day}")


TestVersions = Versions.TestCase
TestVersions.settings = settings(
    max_examples=20,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
