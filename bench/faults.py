"""Fault campaigns: random kills of every writing command, and fuzzed files of every format.

    ./dev faults [--kills 25] [--fuzz 100] [--no-hostile] [--seed 0] [--deadline 60] [--json]

*Kills*: for each writing command (scan, hold, release, tag, compact, gc, emit, remap) a copy
of a small collection (three versions) is worked on by the real command line, which is sent
SIGKILL after a random delay (up to the command's own measured duration). The trial is clean
when every version ``log`` lists still opens and reads whole (every row, every array's
metadata), and a fresh ``scan`` of the series still commits.

*Fuzz*: for each format (HDF5, netCDF3, TIFF) a valid generated file is copied and 1 to 16 of
its bytes are replaced (random bytes, or 4/8-byte integers such as 0, -1, 2^31 at aligned
places). In a child process per batch, each file goes through the scan workers with the
per-file deadline (what ``refstore scan`` runs); an accepted file is then committed alone into
a fresh collection and a window of every array is read back. A failure is a traceback, a
message of more than one line, a hang past the deadline of the batch, or a child that dies.
Files given up at the per-file deadline (or whose worker crashed) are clean: that is the
watchdog doing its job; they are counted apart.

*Hostile stores*: kerchunk reference stores an attacker or a careless generator could hand over
(a ``gen`` entry of 10^9 keys, a 100 MB template, JSON nested 200,000 deep at the top and in
``.zattrs``, a template ``range()`` over 100,000, URLs with a NUL byte or a newline, references to
``/etc/passwd``, ``/dev/urandom``, ``../`` paths, an array of 2^40 x 2^40 chunks of one element)
are imported by the real command line, each in its own process. Clean: one line, exit 2 (the
last: exit 0 with the array recorded unsupported), within the deadline, under 1 GiB peak.

Prints one table: campaign, trials, clean, failed (and what failed, with the files kept).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

CLI = [sys.executable, "-m", "refstore.cli.app"]


@dataclass
class Tally:
    name: str
    trials: int = 0
    clean: int = 0
    notes: list[str] = field(default_factory=list)
    rejected: int = 0
    """fuzz: files the scan refused with one line (clean failures, counted in ``clean``)"""
    deadline: int = 0
    """fuzz: of those, files given up at the per-file deadline or whose worker crashed"""

    def add(self, ok: bool, note: str = "") -> None:
        self.trials += 1
        self.clean += ok
        if not ok and note and len(self.notes) < 10:
            self.notes.append(note)


def _run(args: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, **kw)


# ----------------------------------------------------------------------------- kills
def _template(root: Path) -> tuple[Path, Path]:
    from refstore.fixtures.oisst import write_series

    series = root / "series"
    write_series(series, 6, start=date(2024, 1, 1))
    col = root / "template"
    _run(["-C", str(col), "init"], 120).check_returncode()
    first = [str(p) for p in sorted(series.iterdir())[:4]]  # the folder's rescan adds the other two
    _run(["-C", str(col), "scan", "--concat-dim", "time", *first], 120).check_returncode()
    _run(["-C", str(col), "hold", "--array", "sst", "--window", "0:2"], 120).check_returncode()
    return col, series


def _commands(root: Path, series: Path) -> dict[str, list[str]]:
    return {
        "scan": ["scan", "--concat-dim", "time", str(series)],
        "hold": ["hold", "--array", "sst"],
        "release": ["release", "--array", "sst"],
        "tag": ["tag", "t1"],
        "compact": ["compact"],
        "gc": ["gc", "--keep-last", "1"],
        "emit": ["emit", "kerchunk-parquet", str(root / "out.parq")],
        "remap": ["remap", "add", str(series), "https://example.org/s/"],
    }


def _collection_readable(col: Path) -> str | None:
    """None when every listed version opens and reads whole, else what failed."""
    import refstore

    try:
        c = refstore.Collection.open(str(col))
        versions = [int(v["version"]) for v in c._dataset().versions()]
        for v in versions:
            snap = c.snapshot(v)
            snap.ds.to_table()
            for name in snap.arrays():
                snap.array(name)
    except refstore.RefstoreError as e:
        return f"version unreadable: {e}"
    except Exception as e:  # a raw library error is what the campaign looks for
        return f"version unreadable ({type(e).__name__}): {str(e).splitlines()[0] if str(e) else ''}"
    return None


def kills(n: int, rng: np.random.Generator, work: Path, deadline: float) -> list[Tally]:
    template, series = _template(work)
    cmds = _commands(work, series)
    out = []
    for name, args in cmds.items():
        t = Tally(f"kill {name}")
        col = work / "col"
        shutil.rmtree(col, ignore_errors=True)
        shutil.copytree(template, col)
        start = time.perf_counter()
        _run(["-C", str(col), *args], deadline)  # how long the command takes here, unkilled
        full = time.perf_counter() - start
        for _ in range(n):
            shutil.rmtree(col, ignore_errors=True)
            shutil.rmtree(work / "out.parq", ignore_errors=True)
            shutil.copytree(template, col)
            p = subprocess.Popen([*CLI, "-C", str(col), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)  # fmt: skip
            if name == "emit":  # a previous output to replace: a kill must never leave OUT missing
                _run(["-C", str(col), *args], deadline)
            time.sleep(float(rng.uniform(0, full)))
            p.send_signal(signal.SIGKILL)
            _, err = p.communicate()
            why = _collection_readable(col)
            if why is None:
                again = _run(["-C", str(col), "scan", "--concat-dim", "time", str(series)], deadline)
                if again.returncode != 0 or "Traceback" in again.stderr:
                    why = f"scan after the kill: exit {again.returncode}: {again.stderr.strip()[-300:]}"
            if why is None and name == "emit" and not (work / "out.parq" / ".zmetadata").is_file():
                why = "the killed emit left OUT missing"
            if "Traceback" in (err or "") and p.returncode != -signal.SIGKILL:
                why = why or f"traceback: {err.strip()[-300:]}"
            t.add(why is None, why or "")
        out.append(t)
        _progress(t)
    return out


# ----------------------------------------------------------------------------- hostile stores
_ZARRAY = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|u1", "compressor": None, "fill_value": 0,
           "order": "C", "filters": None}  # fmt: skip


def _spec(refs: dict[str, Any], **extra: Any) -> str:
    base = {".zgroup": json.dumps({"zarr_format": 2}), "x/.zarray": json.dumps(_ZARRAY),
            "x/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["x"]})}  # fmt: skip
    return json.dumps({"version": 1, "refs": {**base, **refs}, **extra})


def _hostile_stores() -> dict[str, tuple[str, int]]:
    """name -> (store text, expected exit code)."""
    deep = "[" * 200_000 + "]" * 200_000
    huge = {**_ZARRAY, "shape": [2**40, 2**40], "chunks": [1, 1]}
    return {
        "gen 10^9 keys": (_spec({}, gen=[{"key": "x/{{i}}", "url": "d.bin", "offset": "{{i}}", "length": "1",
                                          "dimensions": {"i": {"start": 0, "stop": 10**9}}}]), 2),
        "template 100 MB": (_spec({"x/0": ["{{u}}", 0, 4]}, templates={"u": "a" * 100_000_000}), 2),
        "nested JSON": (deep, 2),
        "nested .zattrs": (_spec({"x/.zattrs": '{"a": ' + deep + "}"}), 2),
        "range() 10^6": (_spec({}, gen=[{"key": "x/{{i}}", "url": "{{ range(1000000) | list | length }}",
                                        "dimensions": {"i": [0]}}]), 2),
        "NUL in URL": (_spec({"x/0": ["d\x00.bin", 0, 4]}), 2),
        "newline in URL": (_spec({"x/0": ["d\n.bin", 0, 4]}), 2),
        "/etc/passwd": (_spec({"x/0": ["/etc/passwd", 0, 4]}), 2),
        "/dev/urandom": (_spec({"x/0": ["/dev/urandom", 0, 4]}), 2),
        "../ path": (_spec({"x/0": ["../../../../../etc/passwd", 0, 4]}), 2),
        "2^40 x 2^40": (_spec({"x/.zarray": json.dumps(huge), "x/0.0": ["d.bin", 0, 1],
                               "x/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["y", "x"]})}), 0),
    }  # fmt: skip


_MEASURED = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stderr.write(r.stderr); print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def hostile(work: Path, deadline: float) -> list[Tally]:
    t = Tally("hostile stores")
    work.mkdir(parents=True, exist_ok=True)
    (work / "d.bin").write_bytes(bytes(range(64)))
    for i, (name, (text, code)) in enumerate(_hostile_stores().items()):
        store, col = work / f"s{i}.json", work / f"c{i}"
        store.write_text(text)
        shutil.rmtree(col, ignore_errors=True)
        _run(["-C", str(col), "init"], deadline).check_returncode()
        start = time.perf_counter()
        try:
            cmd = [sys.executable, "-c", _MEASURED, *CLI, "-C", str(col), "import", "kerchunk", str(store)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, cwd=work)
        except subprocess.TimeoutExpired:
            t.add(False, f"{name}: past the {deadline:.0f} s deadline")
            continue
        seconds = time.perf_counter() - start
        got, peak_kib = (int(x) for x in r.stdout.split()[-2:])
        lines = r.stderr.splitlines()
        ok = got == code and "Traceback" not in r.stderr and (len(lines) == 1 if code else True)
        ok = ok and peak_kib < 1 << 20 and len(r.stderr) < 4096
        t.add(ok, f"{name}: exit {got}, {len(lines)} lines, {peak_kib >> 10} MiB, {seconds:.0f} s: {r.stderr[:200]}")
    _progress(t)
    return [t]


def _progress(t: Tally) -> None:
    print(f"# {t.name}: {t.trials} trials, {t.clean} clean, {t.trials - t.clean} failed", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- fuzz
def _bases(root: Path) -> dict[str, Path]:
    from refstore.fixtures.netcdf3 import write_obs_file
    from refstore.fixtures.oisst import write_day
    from refstore.fixtures.tiff import write_tiff

    root.mkdir(parents=True, exist_ok=True)
    data = np.arange(64 * 48, dtype="<u2").reshape(64, 48)
    return {
        "hdf5": write_day(root / "base.nc", date(2024, 1, 1)),
        "netcdf3": write_obs_file(root / "base_nc3.nc", start_hour=0, records=6),
        "tiff": write_tiff(root / "base.tif", data, tile=(16, 16), compression="zlib"),
    }


_INTS = [0, 1, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x80000001, 0xFFFFFFFFFFFFFFFF, 0x7FFFFFFFFFFFFFFF]


def mutate(raw: bytes, rng: np.random.Generator) -> bytes:
    """1 to 16 replaced bytes, or an aligned 4/8-byte integer (deterministic for a seed)."""
    b = bytearray(raw)
    for _ in range(int(rng.integers(1, 17))):
        if rng.random() < 0.5:
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        else:
            width = 4 if rng.random() < 0.5 else 8
            at = int(rng.integers(0, max(1, len(b) - width) // 4)) * 4
            value = _INTS[int(rng.integers(0, len(_INTS)))] & ((1 << (8 * width)) - 1)
            b[at : at + width] = value.to_bytes(width, "little" if rng.random() < 0.5 else "big")
    return bytes(b)


_CHILD = """
import json, shutil, sys, tempfile, traceback
import refstore
from refstore.scan import AutoScanner, ScanResult, scan_many

paths, deadline = sys.argv[2:], float(sys.argv[1])
out = {}
for p, res in scan_many(AutoScanner(), paths, workers=1, timeout=deadline):
    if not isinstance(res, ScanResult):
        given_up = "still not scanned" in res.reason or "crashed" in res.reason
        out[p] = "not one line" if "\\n" in str(res) else ("deadline" if given_up else "refused")
        continue
    col = tempfile.mkdtemp()
    try:
        refstore.init(col)
        refstore.scan(col, [p], timeout=None)  # it scanned within the deadline above
        ds = refstore.open(col)
        for name in ds.arrays:
            a = ds[name]
            try:  # a window of up to 2 chunks per dimension: shapes of fuzzed files can be huge
                a[tuple(slice(0, min(s, 2 * c)) for s, c in zip(a.shape, a.chunks))]
            except refstore.RefstoreError:
                pass
        out[p] = "accepted"
    except refstore.RefstoreError:
        out[p] = "refused"
    except Exception:
        traceback.print_exc()
        out[p] = "traceback"
    finally:
        shutil.rmtree(col, ignore_errors=True)
print(json.dumps(out))
"""


def _fuzz_batch(files: list[Path], deadline: float) -> tuple[dict[str, str], str]:
    """Each file through the scan workers (per-file deadline), then, when accepted, committed
    alone and read back (a window of every array), in a child process: (outcome per file,
    stderr). Outcomes: accepted, refused (one line), deadline (given up or crashed: still one
    line), traceback, not one line; a child that hangs or dies fails its whole batch."""
    args = [sys.executable, "-c", _CHILD, str(deadline), *map(str, files)]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=deadline * len(files) + 300)
    except subprocess.TimeoutExpired:
        return {str(f): "hang" for f in files}, ""
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        return {str(f): f"child exit {p.returncode}" for f in files}, p.stderr
    got: dict[str, str] = json.loads(lines[-1])
    return got, p.stderr


def fuzz(n: int, rng: np.random.Generator, work: Path, deadline: float, batch: int = 50) -> list[Tally]:
    bases = _bases(work / "bases")
    kept = work / "kept"
    kept.mkdir(exist_ok=True)
    out = []
    for fmt, base in bases.items():
        t = Tally(f"fuzz {fmt}")
        raw = base.read_bytes()
        for start in range(0, n, batch):
            folder = work / f"fuzz-{fmt}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            files = []
            for i in range(start, min(n, start + batch)):
                p = folder / f"f{i:05d}{base.suffix}"
                p.write_bytes(mutate(raw, rng))
                files.append(p)
            got, err = _fuzz_batch(files, deadline / 4)
            bad = {f: o for f, o in got.items() if o not in ("accepted", "refused", "deadline")}
            if bad or "Traceback" in err:
                dest = kept / f"{fmt}-{start}"
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(folder, dest)
            for f in files:
                o = got.get(str(f), "missing")
                t.rejected += o in ("refused", "deadline")
                t.deadline += o == "deadline"
                ok = o in ("accepted", "refused", "deadline")
                t.add(ok, "" if ok else f"{o}: {f.name} (kept in {kept / f'{fmt}-{start}'}) {err.strip()[-300:]}")
        out.append(t)
        _progress(t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=25, help="random kills per writing command (8 commands)")
    ap.add_argument("--fuzz", type=int, default=100, help="fuzzed files per format (3 formats)")
    ap.add_argument("--hostile", action=argparse.BooleanOptionalAction, default=True,
                    help="import the hostile reference stores (11 trials)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=60.0, help="seconds before a command counts as hung")
    ap.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    work = a.work or Path(tempfile.mkdtemp(prefix="refstore-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    tallies: list[Tally] = []
    if a.kills:
        tallies += kills(a.kills, rng, work / "kills", a.deadline)
    if a.fuzz:
        tallies += fuzz(a.fuzz, rng, work / "fuzz", a.deadline)
    if a.hostile:
        tallies += hostile(work / "hostile", a.deadline)
    rows = [{"campaign": t.name, "trials": t.trials, "clean": t.clean, "failed": t.trials - t.clean,
             "rejected": t.rejected, "deadline_or_crash": t.deadline, "notes": t.notes} for t in tallies]  # fmt: skip
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'campaign':<16} {'trials':>7} {'clean':>7} {'failed':>7}   (fuzz: refused with one line; of which"
              " deadline/crash)")  # fmt: skip
        for r in rows:
            extra = f"   ({r['rejected']}; {r['deadline_or_crash']})" if r["campaign"].startswith("fuzz") else ""
            print(f"{r['campaign']:<16} {r['trials']:>7} {r['clean']:>7} {r['failed']:>7}{extra}")
        total = sum(r["trials"] for r in rows), sum(r["clean"] for r in rows), sum(r["failed"] for r in rows)
        print(f"{'total':<16} {total[0]:>7} {total[1]:>7} {total[2]:>7}")
        for r in rows:
            for note in r["notes"]:
                print(f"  {r['campaign']}: {note}")
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
