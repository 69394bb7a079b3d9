"""Progress of long commands: the library reports ``progress(done, total)`` through a callback
(never rich); the command line shows a rich bar on stderr only when stderr is a terminal, and
never with ``--json``. The commands run in this process (typer's runner) with the CLI's stderr
console swapped for one writing to a buffer, as a terminal or not."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import refstore
from refstore.cli import app as cli


@pytest.fixture(scope="module")
def col(tmp_path_factory: pytest.TempPathFactory) -> str:
    from refstore.fixtures.oisst import write_series

    root = tmp_path_factory.mktemp("progress")
    files = write_series(root / "data", 2)
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time", timeout=None)
    return uri


class Calls:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))

    def check(self, what: str) -> None:
        assert self.calls, f"{what}: no progress reported"
        done = [d for d, _ in self.calls]
        assert done == sorted(done), f"{what}: progress went back: {self.calls}"
        assert all(0 <= d <= t for d, t in self.calls), f"{what}: {self.calls}"
        last_done, last_total = self.calls[-1]
        assert last_done == last_total > 0, f"{what}: did not finish: {self.calls}"


def test_the_library_reports_progress_to_a_callback(col: str, tmp_path: Path) -> None:
    from refstore.emit import emit
    from refstore.emit.stac import catalog
    from refstore.table import HoldSelection, hold

    c = refstore.Collection.open(col)
    rec = Calls()
    emit(c, "kerchunk-json", str(tmp_path / "o.json"), progress=rec)
    rec.check("emit")
    assert rec.calls[-1][1] == len(refstore.open(col).arrays)  # one step per array

    rec = Calls()
    refstore.verify(c.snapshot(None), progress=rec)
    rec.check("verify")

    rec = Calls()
    catalog(c, str(tmp_path / "c.json"), progress=rec)
    rec.check("catalog")
    assert rec.calls[-1][1] == 4  # time, zlev, lat, lon: the coordinates read for extents and dimensions

    rec = Calls()
    hold(refstore.Collection.open(col), HoldSelection(arrays=("mask",)), progress=rec)
    rec.check("hold")


def _run(monkeypatch: pytest.MonkeyPatch, args: list[str], *, terminal: bool) -> tuple[int, str, str]:
    """(exit code, stdout, what the progress console got)."""
    buf = io.StringIO()
    monkeypatch.setattr(cli, "err", Console(file=buf, force_terminal=terminal, width=100))
    r = CliRunner().invoke(cli.app, args, catch_exceptions=False)
    return r.exit_code, r.stdout, buf.getvalue()


COMMANDS: list[tuple[str, list[str]]] = [
    ("emitting kerchunk-json", ["emit", "kerchunk-json", "{tmp}/o.json"]),
    ("verifying", ["verify"]),
    ("cataloguing", ["catalog", "{tmp}/c.json"]),
    ("holding", ["hold", "--array", "mask"]),
]


@pytest.mark.parametrize(("label", "args"), COMMANDS, ids=[c[1][0] for c in COMMANDS])
def test_a_bar_on_a_terminal_never_with_json_or_a_pipe(col: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       label: str, args: list[str]) -> None:  # fmt: skip
    argv = ["-C", col, *(a.format(tmp=tmp_path) for a in args)]
    code, _, shown = _run(monkeypatch, argv, terminal=True)
    assert code == 0
    assert label in shown and "\x1b[" in shown  # the bar, drawn with terminal control codes

    code, stdout, shown = _run(monkeypatch, [*argv, "--json"], terminal=True)
    assert code == 0
    assert shown == ""
    json.loads(stdout)  # the report alone on stdout

    code, _, shown = _run(monkeypatch, argv, terminal=False)
    assert code == 0
    assert shown == ""


def test_scan_shows_its_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from refstore.fixtures.oisst import write_series

    files = write_series(tmp_path / "data", 1)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    args: list[Any] = ["-C", uri, "scan", str(files[0]), "--timeout", "0"]
    code, _, shown = _run(monkeypatch, args, terminal=True)
    assert code == 0 and "scanning" in shown
    code, stdout, shown = _run(monkeypatch, [*args, "--json"], terminal=True)
    assert code == 0 and shown == "" and json.loads(stdout)["version"] >= 1


def test_import_shows_its_bar_on_a_terminal(col: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from refstore.emit import emit

    refs = tmp_path / "refs.json"
    emit(refstore.Collection.open(col), "kerchunk-json", str(refs))
    for i, (as_json, want_bar) in enumerate(((False, True), (True, False))):
        target = str(tmp_path / f"imported-{i}")
        refstore.init(target)
        args = ["-C", target, "import", "kerchunk", str(refs), "--allow", "/", *(["--json"] if as_json else [])]
        code, stdout, shown = _run(monkeypatch, args, terminal=True)
        assert code == 0, stdout
        assert ("identifying sources" in shown) is want_bar, shown
        if as_json:
            assert shown == "" and json.loads(stdout)["version"] >= 1
