"""bench/mutate.py keeps the verdicts of earlier runs: after an ``--only`` or
``--retest-survivors`` run (or mutmut's reset of every verdict when a group's test list
changes), the table still counts the mutants killed before, as long as their function's source
is unchanged. Pure: hand-written verdicts and mutmut meta files, no mutation run."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from bench import mutate

if TYPE_CHECKING:
    from pathlib import Path

M = "refstore.scan._m."


def test_an_undecided_mutant_takes_its_earlier_verdict_while_its_function_is_unchanged() -> None:
    now = {
        M + "x_f__mutmut_1": "not checked",  # not run this time: killed before
        M + "x_f__mutmut_2": "killed",  # re-run and killed now (survived before)
        M + "x_f__mutmut_3": "survived",  # re-run, still survives (killed before: the newest wins)
        M + "x_g__mutmut_1": "not checked",  # its function changed since: no earlier verdict
        M + "x_f__mutmut_4": "not checked",  # never decided
        M + "xǁCǁm__mutmut_1": "not checked",  # a method
    }
    hashes = {"x_f": "aaa", "x_g": "new", "xǁCǁm": "ccc"}
    earlier = {
        M + "x_f__mutmut_1": ("killed", "aaa"),
        M + "x_f__mutmut_2": ("survived", "aaa"),
        M + "x_f__mutmut_3": ("killed", "aaa"),
        M + "x_g__mutmut_1": ("killed", "old"),
        M + "x_f__mutmut_4": ("not checked", "aaa"),
        M + "xǁCǁm__mutmut_1": ("timeout", "ccc"),
        M + "x_gone__mutmut_1": ("killed", "zzz"),  # no longer a mutant: not added
    }
    assert mutate.merge_verdicts(now, hashes, earlier) == {
        M + "x_f__mutmut_1": "killed",
        M + "x_f__mutmut_2": "killed",
        M + "x_f__mutmut_3": "survived",
        M + "x_g__mutmut_1": "not checked",
        M + "x_f__mutmut_4": "not checked",
        M + "xǁCǁm__mutmut_1": "timeout",
    }
    assert mutate.merge_verdicts(now, hashes, {}) == now


def _meta(work: Path, codes: dict[str, int | None], hashes: dict[str, str]) -> None:
    meta = work / "mutants" / "refstore" / "scan" / "_m.py.meta"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes}))


def test_the_table_of_a_partial_run_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full run (remembered), then a run of one mutant (mutmut leaves the others undecided):
    the table counts both runs' verdicts; after the function changes, the old ones are gone."""
    pytest.importorskip("mutmut")
    monkeypatch.setattr(mutate, "OUT", tmp_path)
    group = mutate.Group(files=("refstore/scan/_m.py",), tests=())
    work = tmp_path / "g"
    names = [M + f"x_f__mutmut_{i}" for i in range(1, 5)]
    _meta(work, {names[0]: 1, names[1]: 1, names[2]: 0, names[3]: 36}, {"x_f": "aaa"})  # killed x2, survived, timeout
    mutate.remember("g", group)
    _meta(work, {names[0]: None, names[1]: None, names[2]: 1, names[3]: None}, {"x_f": "aaa"})
    assert mutate.results("g", group) == {"refstore/scan/_m.py": dict.fromkeys(names[:3], "killed") | {
        names[3]: "timeout"}}  # fmt: skip
    mutate.remember("g", group)  # the re-run's kill is kept too
    _meta(work, dict.fromkeys(names, None), {"x_f": "aaa"})
    assert set(mutate.results("g", group)["refstore/scan/_m.py"].values()) == {"killed", "timeout"}
    _meta(work, dict.fromkeys(names, None), {"x_f": "bbb"})  # the function's source changed
    assert set(mutate.results("g", group)["refstore/scan/_m.py"].values()) == {"not checked"}


def test_pending_is_every_mutant_not_killed_or_timed_out() -> None:
    statuses = {
        M + "x_f__mutmut_1": "killed",
        M + "x_f__mutmut_2": "survived",
        M + "x_f__mutmut_3": "not checked",  # never run, or its function changed
        M + "x_f__mutmut_4": "timeout",
        M + "x_f__mutmut_5": "no tests",
        M + "x_g__mutmut_1": "survived",
        M + "x_g__mutmut_2": "skipped",
        M + "x_g__mutmut_3": "caught by type check",
    }
    assert mutate.pending(statuses) == [
        M + "x_f__mutmut_2", M + "x_f__mutmut_3", M + "x_f__mutmut_5", M + "x_g__mutmut_1", M + "x_g__mutmut_2",
    ]  # fmt: skip
    assert mutate.pending(statuses, [M + "x_g__*"]) == [M + "x_g__mutmut_1", M + "x_g__mutmut_2"]
    assert mutate.pending(statuses, undecided=False) == [M + "x_f__mutmut_2", M + "x_f__mutmut_5", M + "x_g__mutmut_1"]
    assert mutate.pending(statuses, [M + "x_f__*"], timeouts=True) == [
        M + "x_f__mutmut_2", M + "x_f__mutmut_3", M + "x_f__mutmut_4", M + "x_f__mutmut_5",
    ]  # fmt: skip
    # an explained survivor is skipped (no test can kill it); explaining a mutant of any other
    # status changes nothing (a verdict still to come, or a detected one)
    explained = {M + "x_f__mutmut_2", M + "x_f__mutmut_3", M + "x_f__mutmut_4", M + "x_f__mutmut_5"}
    assert mutate.pending(statuses, timeouts=True, explained=explained) == [
        M + "x_f__mutmut_3", M + "x_f__mutmut_4", M + "x_f__mutmut_5", M + "x_g__mutmut_1", M + "x_g__mutmut_2",
    ]  # fmt: skip
