"""The command line as users and CI run it: exit codes, --json shapes, one-line errors (in a real
process where the process matters: errors, the demo; in this process otherwise, `_cli.invoke`)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from ._cli import invoke, run
from ._oracle import assert_same


def test_user_workflow(tmp_path: Path, series) -> None:
    files = series(3)
    col = str(tmp_path / "oisst")
    assert invoke("-C", col, "init").returncode == 0
    r = invoke("-C", col, "scan", str(files[0].parent), "--concat-dim", "time", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["sources"] == {"new": 3, "changed": 0, "unchanged": 0, "failed": 0}
    assert rep["refs"]["inserted"] > 0 and isinstance(rep["version"], int)

    r = invoke("info", "--json", env={"REFSTORE_COLLECTION": col})
    info = json.loads(r.stdout)
    assert info["version"] == rep["version"] and info["sources"] == 3 and info["refs"] > 0
    sst = info["arrays"]["sst"]
    assert sst["dims"] == ["time", "zlev", "lat", "lon"] and sst["shape"] == [3, 1, 45, 90]
    assert sst["dtype"] == "<i2" and sst["fill_value"] == -999 and sst["chunks"] == [1, 1, 20, 32]
    assert [c["id"] for c in sst["codecs"]] == ["shuffle", "zlib"]
    assert sst["attr_types"]["scale_factor"] == "<f4" and sst["attrs"]["units"] == "Celsius"
    assert info["held"] == {"chunks": 0, "bytes": 0}

    out = tmp_path / "box.npy"
    r = invoke("read", "sst", "--window", "0:3,0,10:30,20:40", "--out", str(out), cwd=Path(col))
    assert r.returncode == 0, r.stderr
    box = np.load(out)
    expected = []
    for p in files:
        with h5py.File(p) as f:
            expected.append(f["sst"][:, 0, 10:30, 20:40])
    assert_same(box, np.concatenate(expected), "read --window --out")

    r = invoke("-C", col, "verify", "--sample", "20", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == {"checked": 20, "mismatched": 0, "mismatches": []}

    r = invoke("-C", col, "scan", str(files[0].parent), "--json")
    assert json.loads(r.stdout)["sources"]["unchanged"] == 3

    r = invoke("-C", col, "log", "--json")
    log = json.loads(r.stdout)
    assert [e["version"] for e in log] == [2, 1] and [e["operation"] for e in log] == ["scan", "init"]
    assert all(set(e) >= {"version", "timestamp", "operation", "tags"} for e in log)


def test_errors_are_one_line_exit_2_and_commit_nothing(tmp_path: Path) -> None:
    col = str(tmp_path / "c")
    r = run("-C", col, "info")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert col in r.stderr
    assert run("-C", col, "init").returncode == 0
    r = run("-C", col, "init")
    assert r.returncode == 2 and "already" in r.stderr
    r = run("-C", col, "scan", str(tmp_path / "missing.nc"))
    assert r.returncode == 2 and "missing.nc" in r.stderr and "Traceback" not in r.stderr
    r = run("-C", col, "read", "nope", "--out", str(tmp_path / "x.npy"))
    assert r.returncode == 2 and "nope" in r.stderr
    # a plan refused (two files with the same times along the concat dim): exit 2, names the source,
    # nothing committed
    d = tmp_path / "bad"
    d.mkdir()
    for i, n in enumerate((2, 2)):
        with h5py.File(d / f"f{i}.h5", "w") as f:
            t = f.create_dataset("time", data=np.arange(n, dtype="f8"), chunks=(2,), maxshape=(None,))
            t.make_scale("time")
            x = f.create_dataset("x", data=np.ones((n, 4), "f4"), chunks=(2, 4))
            x.dims[0].attach_scale(t)
    r = run("-C", col, "scan", str(d), "--concat-dim", "time")
    assert r.returncode == 2 and "f0.h5" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert json.loads(run("-C", col, "log", "--json").stdout)[0]["operation"] == "init"
    # bad windows
    r = run("-C", col, "read", "x", "--window", "a:b", "--out", str(tmp_path / "x.npy"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_init_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "stuff.txt").write_text("hi")
    r = invoke("-C", str(tmp_path), "init")
    assert r.returncode == 2 and "not empty" in r.stderr


def test_verify_exits_1_when_a_source_changed_under_the_table(tmp_path: Path, series) -> None:
    from datetime import date

    from refstore.fixtures.oisst import write_day

    files = series(2)
    col = str(tmp_path / "c")
    invoke("-C", col, "init")
    invoke("-C", col, "scan", str(files[0].parent), "--concat-dim", "time")
    # the file is replaced by another day's bytes; the table still points at the old layout
    write_day(files[1], date(2024, 1, 2), seed=99)
    r = invoke("-C", col, "verify", "--json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert rep["mismatched"] > 0 and all("source" in m for m in rep["mismatches"])


def test_demo_runs(tmp_path: Path) -> None:
    r = run("demo", "--dir", str(tmp_path / "demo"), "--json")
    assert r.returncode == 0, r.stderr
    assert "not safe for concurrent commits" not in r.stderr  # Icechunk's log on refstore's own local repositories
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["read_equal"] and rep["verify"]["mismatched"] == 0
    assert rep["rescan"]["sources"]["new"] == 1
