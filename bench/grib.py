"""Benchmark: scanning a series of GRIB2 files, refstore against kerchunk's ``scan_grib`` and
cfgrib's index build over the same files (files/s, refs/s, ratios in one run).

The series is generated with ecCodes (``refstore.fixtures.grib``): by default 8 daily files of
4 parameters x 6 pressure levels x 5 steps (120 messages each) on a 91 x 180 grid with a bitmap.
Timed, best of ``--repeat``:
- refstore: ``GribScanner`` over every file (the scan itself), and ``refstore.scan`` of the
  folder with ``--concat-dim time`` into a new collection (scan + one commit, one process);
- kerchunk: ``kerchunk.grib2.scan_grib`` on every file (one reference set per message; one run);
- cfgrib: its file index (``cfgrib.dataset.open_fileindex``, no index file written) per file.

    python -m bench.grib [--files 8] [--ny 91] [--nx 180] [--repeat 2] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

PARAMS = ("t", "u", "v", "z")
LEVELS = (1000, 850, 700, 500, 300, 200)
STEPS = (0, 6, 12, 18, 24)


def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run(files: int, ny: int, nx: int, repeat: int) -> dict[str, Any]:
    import refstore
    from refstore.fixtures.grib import write_grib_series
    from refstore.scan.grib import GribScanner

    tmp = Path(tempfile.mkdtemp(prefix="bench-grib-"))
    paths = write_grib_series(tmp / "series", files, params=PARAMS, levels=LEVELS, steps=STEPS, ny=ny, nx=nx)
    messages = files * len(PARAMS) * len(LEVELS) * len(STEPS)
    size = sum(p.stat().st_size for p in paths)
    res: dict[str, Any] = {"files": files, "messages": messages, "bytes": size, "grid": [ny, nx], "tools": {}}

    def record(name: str, seconds: float, refs: int) -> None:
        res["tools"][name] = {"seconds": seconds, "files_per_s": files / seconds, "refs": refs,
                              "refs_per_s": refs / seconds}  # fmt: skip

    scanner = GribScanner(concat_dim="time")

    def rs_scan() -> int:
        return sum(int(scanner(str(p)).chunks.num_rows) for p in paths)

    scanner(str(paths[0]))  # warm: ecCodes' definitions are loaded on first use (so for cfgrib below)
    secs, _rows = _best(rs_scan, repeat)
    record("refstore scan", secs, messages)

    n = [0]

    def rs_commit() -> int:
        n[0] += 1
        col = str(tmp / f"col{n[0]}")
        refstore.init(col)
        report = refstore.scan(col, [str(tmp / "series")], concat_dim="time", workers=1)
        assert report.new == files and not report.failed, report
        return report.inserted

    secs, _ = _best(rs_commit, repeat)
    record("refstore scan+commit", secs, messages)

    try:
        from kerchunk.grib2 import scan_grib
    except ImportError:
        res["tools"]["kerchunk scan_grib"] = None
    else:

        def kc() -> int:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return sum(len(scan_grib(str(p))) for p in paths)

        secs, refs = _best(kc, 1)  # slow: one run
        record("kerchunk scan_grib", secs, int(refs))

    try:
        from cfgrib import dataset
        from cfgrib import messages as cfmessages
    except ImportError:
        res["tools"]["cfgrib index"] = None
    else:

        def cf() -> int:
            for p in paths:
                stream = cfmessages.FileStream(str(p), errors="raise")
                dataset.open_fileindex(stream, indexpath="", index_keys=dataset.compute_index_keys())
            return messages

        secs, _ = _best(cf, repeat)
        record("cfgrib index", secs, messages)
    base = res["tools"]["refstore scan"]["seconds"]
    for r in res["tools"].values():
        if r is not None:
            r["x_refstore_scan"] = r["seconds"] / base
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--ny", type=int, default=91)
    ap.add_argument("--nx", type=int, default=180)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="2 files, one run")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    files, repeat = (2, 1) if a.quick else (a.files, a.repeat)
    res = run(files, a.ny, a.nx, repeat)
    if a.json:
        json.dump(res, sys.stdout, indent=2)
        print()
        return
    print(f"GRIB2 series: {res['files']} files, {res['messages']:,} messages, {res['bytes'] / 1e6:.1f} MB, "
          f"grid {res['grid'][0]} x {res['grid'][1]}")  # fmt: skip
    for name, r in res["tools"].items():
        if r is None:
            print(f"  {name:<22} not installed")
            continue
        print(f"  {name:<22} {r['seconds']:7.3f} s  {r['files_per_s']:8.1f} files/s  {r['refs_per_s']:10.0f} refs/s"
              f"  ({r['x_refstore_scan']:.1f}x refstore scan's time)")  # fmt: skip


if __name__ == "__main__":
    main()
