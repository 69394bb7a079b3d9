"""Outputs (issue 29, §4): a killed ``emit kerchunk-parquet`` never leaves OUT missing and the
next emit removes what it left; ``read --out``, ``coverage --out`` and ``report`` replace only
what refstore wrote (never through a symbolic link, never a file the user keeps)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ._cli import invoke
from ._faults import killed_at, needs_strace


def _complete_parquet_refs(out: Path) -> bool:
    """A whole kerchunk Parquet reference folder: ``.zmetadata`` parses and every array's
    first reference file reads (pyarrow)."""
    meta = json.loads((out / ".zmetadata").read_text())
    arrays = [k.rsplit("/", 1)[0] for k in meta["metadata"] if k.endswith("/.zarray")]
    return bool(arrays) and all(pq.read_table(out / a / "refs.0.parq").num_rows > 0 for a in arrays)


@needs_strace
def test_a_killed_kerchunk_parquet_emit_never_leaves_out_missing(series, new_collection, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    col = new_collection()
    assert invoke("-C", col, "scan", str(series(2)[0].parent), "--concat-dim", "time").returncode == 0
    out = tmp_path / "pub" / "refs.parq"
    assert invoke("-C", col, "emit", "kerchunk-parquet", str(out)).returncode == 0
    for when in (1, 2):  # each rename onto or away from OUT (the second: between moving OUT aside and back)
        r = killed_at("rename,renameat,renameat2", when, "-C", col, "emit", "kerchunk-parquet", str(out),
                      path=str(out))  # fmt: skip
        assert out.is_dir() and _complete_parquet_refs(out), (when, r.returncode, r.stderr)
    left = [p.name for p in out.parent.iterdir() if p.name != out.name]
    r = invoke("-C", col, "emit", "kerchunk-parquet", str(out))
    assert r.returncode == 0, r.stderr
    assert [p.name for p in out.parent.iterdir()] == [out.name], left  # the rerun removed what kills left
    assert _complete_parquet_refs(out)


def test_read_out_replaces_only_an_npy_file_and_never_writes_through_a_link(series, new_collection, tmp_path) -> None:
    import h5py

    files = series(1)
    col = new_collection()
    assert invoke("-C", col, "scan", str(files[0])).returncode == 0
    kept = tmp_path / "notes.txt"
    kept.write_text("mine")
    link = tmp_path / "link.npy"
    link.symlink_to(kept)
    for target, why in ((kept, "did not write"), (link, "symbolic link")):
        r = invoke("-C", col, "read", "sst", "--out", str(target))
        assert r.returncode == 2 and why in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert kept.read_text() == "mine"
    out = tmp_path / "sst.npy"
    for _ in range(2):  # a new name, then its own previous output
        assert invoke("-C", col, "read", "sst", "--out", str(out)).returncode == 0
    expected = h5py.File(files[0])["sst"][()]
    got = np.load(out)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


@pytest.mark.parametrize("command", ["coverage", "report"])
def test_coverage_and_report_replace_only_their_own_output(series, new_collection, tmp_path, command) -> None:
    pytest.importorskip("matplotlib")
    col = new_collection()
    assert invoke("-C", col, "scan", str(series(1)[0])).returncode == 0
    suffix = ".png" if command == "coverage" else ".html"

    def run(out: Path):  # type: ignore[no-untyped-def]
        args = ["coverage", "sst", "--out", str(out)] if command == "coverage" else ["report", str(out)]
        return invoke("-C", col, *args)

    kept = tmp_path / f"kept{suffix}"
    kept.write_bytes(b"\x89PNG\r\n\x1a\n not refstore's" if command == "coverage" else b"<html>mine</html>")
    link = tmp_path / f"link{suffix}"
    link.symlink_to(kept)
    before = kept.read_bytes()
    for target, why in ((kept, "did not write"), (link, "symbolic link")):
        r = run(target)
        assert r.returncode == 2 and why in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert kept.read_bytes() == before
    out = tmp_path / f"own{suffix}"
    assert run(out).returncode == 0
    assert run(out).returncode == 0, "its own previous output is replaced"
