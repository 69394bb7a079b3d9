"""Benchmark: peak memory (RSS) of ``refstore verify`` over a netCDF3 series.

A series of netCDF3 files along an unlimited ``time``, scanned into a collection; by default 24
files of 5,000 records of a 1 x 600 float32 field (288 MB of record data) plus two 1-D record
variables: every record of every record variable is one chunk, 360,000 chunks in all, the shape
of a long hourly series where verify once needed 4.4 GB. Then ``refstore verify`` (every
chunk, and ``--sample 200``) runs in a child process; its peak RSS (``getrusage`` of the
child) and time are reported.

    python -m bench.verify [--files 24] [--records 5000] [--ny 1] [--nx 600] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def write_series(folder: Path, files: int, records: int, ny: int, nx: int) -> list[Path]:
    """``files`` netCDF3 classic files, ``records`` records each of ``sst`` (time, y, x) float32
    and a 1-D record variable ``wind``, consecutive in time."""
    from refstore._netcdf4 import import_netcdf4

    netCDF4 = import_netcdf4()
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    out = []
    for i in range(files):
        path = folder / f"series_{i:03d}.nc"
        with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as nc:
            nc.createDimension("time", None)
            nc.createDimension("y", ny)
            nc.createDimension("x", nx)
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t[:] = np.arange(i * records, (i + 1) * records, dtype="f8")
            sst = nc.createVariable("sst", "f4", ("time", "y", "x"))
            wind = nc.createVariable("wind", "f4", ("time",))
            sst[:] = rng.standard_normal((records, ny, nx), dtype=np.float32)
            wind[:] = rng.standard_normal(records, dtype=np.float32)
        out.append(path)
    return out


def _child_peak(args: list[str]) -> tuple[int, float, int]:
    """Run ``args`` in a child; (peak RSS of that child in bytes, seconds, exit code). The
    child is started from a fresh helper so ``RUSAGE_CHILDREN`` holds only its peak."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "dt = time.perf_counter() - t0\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, dt, rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
    peak, secs, rc = r.stdout.split()
    return int(peak), float(secs), int(rc)


def run(work: Path, files: int, records: int, ny: int, nx: int) -> dict[str, Any]:
    import refstore

    paths = write_series(work / "data", files, records, ny, nx)
    col = str(work / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in paths], concat_dim="time")
    cli = [sys.executable, "-m", "refstore.cli.app", "-C", col, "verify"]
    res: dict[str, Any] = {
        "files": files,
        "record_bytes": files * records * ny * nx * 4,
        "chunks": files * records * 3,
    }
    for label, extra in (("all", []), ("sample_200", ["--sample", "200"])):
        peak, secs, rc = _child_peak([*cli, *extra])
        res[label] = {"peak_rss_bytes": peak, "seconds": secs, "exit": rc}
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=24)
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--ny", type=int, default=1)
    ap.add_argument("--nx", type=int, default=600)
    ap.add_argument("--quick", action="store_true", help="4 files of 50 records")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.files, a.records = 4, 50
    with tempfile.TemporaryDirectory(prefix="refstore-bench-verify-") as tmp:
        t0 = time.perf_counter()
        res = run(Path(tmp), a.files, a.records, a.ny, a.nx)
        res["total_seconds"] = time.perf_counter() - t0
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"verify over {res['files']} netCDF3 files, {res['record_bytes'] / 1e6:.0f} MB of records, "
          f"{res['chunks']} chunks")  # fmt: skip
    for label in ("all", "sample_200"):
        r = res[label]
        mib = r["peak_rss_bytes"] / 2**20
        print(f"  {label:>10}: peak RSS {mib:8.0f} MiB  {r['seconds']:6.1f} s  exit {r['exit']}")


if __name__ == "__main__":
    main()
