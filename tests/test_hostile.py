"""Hostile files and hostile surroundings: bounded time and memory, one clear line, the rest
commits (issue 13). Real files and processes; the fault campaigns live in ``bench/faults.py``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np
import pytest

import refstore
from refstore.errors import ScanError, StaleSourceError
from refstore.fixtures.hostile import (
    write_attribute_names_not_utf8,
    write_chunk_key_outside,
    write_chunk_key_wrapped,
    write_chunk_past_eof,
    write_huge_grid,
    write_tiff_claiming_tiles,
)
from refstore.fixtures.oisst import write_day
from refstore.scan import AutoScanner, ScanResult, scan_many
from refstore.schema import Kind

from ._cli import run
from ._hostile_scanners import SLEEP_FOREVER, SLOW_BUT_ALIVE, SleepyScanner

CLI = [sys.executable, "-m", "refstore.cli.app"]


def _one_line(stderr: str) -> str:
    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def two_days(tmp_path: Path) -> Path:
    folder = tmp_path / "days"
    folder.mkdir()
    write_day(folder / "day1.nc", date(2024, 1, 1))
    write_day(folder / "day2.nc", date(2024, 1, 2))
    return folder


def _init(tmp_path: Path) -> Path:
    col = tmp_path / "col"
    refstore.init(str(col))
    return col


# ------------------------------------------------------------------ bounded time
def test_fifo_in_a_folder_and_given_fails_alone(tmp_path: Path, two_days: Path) -> None:
    os.mkfifo(two_days / "pipe.nc")
    col = _init(tmp_path)
    p = subprocess.run([*CLI, "-C", str(col), "scan", "--concat-dim", "time", str(two_days),
                        str(two_days / "pipe.nc")],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "2 new" in p.stdout and "1 failed" in p.stdout
    line = _one_line(p.stderr)
    assert "pipe.nc: not a regular file (a FIFO)" in line


def test_a_source_that_hangs_or_crashes_its_worker_fails_alone(two_days: Path) -> None:
    """A real worker process that never answers is killed at the deadline; one that dies is
    replaced; the sources around them are scanned."""
    good = sorted(str(p) for p in two_days.iterdir())
    locs = [good[0], SLEEP_FOREVER, "crash:segv", good[1]]
    got = list(scan_many(SleepyScanner(AutoScanner(concat_dim="time")), locs, workers=1, timeout=5))
    assert [loc for loc, _ in got] == locs
    by = dict(got)
    assert isinstance(by[good[0]], ScanResult) and isinstance(by[good[1]], ScanResult)
    hang, crash = by[SLEEP_FOREVER], by["crash:segv"]
    assert isinstance(hang, ScanError) and "still not scanned after 5 s" in hang.reason
    assert isinstance(crash, ScanError) and f"signal {int(signal.SIGSEGV)}" in crash.reason


def test_a_source_given_to_a_worker_that_just_died_is_not_a_traceback(two_days: Path) -> None:
    """Found by `./dev faults --fuzz 1000` (3 batches of 50 fuzzed HDF5 files lost): a worker
    that crashed on one source was handed the next before its death was seen, and the send's
    BrokenPipeError ended the whole scan with a traceback. Deterministic: the worker is dead
    (killed and reaped) when the next source is given."""
    from refstore.scan._parallel import _Pool, _supervised

    good = sorted(str(p) for p in two_days.iterdir())
    pool = _Pool(SleepyScanner(AutoScanner(concat_dim="time")), 1)
    (w,) = pool.workers
    w.process.kill()
    w.process.wait()
    pool.give(w, (0, good[0]))  # old code: BrokenPipeError
    assert list(w.queue) == [(0, good[0])]
    pool.close()
    locs = [good[0], "crash:segv", "crash:segv", "crash:segv", good[1]]
    got = dict(_supervised(SleepyScanner(AutoScanner(concat_dim="time")), locs, 1, 30, None))
    assert isinstance(got[good[0]], ScanResult) and isinstance(got[good[1]], ScanResult)
    assert isinstance(got["crash:segv"], ScanError)


def test_a_slow_source_that_says_it_progresses_is_not_given_up(two_days: Path) -> None:
    loc = f"{SLOW_BUT_ALIVE}:{two_days / 'day1.nc'}"
    ((_, res),) = scan_many(SleepyScanner(AutoScanner(concat_dim="time")), [loc], workers=1, timeout=2)
    assert isinstance(res, ScanResult), res


# ------------------------------------------------------------------ ranges and keys
@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (write_chunk_past_eof, "points at bytes"),
        (write_chunk_key_wrapped, "chunk index of 'x' out of range"),
        (write_chunk_key_outside, "chunk [100] of 'x' lies outside its grid of [4] chunks"),
    ],
)
def test_damaged_chunk_index_fails_the_file_with_one_line(tmp_path: Path, two_days: Path, make, expect) -> None:  # type: ignore[no-untyped-def]
    bad = make(two_days / "bad.h5")
    col = _init(tmp_path)
    p = run("-C", str(col), "scan", "--concat-dim", "time", str(two_days))
    assert p.returncode == 0, p.stderr
    assert "2 new" in p.stdout and "1 failed" in p.stdout
    line = _one_line(p.stderr)
    assert str(bad) in line and expect in line and "Error" not in line


def test_damaged_chunk_indexes_in_one_checked_batch_fail_their_own_files(tmp_path: Path, two_days: Path) -> None:
    """Scanned in this process, the sources' references are checked as one batch: each damaged
    file is named with its own problem, the good ones commit, and with ``strict`` nothing does."""
    past = write_chunk_past_eof(two_days / "past.h5")
    outside = write_chunk_key_outside(two_days / "outside.h5")
    col = _init(tmp_path)
    strict = r"outside\.h5: damaged: chunk \[100\] of 'x' lies outside its grid of \[4\] chunks \(shape \[40\]\) "
    with pytest.raises(ScanError, match=strict + r"\(and 1 more\); --strict: nothing committed$"):
        refstore.scan(str(col), [str(two_days)], concat_dim="time", workers=1, timeout=None, strict=True)
    assert refstore.Collection.open(str(col)).snapshot().count(Kind.SOURCE) == 0
    rep = refstore.scan(str(col), [str(two_days)], concat_dim="time", workers=1, timeout=None)
    assert rep.new == 2 and dict(rep.failed) == {
        str(outside): "damaged: chunk [100] of 'x' lies outside its grid of [4] chunks (shape [40])",
        str(past): f"damaged: a chunk of 'x' points at bytes {past.stat().st_size + 10**9}-"
                   f"{past.stat().st_size + 10**9 + 40}, past the end ({past.stat().st_size} bytes)",
    }  # fmt: skip


def test_attribute_names_that_are_not_utf8_are_recorded(tmp_path: Path) -> None:
    """Found by the fuzz campaign: the scan accepted the file, the commit died on a bytes key."""
    src = write_attribute_names_not_utf8(tmp_path / "names.h5")
    col = _init(tmp_path)
    p = run("-C", str(col), "scan", str(src))
    assert p.returncode == 0 and "0 failed" in p.stdout, p.stderr
    snap = refstore.Collection.open(str(col)).snapshot()
    assert "\ufffd\ufffdoffset" in snap.array("x").attrs
    assert "\ufffdglobal" in snap.group_attrs()[""]


# ------------------------------------------------------------------ bounded memory
def test_tiff_claiming_more_tiles_than_taken_is_refused_before_parsing(tmp_path: Path) -> None:
    MAX_SEGMENTS = 1 << 24

    log2 = MAX_SEGMENTS.bit_length()  # 2^25 tiles: the offsets alone are 128 MiB of holes
    tif = write_tiff_claiming_tiles(tmp_path / "claim.tif", log2)
    col = _init(tmp_path)
    p = run("-C", str(col), "scan", str(tif))
    assert "1 failed" in p.stdout, p.stdout + p.stderr
    assert f"IFD 0 claims {1 << log2} tiles, more than the {MAX_SEGMENTS}" in _one_line(p.stderr)


def test_kerchunk_parquet_of_a_huge_sparse_grid_is_refused_with_the_figure(tmp_path: Path) -> None:
    col = _init(tmp_path)
    refstore.scan(str(col), [str(write_huge_grid(tmp_path / "big.h5"))])
    p = run("-C", str(col), "emit", "kerchunk-parquet", str(tmp_path / "out.parq"))
    assert p.returncode == 2
    line = _one_line(p.stderr)
    assert f"grid of {1 << 40} chunks" in line and "reference files" in line
    assert not (tmp_path / "out.parq").exists()


# ------------------------------------------------------------------ folders and names
def test_newline_in_a_file_name_fails_alone(tmp_path: Path, two_days: Path) -> None:
    shutil.copy(two_days / "day1.nc", two_days / "we\nird.nc")
    col = _init(tmp_path)
    p = run("-C", str(col), "scan", "--concat-dim", "time", str(two_days))
    assert p.returncode == 0, p.stderr
    assert "2 new" in p.stdout and "1 failed" in p.stdout
    assert "we\\nird.nc: a name with control characters" in _one_line(p.stderr)


def _without_root_powers() -> list[str]:
    """A prefix that runs a command without the capabilities that let root read anything
    (tests run as root here, where ``chmod 000`` stops nobody)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: chmod cannot make a file unreadable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_unreadable_subfolder_is_reported(tmp_path: Path, two_days: Path) -> None:
    sub = two_days / "locked"
    sub.mkdir()
    shutil.move(two_days / "day2.nc", sub / "day2.nc")
    col = _init(tmp_path)
    sub.chmod(0)
    try:
        args = [*_without_root_powers(), *CLI, "-C", str(col), "scan", "--concat-dim", "time", str(two_days)]
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    finally:
        sub.chmod(0o755)
    assert p.returncode == 0, p.stderr
    assert "1 new" in p.stdout and "1 failed" in p.stdout
    assert f"{sub}: folder cannot be listed (Permission denied)" in _one_line(p.stderr)


@pytest.mark.parametrize("how", ["missing", "unreadable"])
def test_collection_files_missing_or_unreadable_is_one_line(tmp_path: Path, two_days: Path, how: str) -> None:
    col = _init(tmp_path)
    refstore.scan(str(col), [str(two_days)], concat_dim="time")
    data = col / "data"
    prefix: list[str] = []
    if how == "missing":
        shutil.move(data, tmp_path / "data.away")
    else:
        prefix = _without_root_powers()
        data.chmod(0)
    try:
        for args in (["info"], ["read", "sst", "--out", str(tmp_path / "x.npy")], ["verify"]):
            p = subprocess.run([*prefix, *CLI, "-C", str(col), *args], capture_output=True, text=True, timeout=300)
            assert p.returncode == 2, p.stderr
            line = _one_line(p.stderr)
            assert "files of version 2 cannot be read" in line
            assert ("Not found" if how == "missing" else "Permission denied") in line
    finally:
        data.chmod(0o755) if data.exists() else None


# ------------------------------------------------------------------ messages
def test_damaged_files_are_described_not_named_by_exception_class(tmp_path: Path) -> None:
    from refstore.fixtures.tiff import write_tiff

    tif = write_tiff(tmp_path / "zero.tif", np.zeros((32, 32), np.uint8), tile=(16, 16))
    raw = bytearray(tif.read_bytes())
    import struct

    import tifffile

    with tifffile.TiffFile(tif) as t:
        tags = list(t.pages[0].tags.values())
    for tag in tags:
        if tag.name in ("TileOffsets", "TileByteCounts"):  # value offsets into nowhere: tifffile logs
            struct.pack_into("<I", raw, tag.offset + 8, len(raw) + 10**6)
    tif.write_bytes(bytes(raw))
    col = _init(tmp_path)
    p = run("-C", str(col), "scan", str(tif))
    line = _one_line(p.stderr)  # tifffile's own log lines do not reach stderr
    assert "zero.tif" in line
    assert "TiffFileError" not in line and "raised" not in line


def test_read_out_writes_the_path_it_names(tmp_path: Path, two_days: Path) -> None:
    col = _init(tmp_path)
    refstore.scan(str(col), [str(two_days)], concat_dim="time")
    out = tmp_path / "box"
    p = run("-C", str(col), "read", "sst", "--window", "0", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert f"wrote {out}:" in p.stdout
    assert out.is_file() and not Path(f"{out}.npy").exists()
    assert np.load(out).shape == refstore.open(str(col))["sst"][0].shape


# ------------------------------------------------------------------ identity
def test_checksum_sees_a_same_size_rewrite_with_a_forged_mtime(tmp_path: Path) -> None:
    """The issue's case: a netCDF3 file rewritten in place (same size, new values) and its mtime
    set back. Size and mtime see nothing; the recorded checksum does, at read and at rescan."""
    from refstore.fixtures.netcdf3 import write_obs_file

    src = tmp_path / "obs"
    src.mkdir()
    nc = write_obs_file(src / "obs.nc", start_hour=0, records=4)
    col = _init(tmp_path)
    p = run("-C", str(col), "scan", "--checksum", str(src))
    assert p.returncode == 0, p.stderr
    snap = refstore.Collection.open(str(col)).snapshot()
    assert next(iter(snap.source_checksums().values())).startswith("sha256:")
    name = next(n for n, a in snap.arrays().items() if a.status == "ok" and np.dtype(a.dtype).kind == "f")
    before = np.asarray(refstore.open(str(col))[name][...])
    offset = int(snap.chunk_rows(name).column("offset")[0].as_py())
    st = nc.stat()
    with open(nc, "r+b") as f:  # new values in place
        f.seek(offset)
        f.write(b"\x42" * 4)
    os.utime(nc, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime set back
    assert (nc.stat().st_size, nc.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    with pytest.raises(StaleSourceError, match="content differs from its checksum at scan"):
        refstore.open(str(col))[name][...]
    p = run("-C", str(col), "scan", str(src), "--json")  # the setting is kept: no --checksum needed
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["sources"]["changed"] == 1
    after = np.asarray(refstore.open(str(col))[name][...])
    assert not np.array_equal(before, after, equal_nan=True)


def test_checksum_upgrades_sources_recorded_without_one(tmp_path: Path, two_days: Path) -> None:
    col = _init(tmp_path)
    refstore.scan(str(col), [str(two_days)], concat_dim="time")
    assert refstore.scan(str(col), [str(two_days)]).committed is False
    rep = refstore.scan(str(col), [str(two_days)], checksum=True)
    assert rep.to_json()["sources"]["changed"] == 2
    assert len(refstore.Collection.open(str(col)).snapshot().source_checksums()) == 2
    assert refstore.scan(str(col), [str(two_days)]).committed is False
